//! PCA parameters: one entry point that fits the exact, SVRG-PCA or VR-PCA solver into a
//! [`PcaModel`].

use faer::MatRef;
use rand::Rng;
use stolr_estimators::DataRef;

use stolr_comm::{Communicator, RowShard, SingleProcess};
use stolr_memory::MemoryBudget;

use crate::job::{PcaStream, Shard};
use crate::methods::PcaMethod;
use crate::pca::{PcaModel, SvrgPca, SvrgPcaConfig, VrPca, VrPcaConfig, exact_pca};
use crate::{Fit, Observer, SolverError, Stop, run};

/// Which PCA solver [`Pca`] fits with (the streaming solvers build their model with
/// [`PcaModel::from_basis`] after a pass over a stream).
#[derive(Debug, Clone, PartialEq)]
pub enum PcaSolver {
    /// A dense symmetric eigensolver on `XᵀX` ([`exact_pca`]).
    Exact,
    /// SVRG-PCA with Barzilai–Borwein steps ([`SvrgPca`]); its `rank` is overwritten by
    /// [`Pca::rank`].
    SvrgBb(SvrgPcaConfig),
    /// Shamir's block VR-PCA ([`VrPca`]); its `rank` is overwritten by [`Pca::rank`].
    VrPca(VrPcaConfig),
}

impl PcaSolver {
    /// The name as the CLI spells it: `exact`, `svrg-bb`, `vr-pca`.
    pub fn name(&self) -> &'static str {
        use crate::methods::Named;
        match self {
            PcaSolver::Exact => PcaMethod::Exact.name(),
            PcaSolver::SvrgBb(_) => PcaMethod::SvrgBb.name(),
            PcaSolver::VrPca(_) => PcaMethod::VrPca.name(),
        }
    }
}

/// What [`Pca::prepare`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Column means subtracted, length `d` (zeros without centring).
    pub mean: Vec<f64>,
    /// The scale divided by, length `d` (ones without scaling).
    pub scale: Vec<f64>,
    /// `(x − mean) / scale` `(n, d)`, or its transpose `(d, n)` when `transposed`.
    data: faer::Mat<f64>,
    transposed: bool,
}

impl Prepared {
    /// The prepared data `(x − mean) / scale`, shape `(n, d)`, in the memory layout of the
    /// data given to [`Pca::prepare`] (row-major stays row-major).
    pub fn x(&self) -> MatRef<'_, f64> {
        if self.transposed { self.data.transpose() } else { self.data.as_ref() }
    }
}

/// PCA parameters: `rank` principal axes of the rows of `x`, after subtracting the mean of
/// every feature (`center`, scikit-learn's default) and dividing by the largest absolute value
/// of the centred data (`scale`, e.g. MNIST's 255). [`Fit::fit`] returns a [`PcaModel`] (see its
/// example).
#[derive(Debug, Clone, PartialEq)]
pub struct Pca {
    /// Number of components `r`, `1 ≤ r ≤ min(n, d)`.
    pub rank: usize,
    /// Subtract the mean of every feature.
    pub center: bool,
    /// Divide by the largest absolute entry (after centring).
    pub scale: bool,
    /// The solver.
    pub solver: PcaSolver,
}

impl Pca {
    /// `rank` components by `solver`, neither centred nor scaled.
    pub fn new(rank: usize, solver: PcaSolver) -> Self {
        Self { rank, center: false, scale: false, solver }
    }

    /// Sets centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Sets scaling.
    pub fn scale(mut self, scale: bool) -> Self {
        self.scale = scale;
        self
    }

    /// The mean (zeros without centring) and the scale (ones without scaling) of `x`, and `x`
    /// prepared with them, `(x − mean) / scale`.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for empty or non-finite data.
    pub fn prepare(&self, x: MatRef<'_, f64>) -> Result<Prepared, SolverError> {
        self.prepare_shard(x, &SingleProcess)
    }

    /// [`Pca::prepare`] of this rank's rows `x` `(n_p, d)` with the mean and the scale of the
    /// rows of every rank of `comm` (sums added in rank order). Collective; one process is
    /// [`Pca::prepare`] bit for bit.
    ///
    /// # Errors
    /// As [`Pca::prepare`].
    pub fn prepare_shard(&self, x: MatRef<'_, f64>, comm: &dyn Communicator) -> Result<Prepared, SolverError> {
        self.prepare_data(DataRef::Dense(x), comm)
    }

    /// [`Pca::prepare_shard`] of dense rows given as float64 or float32: float32 rows are
    /// converted (exactly) into the prepared copy itself, with no float64 copy before it, and
    /// give the same bits as the same rows in float64.
    ///
    /// # Errors
    /// As [`Pca::prepare`]; [`SolverError::SparseUnsupported`] for sparse rows.
    pub fn prepare_data(&self, x: DataRef<'_>, comm: &dyn Communicator) -> Result<Prepared, SolverError> {
        if x.is_sparse() {
            return Err(SolverError::SparseUnsupported { what: "PCA".into() });
        }
        x.check()?;
        let d = x.ncols();
        let mean = if self.center {
            stolr_estimators::column_means_of(x, |buffer| comm.all_reduce_sum(buffer))
        } else {
            vec![0.0; d]
        };
        // The copy keeps the source's layout (a C-order NumPy array stays row-major): a
        // transposing copy of MNIST costs more than the exact PCA's matrix product.
        let (mut data, transposed) = match x {
            DataRef::Dense(x) => {
                let transposed = x.col_stride() == 1 && x.row_stride() != 1;
                (stolr_estimators::to_owned(if transposed { x.transpose() } else { x }), transposed)
            }
            DataRef::DenseF32(x) => {
                let transposed = x.col_stride() == 1 && x.row_stride() != 1;
                (stolr_estimators::f32_to_f64(if transposed { x.transpose() } else { x }), transposed)
            }
            DataRef::Sparse(_) => unreachable!("refused above"),
        };
        // Column j of `data` is a sample (transposed) or a feature.
        for j in 0..data.ncols() {
            let col = data.col_as_slice_mut(j);
            if transposed {
                col.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
            } else {
                col.iter_mut().for_each(|v| *v -= mean[j]);
            }
        }
        let mut scale = vec![1.0; d];
        if self.scale {
            let local = (0..data.ncols())
                .map(|j| data.col_as_slice(j).iter().fold(0.0_f64, |a, v| a.max(v.abs())))
                .fold(0.0, f64::max);
            let max =
                if comm.size() > 1 { comm.all_gather(&[local]).iter().fold(0.0, |m, v| v[0].max(m)) } else { local };
            if max > 0.0 {
                data *= 1.0 / max;
                scale = vec![max; d];
            }
        }
        Ok(Prepared { mean, scale, data, transposed })
    }

    /// Fits on data already prepared by [`Pca::prepare`] and returns the model with the run's
    /// stop reason (`None` for the exact solver) and epoch count.
    ///
    /// # Errors
    /// As [`Fit::fit`].
    pub fn fit_prepared(
        &self,
        prepared: MatRef<'_, f64>,
        mean: Vec<f64>,
        scale: Vec<f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(PcaModel, Option<Stop>, usize), SolverError> {
        self.fit_prepared_shard(prepared, mean, scale, rng, observer, &SingleProcess, RowShard::whole(prepared.nrows()))
    }

    /// The one fit of every front end: prepares this rank's rows `shard.rows()` with the mean
    /// and scale of every rank's ([`Pca::prepare_shard`]) and fits. Every solver runs on
    /// several ranks: the exact solver adds every rank's `d × d` Gram matrix of its rows in
    /// rank order (no copy of the rows: [`Pca::exact_rows_bytes`] per rank); SVRG-PCA
    /// ([`SvrgPca::new_sharded`]) and VR-PCA ([`VrPca::new_sharded`]) split their snapshots'
    /// products across the ranks and draw the same samples on every rank. Every rank returns
    /// the same model (`d × r`), with the stop reason and epochs; only rank 0 reports to
    /// `observer`. Collective.
    ///
    /// # Errors
    /// As [`Fit::fit`].
    pub fn fit_shard(
        &self,
        shard: &Shard<'_>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(PcaModel, Option<Stop>, usize), SolverError> {
        let comm = shard.comm;
        if self.exact_on_rows(shard) {
            return Ok((self.fit_exact_rows(shard.data(), comm)?, None, 0));
        }
        let prepared = self.prepare_data(shard.data(), comm)?;
        let (mean, scale) = (prepared.mean.clone(), prepared.scale.clone());
        self.fit_prepared_shard(prepared.x(), mean, scale, rng, observer, comm, shard.place)
    }

    /// Whether [`Pca::fit_shard`] runs the exact solver on the rows as they are
    /// ([`Pca::fit_exact_rows`]): dense rows, tall (`n ≥ d`) on one process, any shape on
    /// several (the wide one-process path through `X Xᵀ` needs every row on one process).
    fn exact_on_rows(&self, shard: &Shard<'_>) -> bool {
        let (n, d) = shard.data().shape();
        matches!(self.solver, PcaSolver::Exact) && !shard.is_sparse() && (shard.comm.size() > 1 || n >= d)
    }

    /// Rows per block of [`Pca::fit_exact_rows`] for `d` features: about 2¹⁷ values (1 MiB, in
    /// the L2 cache while it is written and multiplied).
    fn exact_block_rows(d: usize) -> usize {
        ((1usize << 17) / d.max(1)).max(16)
    }

    /// Bytes the exact solver allocates for `d` features on the rows of one process with
    /// `n ≥ d` (the path of [`PcaJob::run`] that makes no copy of the rows): the lanes of
    /// [`gram_of_row_blocks`](stolr_lowrank::gram_of_row_blocks) and the eigensolver's `(d, d)`
    /// copies.
    pub fn exact_rows_bytes(d: usize) -> u64 {
        stolr_lowrank::gram_blocks_bytes(d, Self::exact_block_rows(d))
            .saturating_add(stolr_memory::f64_bytes(&[3, d, d]))
    }

    /// The exact solver on dense rows `x` `(n_p, d)`, float64 or float32, this rank's block of
    /// the rows of every rank of `comm` (one process: all of them, `n ≥ d`), without a prepared
    /// copy of the rows: the mean ([`column_means_of`](stolr_estimators::column_means_of), the
    /// column sums and the row count added over the ranks), the scale (the largest centred
    /// absolute value over the ranks) and the Gram matrix $\tilde X^\top \tilde X$ `(d, d)` of
    /// the centred, scaled rows $\tilde X = (X - 1\mu^\top)/s$ are each one pass over blocks
    /// of rows converted and centred on the fly
    /// ([`gram_of_row_blocks`](stolr_lowrank::gram_of_row_blocks)); the ranks' Gram matrices
    /// are added in rank order (its lower triangle, `d(d+1)/2` doubles, once), and every rank
    /// computes the same top `rank` eigenpairs (the components, eigenvalues nonincreasing) and
    /// the trace (the total variance). Centred and not scaled, the passes shrink
    /// ([`Pca::centred_gram_one_pass`]): one process makes one pass (the Gram matrix of rows
    /// shifted by [`sample_shift`], corrected by the exact mean), several make two (the plain
    /// mean's sums, which double as the finiteness check, then the Gram matrix corrected
    /// likewise); either falls back to the passes above when the correction would cost digits.
    /// So several ranks give the one-process model up to the rounding of the rank-ordered sums
    /// and of the shift. Memory: [`Pca::exact_rows_bytes`] per rank. The same bits for float32
    /// rows as for the same rows in float64, and for any number of threads. Collective; a rank
    /// may hold no rows.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for empty or non-finite rows (on every rank when one rank's
    /// rows are not finite: the rank that holds the entry names it, the others name the rank);
    /// [`SolverError::InvalidRank`] (on one process, centred and unscaled, before the rows are
    /// checked); [`SolverError::InvalidConfig`] when the sums of squares exceed the float64
    /// range.
    fn fit_exact_rows(&self, x: DataRef<'_>, comm: &dyn Communicator) -> Result<PcaModel, SolverError> {
        let (n_local, d) = x.shape();
        let fused = self.center && !self.scale;
        // Centred and not scaled on one process: one pass over the rows, centred by a shift read
        // off rows spread over them ([`sample_shift`]) and corrected by the exact mean. Non-finite rows
        // (the check below names the entry) or a correction too large for the shift (none
        // returned) take the checked path below.
        if fused && comm.size() == 1 && n_local > 0 && d > 0 {
            crate::error::check_pca_rank(self.rank, n_local, d)?;
            let shift = sample_shift(x, Self::exact_block_rows(d));
            if let Some((g, mean)) = Self::centred_gram_one_pass(x, shift, n_local, comm) {
                return self.exact_from_gram(g, mean, vec![1.0; d], n_local);
            }
        }
        // Several processes: the plain mean's column sums come first and double as the check
        // (finite column sums mean finite entries); the check's own pass runs only when a sum
        // is not finite, to name the entry.
        let fused = fused && comm.size() > 1;
        let sums = (fused && n_local > 0 && d > 0).then(|| stolr_estimators::column_sums_of(x));
        let check = || match &sums {
            Some(sums) if sums.iter().all(|s| s.is_finite()) => Ok(()),
            _ => x.check(),
        };
        if comm.size() > 1 {
            // Collective check, so that no rank is left waiting in a sum the others skip.
            let local = if x.nrows() == 0 { Ok(()) } else { check() };
            let flags = comm.all_gather(&[if local.is_ok() { 1.0 } else { 0.0 }]);
            local?;
            if let Some(bad) = flags.iter().position(|f| f[0] == 0.0) {
                return Err(SolverError::InvalidConfig {
                    name: "data",
                    reason: format!(
                        "the rows of rank {bad} of {} are not finite (rank {bad} names the entry)",
                        comm.size()
                    ),
                });
            }
        } else {
            check()?;
        }
        let mut count = [n_local as f64];
        comm.all_reduce_sum(&mut count);
        let n = count[0] as usize;
        if n == 0 {
            // Every rank holds no rows: the same error everywhere.
            return Err(stolr_estimators::EstimatorError::EmptyData { nrows: 0, ncols: d }.into());
        }
        crate::error::check_pca_rank(self.rank, n, d)?;
        if fused {
            let mut sums = sums.unwrap_or_else(|| vec![0.0; d]);
            comm.all_reduce_sum(&mut sums);
            let first: Vec<f64> = sums.iter().map(|s| s / n as f64).collect();
            if let Some((g, mean)) = Self::centred_gram_one_pass(x, first, n, comm) {
                return self.exact_from_gram(g, mean, vec![1.0; d], n);
            }
        }
        let mean =
            if self.center { stolr_estimators::column_means_of(x, |b| comm.all_reduce_sum(b)) } else { vec![0.0; d] };
        let (mut inv, mut scale) = (1.0, vec![1.0; d]);
        if self.scale {
            let local = match x {
                DataRef::Dense(v) => max_abs_centred(v, &mean),
                DataRef::DenseF32(v) => max_abs_centred(v, &mean),
                DataRef::Sparse(_) => unreachable!("dense rows"),
            };
            let max =
                if comm.size() > 1 { comm.all_gather(&[local]).iter().fold(0.0, |m, v| v[0].max(m)) } else { local };
            if max > 0.0 {
                inv = 1.0 / max;
                scale = vec![max; d];
            }
        }
        let mut g = Self::exact_gram_part(x, &mean, (self.scale && inv != 1.0).then_some(inv));
        stolr_comm::all_reduce_lower(comm, &mut g);
        self.exact_from_gram(g, mean, scale, n)
    }

    /// The centred Gram matrix (lower triangle) and the mean of all the rows from one pass over
    /// this process's rows `x`: the blocks are centred by `shift` (any vector near the mean,
    /// the same on every process: the plain mean, or [`sample_shift`]) and their column sums
    /// `c = Σ (x_i − shift)` taken with the Gram matrix `G`
    /// ([`stolr_lowrank::gram_and_sums_of_row_blocks`]), both added over the processes; then
    /// the mean is `shift + c/n` and the centred Gram matrix `G − c cᵀ/n` (exact algebra; with
    /// the plain mean as the shift this is the two-pass mean of
    /// [`stolr_estimators::column_means`] without its own second pass). `None` (the caller
    /// takes the two-pass path) when a sum is not finite, or when for some column the
    /// correction is not small next to the centred sum of squares: `c_j²/n` above `10⁴` times
    /// it, i.e. more than 4 of the 16 digits of that diagonal entry lost to the subtraction
    /// (`c_j²/n = n (mean_j − shift_j)²`: a shift more than 100 standard deviations off).
    fn centred_gram_one_pass(
        x: DataRef<'_>,
        shift: Vec<f64>,
        n: usize,
        comm: &dyn Communicator,
    ) -> Option<(faer::Mat<f64>, Vec<f64>)> {
        let (n_local, d) = x.shape();
        let (mut g, mut c) =
            stolr_lowrank::gram_and_sums_of_row_blocks(n_local, d, Self::exact_block_rows(d), |start, out| {
                let len = out.nrows();
                match x {
                    DataRef::Dense(v) => fill_centred(v.subrows(start, len), out, &shift, None),
                    DataRef::DenseF32(v) => fill_centred(v.subrows(start, len), out, &shift, None),
                    DataRef::Sparse(_) => unreachable!("dense rows"),
                }
            });
        stolr_comm::all_reduce_lower(comm, &mut g);
        comm.all_reduce_sum(&mut c);
        if !(c.iter().chain(&shift).all(|v| v.is_finite())) {
            return None;
        }
        let n = n as f64;
        let small = (0..d).all(|j| {
            let correction = c[j] * c[j] / n;
            correction == 0.0 || correction <= 1e4 * (g[(j, j)] - correction)
        });
        if !small {
            return None;
        }
        for b in 0..d {
            for a in b..d {
                g[(a, b)] -= c[a] * c[b] / n;
            }
        }
        let mean = shift.iter().zip(&c).map(|(m, c)| m + c / n).collect();
        Some((g, mean))
    }

    /// This block's part of the exact fit's Gram matrix (`Pca::fit_exact_rows`): $\tilde X_b^\top \tilde X_b$
    /// `(d, d)` (lower triangle; the upper one is not read) of the rows `x` `(n_b, d)` (dense,
    /// float64 or float32) centred by `mean` (length `d`, the mean of every row) and multiplied
    /// by `inv` when given, one pass over blocks of rows converted and centred on the fly.
    /// Memory [`Pca::exact_rows_bytes`]. The parts of the blocks of the rows, added in a fixed
    /// order, give the Gram matrix [`Pca::exact_from_gram`] takes (the rank-ordered all-reduce
    /// of several processes; a Dask array's chunks).
    ///
    /// # Panics
    /// If `x` is sparse (the caller refuses sparse rows) or `mean` is not of length `d`.
    pub fn exact_gram_part(x: DataRef<'_>, mean: &[f64], inv: Option<f64>) -> faer::Mat<f64> {
        let (n_local, d) = x.shape();
        assert_eq!(mean.len(), d, "exact_gram_part: a mean of length {} for {d} features", mean.len());
        let block_rows = Self::exact_block_rows(d);
        // Each block is written straight from the source into the lane's buffer.
        stolr_lowrank::gram_of_row_blocks(n_local, d, block_rows, |start, out| {
            let len = out.nrows();
            match x {
                DataRef::Dense(v) => fill_centred(v.subrows(start, len), out, mean, inv),
                DataRef::DenseF32(v) => fill_centred(v.subrows(start, len), out, mean, inv),
                DataRef::Sparse(_) => unreachable!("dense rows"),
            }
        })
    }

    /// The exact model from the Gram matrix `g` `(d, d)` (lower triangle) of the `n` centred,
    /// scaled rows ([`Pca::exact_gram_part`], added over the blocks): the top `rank`
    /// eigenpairs (the components, eigenvalues nonincreasing, divided by `n − 1`) and the
    /// total variance (the trace over `n − 1`).
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for a rank outside `1..=min(n, d)`; [`SolverError::LowRank`]
    /// if the eigendecomposition fails.
    pub fn exact_from_gram(
        &self,
        g: faer::Mat<f64>,
        mean: Vec<f64>,
        scale: Vec<f64>,
        n: usize,
    ) -> Result<PcaModel, SolverError> {
        crate::error::check_pca_rank(self.rank, n, g.ncols())?;
        let trace: f64 = (0..g.ncols()).map(|j| g[(j, j)]).sum();
        let pairs = crate::pca::rayleigh_ritz::gram_top_pairs(g, self.rank)?;
        let total = trace / n.saturating_sub(1).max(1) as f64;
        PcaModel::from_basis(self.solver.name(), mean, scale, &pairs, n)?.with_total_variance(total)
    }

    /// One round of the two-pass column means of dense rows held in blocks
    /// ([`column_means_of`](stolr_estimators::column_means_of), whose sums a process adds over
    /// the ranks): `combined` holds the sums of every block already added in a fixed order, in
    /// the order the means ask for them: `[[n]]` (the row count) returns this block's column
    /// sums (length `d`); `[[n], sums]` this block's sums of $x_{ij} - \text{sums}_j/n$;
    /// `[[n], sums, corrections]` (on any rows, e.g. none) the means, the same formula as one
    /// process. So the means of the blocks are those of the rows up to the order of the sums.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for non-finite rows; [`SolverError::InvalidConfig`]
    /// (`combined`) for an empty `combined`, more than three sums, or sums of the wrong length.
    pub fn exact_means_round(x: DataRef<'_>, combined: &[Vec<f64>]) -> Result<Vec<f64>, SolverError> {
        let d = x.ncols();
        let lengths_ok = combined.first().is_some_and(|c| c.len() == 1)
            && combined.len() <= 3
            && combined.iter().skip(1).all(|c| c.len() == d);
        if !lengths_ok {
            return Err(SolverError::InvalidConfig {
                name: "combined",
                reason: format!(
                    "the rounds of the means are [[n]], [[n], sums] or [[n], sums, corrections] for {d} features"
                ),
            });
        }
        if x.nrows() > 0 {
            x.check()?;
        }
        let mut call = 0;
        let mut recorded = None;
        let means = stolr_estimators::column_means_of(x, |buffer| {
            match combined.get(call) {
                Some(known) => buffer.copy_from_slice(known),
                None if recorded.is_none() => recorded = Some(buffer.to_vec()),
                None => {}
            }
            call += 1;
        });
        Ok(recorded.unwrap_or(means))
    }

    /// [`Pca::fit_prepared`] on this rank's prepared rows at `place` among those of `comm`.
    #[allow(clippy::too_many_arguments)]
    fn fit_prepared_shard(
        &self,
        prepared: MatRef<'_, f64>,
        mean: Vec<f64>,
        scale: Vec<f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
        comm: &dyn Communicator,
        place: RowShard,
    ) -> Result<(PcaModel, Option<Stop>, usize), SolverError> {
        let n = place.total;
        let name = self.solver.name();
        // The other ranks save their parts of the checkpoints, and report nothing.
        let mut others = None;
        let observer = crate::CheckpointsOnly::for_rank(comm.is_root(), observer, &mut others);
        let (pairs, stop, epochs) = match &self.solver {
            PcaSolver::Exact => (exact_pca(prepared, self.rank)?, None, 0),
            PcaSolver::SvrgBb(config) => {
                // Row-major rows: the inner loop reads one row at a time.
                let rows = stolr_estimators::to_owned(prepared.transpose());
                let config = SvrgPcaConfig { rank: self.rank, ..config.clone() };
                let mut solver = SvrgPca::new_sharded(rows.transpose(), config, rng, comm)?;
                let stop = run(&mut solver, rng, observer)?;
                let out = solver.finish(stop)?;
                (out.pairs, Some(stop), out.epochs)
            }
            PcaSolver::VrPca(config) => {
                let rows = stolr_estimators::to_owned(prepared.transpose());
                let config = VrPcaConfig { rank: self.rank, ..config.clone() };
                let mut solver = VrPca::new_sharded(rows.transpose(), config, rng, comm)?;
                let stop = run(&mut solver, rng, observer)?;
                let out = solver.finish(stop)?;
                (out.pairs, Some(stop), out.epochs)
            }
        };
        // ‖X̃‖²_F over every rank, for the explained variance ratio.
        let mut squares = [prepared.squared_norm_l2()];
        if comm.size() > 1 {
            comm.all_reduce_sum(&mut squares);
        }
        let total = squares[0] / n.saturating_sub(1).max(1) as f64;
        let model = PcaModel::from_basis(name, mean, scale, &pairs, n)?.with_total_variance(total)?;
        Ok((model, stop, epochs))
    }
}

/// A PCA job: the typed request every front end builds (the CLI from its arguments, Python
/// from keyword arguments), run by [`PcaJob::run`] on the rows of a [`Shard`]. The same job
/// and seed give the same bits from every front end.
///
/// # Example
/// ```
/// use faer::Mat;
/// use stolr_solvers::{Pca, PcaJob, PcaSolver, Shard};
///
/// let x = Mat::from_fn(40, 3, |i, j| ((i * 5 + j * 7) % 13) as f64);
/// let job = PcaJob::new(Pca::new(2, PcaSolver::Exact).center(true), 7);
/// let outcome = job.run(Shard::whole(x.as_ref()), &mut ()).unwrap();
/// assert_eq!(outcome.model.components().shape(), (3, 2));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PcaJob {
    /// Rank, centring, scaling and solver.
    pub pca: Pca,
    /// The seed of the solver's draws (stream [`PcaStream::Solver`]).
    pub seed: u64,
    /// The budget the prepared copies of the rows are checked against before they are made.
    pub memory: MemoryBudget,
}

/// What a PCA job produced (the same on every rank).
#[derive(Debug, Clone)]
pub struct PcaJobOutcome {
    /// The model: components `(d, r)`, eigenvalues nonincreasing.
    pub model: PcaModel,
    /// Why an iterative solver stopped (`None` for the exact solver).
    pub stop: Option<Stop>,
    /// Epochs run (0 for the exact solver).
    pub epochs: usize,
    /// The time of the fit, the preparation of the rows included.
    pub solve_time: std::time::Duration,
}

impl PcaJob {
    /// `pca` with `seed` and the default budget.
    pub fn new(pca: Pca, seed: u64) -> Self {
        Self { pca, seed, memory: MemoryBudget::default() }
    }

    /// Runs the job on the rows of `shard` ([`Pca::fit_shard`]; collective). Only rank 0
    /// reports to `observer`.
    ///
    /// # Errors
    /// [`SolverError::Memory`] when the prepared copies (`8·n_p·d` bytes, twice for the
    /// iterative solvers' row-major copy), or for the exact solver on the rows as they are
    /// (one process, `n ≥ d`; several ranks, any shape) its Gram matrices
    /// ([`Pca::exact_rows_bytes`]), exceed the budget; as [`Pca::fit_shard`].
    pub fn run(&self, shard: Shard<'_>, observer: &mut dyn Observer) -> Result<PcaJobOutcome, SolverError> {
        let started = std::time::Instant::now();
        let (n, d) = shard.data().shape();
        if self.pca.exact_on_rows(&shard) {
            // No copy of the rows: blocks of them and the d × d Gram matrix (on every rank).
            self.memory.check(format!("the exact PCA's {d} x {d} Gram matrices"), Pca::exact_rows_bytes(d))?;
        } else {
            let copies = if matches!(self.pca.solver, PcaSolver::Exact) { 1 } else { 2 };
            self.memory.check(
                format!("the prepared copy of the {n} x {d} rows (centred, scaled)"),
                stolr_memory::f64_bytes(&[copies, n, d]),
            )?;
        }
        let (model, stop, epochs) = self.pca.fit_shard(&shard, &mut PcaStream::Solver.rng(self.seed), observer)?;
        Ok(PcaJobOutcome { model, stop, epochs, solve_time: started.elapsed() })
    }
}

/// The largest $|x_{ij} - \mu_j|$ over the rows `x` `(n, d)` (float64 or float32, read in its
/// memory order).
fn max_abs_centred<T: Copy + Into<f64>>(x: MatRef<'_, T>, mean: &[f64]) -> f64 {
    let (n, d) = x.shape();
    let mut max = 0.0_f64;
    if x.col_stride() == 1 && x.row_stride() != 1 {
        for i in 0..n {
            for (j, m) in mean.iter().enumerate().take(d) {
                max = max.max((x[(i, j)].into() - m).abs());
            }
        }
    } else {
        for (j, m) in mean.iter().enumerate().take(d) {
            for i in 0..n {
                max = max.max((x[(i, j)].into() - m).abs());
            }
        }
    }
    max
}

/// The shift by which the one-process exact fit centres its rows before their mean is known
/// (`Pca::centred_gram_one_pass`), length `d`: for each column the mean of `min(n, rows)` rows
/// of `x` `(n, d)` (dense) spread evenly over all of them (rows `⌊k n / h⌋`, so that sorted data
/// gives a shift near the mean, not near its first rows), or the value those rows share when
/// they hold one value only, so that a constant column centres to exactly zero (its plain mean
/// may round off the value). Reads `rows·d` values, not the whole matrix; NaN if those rows are
/// not finite.
///
/// # Panics
/// If `x` is sparse or has no rows (a caller's bug).
fn sample_shift(x: DataRef<'_>, rows: usize) -> Vec<f64> {
    fn of<T: Copy + Into<f64>>(x: MatRef<'_, T>, sample: &[usize]) -> Vec<f64> {
        (0..x.ncols())
            .map(|j| {
                let first: f64 = x[(sample[0], j)].into();
                let (mut sum, mut same) = (0.0, true);
                for &i in sample {
                    let v: f64 = x[(i, j)].into();
                    sum += v;
                    same &= v == first;
                }
                if same { first } else { sum / sample.len() as f64 }
            })
            .collect()
    }
    let n = x.nrows();
    let h = n.min(rows);
    assert!(h > 0, "sample_shift: no rows");
    let sample: Vec<usize> = (0..h).map(|k| k * n / h).collect();
    match x {
        DataRef::Dense(v) => of(v, &sample),
        DataRef::DenseF32(v) => of(v, &sample),
        DataRef::Sparse(_) => unreachable!("dense rows"),
    }
}

/// Writes $(x_{ij} - \mu_j)$, times `inv` when given, into `out` `(len, d)` for the rows `x`
/// `(len, d)` (float64 or float32, read in its memory order): the value [`Pca::prepare_data`]
/// gives the entry, bit for bit.
fn fill_centred<T: Copy + Into<f64>>(x: MatRef<'_, T>, mut out: faer::MatMut<'_, f64>, mean: &[f64], inv: Option<f64>) {
    let (n, d) = x.shape();
    let value = |v: T, m: f64| match inv {
        Some(inv) => (v.into() - m) * inv,
        None => v.into() - m,
    };
    if x.col_stride() == 1 && x.row_stride() != 1 {
        // Row-major rows into the column-major `out`: a few rows at a time, so that each
        // column of `out` is written in runs of ROWS values rather than one value per page
        // (row by row, every value of a row landed on another page: on MNIST from NumPy this
        // pass took 10 % of the fit against 7 % for the column-major rows of the CLI).
        const ROWS: usize = 16;
        for start in (0..n).step_by(ROWS) {
            let end = (start + ROWS).min(n);
            for (j, &m) in mean.iter().enumerate().take(d) {
                for i in start..end {
                    out[(i, j)] = value(x[(i, j)], m);
                }
            }
        }
    } else {
        for (j, &m) in mean.iter().enumerate().take(d) {
            for i in 0..n {
                out[(i, j)] = value(x[(i, j)], m);
            }
        }
    }
}

impl PcaMethod {
    /// The batch solver (`None` for a streaming one): SVRG-PCA as `svrg` configures it
    /// (its rank is overwritten by the fit), VR-PCA with `epochs` (default
    /// [`VrPcaConfig::DEFAULT_EPOCHS`]).
    pub fn batch(self, svrg: SvrgPcaConfig, epochs: Option<usize>) -> Option<PcaSolver> {
        match self {
            Self::SvrgBb => Some(PcaSolver::SvrgBb(svrg)),
            Self::VrPca => {
                Some(PcaSolver::VrPca(VrPcaConfig::new(svrg.rank, epochs.unwrap_or(VrPcaConfig::DEFAULT_EPOCHS))))
            }
            Self::Exact => Some(PcaSolver::Exact),
            _ => None,
        }
    }
}

impl Fit for Pca {
    type Model = PcaModel;

    /// Prepares `x` `(n, d)` (centre, scale) and fits.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `rank` 0 or above `min(n, d)`;
    /// [`SolverError::InvalidConfig`] for bad solver settings; [`SolverError::Estimator`] for
    /// empty or non-finite data; [`SolverError::Diverged`] and factorization errors.
    fn fit(&self, x: MatRef<'_, f64>, rng: &mut dyn Rng, observer: &mut dyn Observer) -> Result<PcaModel, SolverError> {
        if matches!(self.solver, PcaSolver::Exact) && x.nrows() >= x.ncols() {
            return self.fit_exact_rows(DataRef::Dense(x), &SingleProcess);
        }
        let p = self.prepare(x)?;
        Ok(self.fit_prepared(p.x(), p.mean.clone(), p.scale.clone(), rng, observer)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass centring's guard: a shift near the mean gives the two-pass Gram matrix and
    /// mean; a shift far enough off that the correction would cost digits (`c_j²/n` above
    /// `10⁴` times the centred sum of squares), or a non-finite shift, gives `None`.
    #[test]
    fn one_pass_centring_refuses_a_shift_that_costs_digits() {
        let x = faer::Mat::from_fn(400, 3, |i, j| ((i * 7 + j * 3) as f64).sin() + 5.0 * j as f64);
        let mean = stolr_estimators::column_means(x.as_ref());
        let centred = faer::Mat::from_fn(400, 3, |i, j| x[(i, j)] - mean[j]);
        let dense = centred.transpose() * &centred;
        for offset in [0.0, 0.3, 10.0] {
            let shift: Vec<f64> = mean.iter().map(|m| m + offset).collect();
            let (g, got) = Pca::centred_gram_one_pass(DataRef::Dense(x.as_ref()), shift, 400, &SingleProcess)
                .expect("a shift within a few standard deviations");
            for j in 0..3 {
                assert!(
                    (got[j] - mean[j]).abs() <= 1e-14 * (1.0 + mean[j].abs()),
                    "{offset}: {} vs {}",
                    got[j],
                    mean[j]
                );
                for i in j..3 {
                    assert!((g[(i, j)] - dense[(i, j)]).abs() <= 1e-11 * dense[(0, 0)], "{offset}: ({i}, {j})");
                }
            }
        }
        // The columns' standard deviations are about 0.7: 200 of them off is refused.
        for shift in [mean.iter().map(|m| m + 140.0).collect::<Vec<_>>(), vec![f64::NAN, 0.0, 0.0]] {
            assert!(Pca::centred_gram_one_pass(DataRef::Dense(x.as_ref()), shift, 400, &SingleProcess).is_none());
        }
    }

    /// The shift is read off rows spread over the matrix: sorted data gives the mean of the
    /// whole, a constant column its value exactly, a NaN in a sampled row a NaN.
    #[test]
    fn sample_shift_spreads_over_the_rows_and_keeps_constants() {
        let x = faer::Mat::from_fn(1000, 2, |i, j| if j == 0 { if i < 500 { 0.0 } else { 1.0 } } else { 0.1 });
        let shift = sample_shift(DataRef::Dense(x.as_ref()), 10);
        assert_eq!(shift[0], 0.5);
        assert_eq!(shift[1].to_bits(), 0.1f64.to_bits());
        let mut bad = x.clone();
        bad[(100, 1)] = f64::NAN;
        assert!(sample_shift(DataRef::Dense(bad.as_ref()), 10)[1].is_nan());
    }
}
