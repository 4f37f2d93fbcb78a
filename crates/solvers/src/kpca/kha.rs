//! The Kernel Hebbian Algorithm (KHA), the stochastic kernel PCA baseline of \[SKPCA\].

use faer::Par;
use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_gather_rows, all_reduce_mat};
use stolr_estimators::{DEFAULT_TILE, DataRef, Kernel, KernelOperator, OperatorCentering, kernel_row_means_range};
use stolr_lowrank::Eigenpairs;

use crate::ModelRows;
use crate::error::check_rank;
use crate::{IterativeSolver, SolverError, StepReport, Stop};

/// Configuration of [`Kha`]; validated once by [`Kha::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct KhaConfig {
    /// Number of components `r`, `1 ≤ r ≤ n`.
    pub rank: usize,
    /// Constant step size `η > 0` (default 0.05, the value of \[SKPCA\]; the Hebbian step is
    /// stable when `η·‖φ̃(x)‖² < 2`, and a Gaussian or Laplacian kernel has `‖φ̃(x)‖² ≤ 2`).
    pub eta: f64,
    /// Number of steps `T ≥ 1`, one sample each.
    pub iterations: usize,
    /// Centre in feature space: find the eigenpairs of `K̃ = HKH`, `H = I − 11ᵀ/n` (default
    /// `true`, as kernel PCA and KHA define it); `false` uses `K` itself.
    pub center: bool,
    /// Scale `s > 0` of the initial dual coefficients, drawn from `s·U(−1, 1)` (default 0.01).
    pub init_scale: f64,
    /// The run has converged when every Ritz pair of its span has a relative residual
    /// `‖K̃ u_j − λ_j u_j‖₂ / λ₁` at most this (default `1e-2`, which puts the Ritz values within
    /// about `1e-4·λ₁` of the eigenvalues; [`Kha::ritz`]). A constant step leaves KHA a
    /// stationary error in the eigenvectors of order `√η` (measured on 120 points: a residual of
    /// 2e-2 at `η = 0.05`, 5.5e-3 at `η = 0.005`), so a run may end unconverged: it is then
    /// reported, not refused.
    pub tolerance: f64,
}

impl KhaConfig {
    /// The default constant step size `η = 0.05`, the value of \[SKPCA\] "Experimental Setting".
    pub const DEFAULT_ETA: f64 = 0.05;

    /// The default scale of the initial dual coefficients, 0.01.
    pub const DEFAULT_INIT_SCALE: f64 = 0.01;

    /// `rank` components in `iterations` steps with the defaults `η = 0.05`
    /// ([`KhaConfig::DEFAULT_ETA`]), centring on, initial scale 0.01
    /// ([`KhaConfig::DEFAULT_INIT_SCALE`]) and convergence tolerance `1e-2`.
    pub fn new(rank: usize, iterations: usize) -> Self {
        Self {
            rank,
            eta: Self::DEFAULT_ETA,
            iterations,
            center: true,
            init_scale: Self::DEFAULT_INIT_SCALE,
            tolerance: 1e-2,
        }
    }
}

/// The Kernel Hebbian Algorithm: Sanger's generalized Hebbian algorithm run in the feature
/// space of a kernel, in dual coordinates, one sample per step.
///
/// State: dual coefficients `A`, shape `(n, r)`; column `j` holds `a_j`, the coefficients of
/// the `j`-th component `w_j = Σ_l A_lj φ̃(x_l)`. Step (sample `i` uniform):
/// `k̃_i = K̃ e_i`, `y = Aᵀ k̃_i` (`r` outputs), `A ← A − η A·LT[y yᵀ]ᵀ + η e_i yᵀ`, where
/// `LT` keeps the lower triangle with the diagonal. The column `k_i` of `K` is computed on the
/// fly from the data and centred with the row means of `K` (computed once, in a streamed pass).
/// At the fixed point `w_j` are the unit-norm top-`r` eigenvectors of the centred covariance.
/// The eigenpairs of `K̃` are read off the final span by a Rayleigh–Ritz step ([`Kha::ritz`]):
/// orthonormal eigenvectors, eigenvalues nonincreasing, numerically zero pairs dropped, the
/// residuals and whether they pass `tolerance`, and model coefficients whose training
/// projections are exactly `U Λ^{1/2}`.
///
/// Memory: `O(n·r)` for `A`, `O(n·d)` for a row-major copy of the data, `O(n)` for the row means
/// and scratch; the `n × n` kernel matrix is never held. Time: `O(n²d)` once for the row means,
/// then `O(n·d + n·r)` per step, and two passes `O(n²(d + r))` for the Rayleigh–Ritz step.
///
/// **On several ranks** ([`Kha::new_sharded`]) the rows of `A` are split as the data's: every
/// rank holds all `n` rows (gathered once, as the matrix-free exact solver does), forms its rows
/// of `k̃_i` and of `Aᵀk̃_i`, and the `r` outputs `y` are added over the ranks in rank order (one
/// all-reduce of `r` doubles per step), so every rank makes the same update of its rows. The
/// sampled `i` and the initial `A` come from the seed shared by every rank (the draws of one
/// process). Time per step and rank `O(n_p·(d + r))`.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (KHA, step 0.05); Kim, Franz &
/// Schölkopf, *Iterative kernel principal component analysis for image modeling*, IEEE TPAMI
/// 2005; Sanger 1989; docs/derivations.md §2.9 (3) and its eigen-recovery.
#[derive(Clone)]
pub struct Kha<'a> {
    config: KhaConfig,
    /// The ranks the rows of `A` are split across ([`SingleProcess`] unless
    /// [`Kha::new_sharded`]).
    comm: &'a dyn Communicator,
    /// This rank's rows: global rows `shard.first..shard.first + shard.rows` of `A`.
    shard: RowShard,
    kernel: Kernel,
    /// The data (all `n` rows on every rank), row-major: sample `i` is `rows[i·d..(i + 1)·d]`
    /// (empty for sparse rows).
    rows: Vec<f64>,
    /// Sparse rows, kept sparse (a CSR copy); their kernel columns are summed over the stored
    /// entries.
    sparse: Option<ModelRows>,
    n: usize,
    d: usize,
    /// Row means of `K`, `m = K1/n`, all `n` of them (zeros without centring).
    means: Vec<f64>,
    /// `m̄ = 1ᵀK1/n²` (zero without centring).
    mean_all: f64,
    /// `max_i κ(x_i, x_i)`, the scale of the rounding in `K̃` ([`zero_kernel_floor`]).
    max_diagonal: f64,
    /// This rank's rows of the dual coefficients `A`, shape `(n_p, r)` (`(n, r)` on one
    /// process).
    a: Mat<f64>,
    t: usize,
    /// Scratch: this rank's rows of the centred kernel column `k̃_i` (length `n_p`).
    column: Vec<f64>,
    /// Scratch: running sums `Σ_{l ≤ j} y_l a_l` (length `n_p`).
    acc: Vec<f64>,
    /// Scratch: the outputs `y` (length `r`).
    y: Vec<f64>,
}

impl std::fmt::Debug for Kha<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kha")
            .field("config", &self.config)
            .field("kernel", &self.kernel)
            .field("shard", &self.shard)
            .field("ranks", &self.comm.size())
            .field("t", &self.t)
            .finish_non_exhaustive()
    }
}

impl<'a> Kha<'a> {
    /// A solver for the data `x`, shape `(n, d)`, one sample per row, with `kernel`. Copies the
    /// data (row-major; sparse rows ([`DataRef::Sparse`]) as a CSR copy, never dense, each step's
    /// kernel column then costing the stored entries), computes the row means of `K` when centring (time `O(n²d)`, memory
    /// `O(n·256)`), and draws the initial coefficients `A ~ init_scale·U(−1, 1)` from `rng`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `n`; [`SolverError::InvalidConfig`]
    /// if `eta` or `init_scale` is not positive and finite, or `iterations == 0`;
    /// [`SolverError::Estimator`] for empty or non-finite data and invalid kernel parameters.
    pub fn new<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        kernel: Kernel,
        config: KhaConfig,
        rng: &mut R,
    ) -> Result<Self, SolverError> {
        let x = x.into();
        Kha::new_sharded(x, kernel, config, rng, &SingleProcess, RowShard::whole(x.nrows()))
    }

    /// [`Kha::new`] on rows split across the ranks of `comm`: `x` `(n_p, d)` holds this rank's
    /// rows, global rows `shard.first..shard.first + shard.rows` of the `shard.total = n`.
    /// Collective: every rank calls it with the same `config`, `kernel` and seed. The rows are
    /// gathered to every rank (`8·n·d` bytes each: the kernel columns need every row); each
    /// rank forms its rows of the row means `m` (the pieces gathered), keeps its rows of the
    /// initial `A` (drawn over all `n` rows from the shared seed, the draws of one process) and
    /// later its rows of every `n × r` block. On one rank this is [`Kha::new`] (the same bits).
    ///
    /// # Errors
    /// As [`Kha::new`], the same on every rank (every rank checks the gathered rows), and
    /// [`SolverError::SparseUnsupported`] for sparse rows on several ranks;
    /// [`SolverError::InvalidConfig`] if `x` does not have `shard.rows` rows.
    pub fn new_sharded<'x, R: Rng + ?Sized>(
        x: impl Into<DataRef<'x>>,
        kernel: Kernel,
        config: KhaConfig,
        rng: &mut R,
        comm: &'a dyn Communicator,
        shard: RowShard,
    ) -> Result<Self, SolverError> {
        let x = x.into();
        if x.nrows() != shard.rows {
            return Err(SolverError::InvalidConfig {
                name: "shard",
                reason: format!("the local block has {} rows, the shard {}", x.nrows(), shard.rows),
            });
        }
        if comm.size() > 1 && x.is_sparse() {
            return Err(SolverError::SparseUnsupported { what: "KHA on several processes".into() });
        }
        // Every rank holds every row (the kernel column of a sample needs them all) and checks
        // the same rows, so every rank returns the same error.
        let gathered = match x {
            DataRef::Dense(local) if comm.size() > 1 => Some(all_gather_rows(comm, local)),
            DataRef::DenseF32(_) if comm.size() > 1 => Some(all_gather_rows(comm, x.to_dense().as_ref())),
            _ => None,
        };
        let x = gathered.as_ref().map_or(x, |all| DataRef::Dense(all.as_ref()));
        x.check()?;
        kernel.validate()?;
        let (n, d) = x.shape();
        check_rank(config.rank, n)?;
        if !(config.eta.is_finite() && config.eta > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "eta",
                reason: format!("the step size must be positive and finite, got {}", config.eta),
            });
        }
        if config.iterations == 0 {
            return Err(SolverError::InvalidConfig { name: "iterations", reason: "need at least 1 iteration".into() });
        }
        if !(config.tolerance.is_finite() && config.tolerance > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "tolerance",
                reason: format!("the convergence tolerance must be positive and finite, got {}", config.tolerance),
            });
        }
        if !(config.init_scale.is_finite() && config.init_scale > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "init_scale",
                reason: format!("the initial scale must be positive and finite, got {}", config.init_scale),
            });
        }
        let (rows, sparse, max_diagonal) = match x {
            DataRef::Dense(_) | DataRef::DenseF32(_) => {
                let mut rows = vec![0.0; n * d];
                match x {
                    DataRef::DenseF32(x) => {
                        // Float32 rows converted exactly into the row-major copy.
                        for j in 0..d {
                            for i in 0..n {
                                rows[i * d + j] = f64::from(x[(i, j)]);
                            }
                        }
                    }
                    _ => {
                        let x = x.dense().expect("dense rows");
                        for j in 0..d {
                            for i in 0..n {
                                rows[i * d + j] = x[(i, j)];
                            }
                        }
                    }
                }
                let max_diagonal = (0..n)
                    .map(|i| kernel.eval(&rows[i * d..(i + 1) * d], &rows[i * d..(i + 1) * d]))
                    .fold(0.0, f64::max);
                (rows, None, max_diagonal)
            }
            DataRef::Sparse(_) => {
                let max_diagonal = kernel.diagonal(x).into_iter().fold(0.0, f64::max);
                (Vec::new(), Some(ModelRows::copy_of(x)), max_diagonal)
            }
        };
        let local = shard.first..shard.first + shard.rows;
        let (means, mean_all) = if config.center {
            // This rank's entries of m = K1/n, gathered in rank order.
            let mine = kernel_row_means_range(x, &kernel, local.clone());
            let means: Vec<f64> = comm.all_gather(&mine).concat();
            let all = if n == 0 { 0.0 } else { means.iter().sum::<f64>() / n as f64 };
            (means, all)
        } else {
            (vec![0.0; n], 0.0)
        };
        let s = config.init_scale;
        let r = config.rank;
        // A ~ s·U(−1, 1), drawn column by column over all n rows (the draws of one process);
        // this rank keeps its rows.
        let mut a = Mat::zeros(shard.rows, r);
        for j in 0..r {
            for i in 0..n {
                let v = s * rng.random_range(-1.0..1.0);
                if local.contains(&i) {
                    a[(i - shard.first, j)] = v;
                }
            }
        }
        Ok(Self {
            config,
            comm,
            shard,
            kernel,
            rows,
            sparse,
            n,
            d,
            means,
            mean_all,
            max_diagonal,
            a,
            t: 0,
            column: vec![0.0; shard.rows],
            acc: vec![0.0; shard.rows],
            y: vec![0.0; r],
        })
    }

    /// Column means of the training kernel matrix `m = K1/n` and their mean `m̄` (zeros without
    /// centring): what a model needs to centre the kernel of a new row.
    pub fn kernel_means(&self) -> (&[f64], f64) {
        (&self.means, self.mean_all)
    }

    /// The data `(n, d)` the solver was built with (all `n` rows on every rank), in its form
    /// (dense, or sparse).
    pub fn rows(&self) -> ModelRows {
        ModelRows::copy_of(self.data())
    }

    /// The configuration.
    pub fn config(&self) -> &KhaConfig {
        &self.config
    }

    /// Steps done so far.
    pub fn iterations_done(&self) -> usize {
        self.t
    }

    /// This rank's rows of the dual coefficients `A`, shape `(n_p, r)` (`(n, r)` on one
    /// process): column `j` holds `a_j`.
    pub fn coefficients(&self) -> MatRef<'_, f64> {
        self.a.as_ref()
    }

    /// The data as a `(n, d)` view of the row-major copy, or of the sparse copy.
    fn data(&self) -> DataRef<'_> {
        match &self.sparse {
            Some(rows) => rows.data(),
            None => DataRef::Dense(MatRef::from_row_major_slice(&self.rows, self.n, self.d)),
        }
    }

    /// One KHA step on a sample `i` drawn uniformly from `rng`:
    /// `y = Aᵀ k̃_i`, `A ← A − η A·LT[y yᵀ]ᵀ`, then `A[i, :] += η yᵀ` (docs/derivations.md §2.9
    /// (3), in the transposed layout). Time `O(n·d + n·r)`.
    ///
    /// # Errors
    /// [`SolverError::Diverged`] if the outputs `y` are not finite (the step size is too large
    /// for the kernel's scale); `A` is then unchanged.
    fn advance(&mut self, rng: &mut dyn Rng) -> Result<(), SolverError> {
        let i = rng.random_range(0..self.n);
        self.centered_column(i);
        for (j, yj) in self.y.iter_mut().enumerate() {
            *yj = dot(self.a.col_as_slice(j), &self.column);
        }
        // y = Aᵀk̃_i over every rank's rows, the same bits on every rank.
        self.comm.all_reduce_sum(&mut self.y);
        if self.y.iter().any(|v| !v.is_finite()) {
            return Err(SolverError::Diverged { epoch: self.t + 1 });
        }
        hebbian_update(&mut self.a, &self.y, self.config.eta, &mut self.acc);
        if let Some(local) = i.checked_sub(self.shard.first).filter(|&l| l < self.shard.rows) {
            for (j, &yj) in self.y.iter().enumerate() {
                self.a[(local, j)] += self.config.eta * yj;
            }
        }
        self.t += 1;
        Ok(())
    }

    /// This rank's rows of `k̃_i = k_i − m − m_i 1 + m̄ 1` into `self.column`
    /// (docs/derivations.md §1.2), with `k_i` evaluated from the data.
    fn centered_column(&mut self, i: usize) {
        let (first, d) = (self.shard.first, self.d);
        let means = &self.means[first..first + self.shard.rows];
        let shift = self.mean_all - self.means[i];
        if let Some(rows) = &self.sparse {
            // Sparse rows: one process, so this rank's rows are all of them.
            let x = rows.data();
            let k = self.kernel.cross(x, x.subrows(i, 1));
            for ((c, m), k) in self.column.iter_mut().zip(means).zip(k.col(0).iter()) {
                *c = k - m + shift;
            }
            return;
        }
        let xi = &self.rows[i * d..(i + 1) * d];
        for (l, (c, m)) in self.column.iter_mut().zip(means).enumerate() {
            let j = first + l;
            *c = self.kernel.eval(xi, &self.rows[j * d..(j + 1) * d]) - m + shift;
        }
    }

    /// This rank's rows of `K̃ B = H K (H B)` (or `K B` without centring) for this rank's rows
    /// of `b` `(n_p, k)`: `H B` gathered to every rank `(n, k)`, then one pass of the tiled
    /// kernel operator over this rank's rows of `K` (never held); on one process the whole
    /// product. Time `O(n_p·n·(d + k))`, memory `O(n·(2d + k))` (the tiled kernel operator).
    fn kernel_product(&self, b: MatRef<'_, f64>) -> Mat<f64> {
        let mut hb = b.to_owned();
        if self.config.center {
            center_columns(self.comm, self.n, &mut hb);
        }
        let hb = all_gather_rows(self.comm, hb.as_ref());
        // The data prepared once for the whole product (the tiled operator: symmetric tiles,
        // the same bits on any thread count), not once per block of rows.
        let operator = KernelOperator::new(self.data(), self.kernel, OperatorCentering::None, DEFAULT_TILE, Par::Seq)
            .expect("the data and kernel were checked when KHA was built");
        let rows = self.shard.first..self.shard.first + self.shard.rows;
        let mut p = operator
            .apply_row_block(rows, hb.as_ref(), faer::get_global_parallelism())
            .expect("the block has one row per sample");
        if self.config.center {
            center_columns(self.comm, self.n, &mut p);
        }
        p
    }

    /// The eigenpairs of `K̃` (or `K` without centring) on the span KHA has found, by a
    /// Rayleigh–Ritz step, with the model coefficients, the residuals and the convergence test.
    ///
    /// 1. `P = K̃ H A` `(n, r)`: the span of the components' training projections (one pass
    ///    over `K`).
    /// 2. An orthonormal basis `Q = P G₀` `(n, k)` of that span: the thin SVD of `P` with its
    ///    columns scaled to unit norm, keeping the directions whose singular value exceeds
    ///    [`SPAN_TOLERANCE`] times the largest (two components that found the same direction
    ///    give one).
    /// 3. `K̃ Q` (a second pass), the `k × k` projection `Qᵀ K̃ Q = Y Λ Yᵀ` (dense, faer),
    ///    eigenvalues nonincreasing; Ritz vectors `U = Q Y`, orthonormal to rounding, signs
    ///    fixed as everywhere in the crate (largest absolute entry positive).
    /// 4. Pairs with `λ_j ≤ 1e-10·λ₁` ([`crate::kpca::RANK_TOLERANCE`]) are numerically zero
    ///    and dropped: asking for more pairs than the kernel's numerical rank returns fewer.
    /// 5. Residuals `‖K̃ u_j − λ_j u_j‖₂ / λ₁` from `K̃ Q Y` (no further pass); the run has
    ///    converged when the largest is at most `config.tolerance`.
    /// 6. Coefficients `C = H A G₀ Y Λ^{1/2}` `(n, k)`: since `U = K̃ H A G₀ Y`, the training
    ///    projections are `K̃ C = U Λ^{1/2}` exactly (to rounding), which is what
    ///    [`crate::KernelPcaModel`] computes for the training rows.
    ///
    /// Time `O(n²(d + r) + n r²)`, memory `O(n·(2d + r))`.
    ///
    /// On several ranks ([`Kha::new_sharded`]) every `n × r` block is held by rows (the
    /// eigenvectors, residual terms and coefficients returned are this rank's rows); each rank
    /// forms its rows of the two products, the column sums, norms, `QᵀK̃Q` and the residuals are
    /// added over the ranks in rank order, and `P`'s scaled columns are gathered to every rank
    /// for the thin SVD (`8·n·r` bytes per rank), so every rank keeps the same directions and
    /// eigenvalues; the signs are fixed over the whole columns.
    ///
    /// # Errors
    /// [`SolverError::Diverged`] if the coefficients are not finite; [`SolverError::InvalidRank`]
    /// if the (centred) kernel matrix is numerically zero on the span (largest Ritz value at
    /// most `100·n·ε·max_i k(x_i, x_i)`, e.g. constant data with centring): no eigenpair exists;
    /// [`SolverError::LowRank`] if the small SVD or eigendecomposition fails.
    ///
    /// # References
    /// docs/derivations.md §2.9 (3), "Eigen-recovery"; Rayleigh–Ritz: Saad,
    /// *Numerical Methods for Large Eigenvalue Problems* (2011), §4.3.
    pub fn ritz(&self) -> Result<KhaRitz, SolverError> {
        let (n, r) = (self.n, self.config.rank);
        let (first, rows) = (self.shard.first, self.shard.rows);
        // Whether any rank's coefficients are not finite, so that every rank returns alike.
        let mut diverged = [f64::from(u8::from((0..r).any(|j| self.a.col_as_slice(j).iter().any(|v| !v.is_finite()))))];
        self.comm.all_reduce_sum(&mut diverged);
        if diverged[0] > 0.0 {
            return Err(SolverError::Diverged { epoch: self.t });
        }
        let mut ha = self.a.clone();
        if self.config.center {
            center_columns(self.comm, n, &mut ha);
        }
        let p = self.kernel_product(ha.as_ref());
        let floor = zero_kernel_floor(n, self.max_diagonal);
        // Unit-norm columns; a column with no variance carries no direction.
        let mut squares: Vec<f64> = (0..r).map(|j| dot(p.col_as_slice(j), p.col_as_slice(j))).collect();
        self.comm.all_reduce_sum(&mut squares);
        let norms: Vec<f64> = squares.iter().map(|s| s.sqrt()).collect();
        let live: Vec<usize> = (0..r).filter(|&j| norms[j] > 0.0 && norms[j].is_finite()).collect();
        if live.is_empty() {
            return Err(zero_kernel(r, self.config.center, 0.0, floor));
        }
        let scaled = Mat::from_fn(rows, live.len(), |i, c| p[(i, live[c])] / norms[live[c]]);
        // The small SVD on every rank, of the same gathered columns.
        let scaled = all_gather_rows(self.comm, scaled.as_ref());
        let (w, sigma, z) = stolr_lowrank::thin_svd(scaled.as_ref())?;
        drop(scaled);
        let k = sigma.iter().take_while(|&&s| s > SPAN_TOLERANCE * sigma[0]).count();
        let q = w.subrows(first, rows).subcols(0, k).to_owned();
        drop(w);
        // G₀ (r, k): P G₀ = Q, zero rows for the dead columns.
        let mut g0 = Mat::<f64>::zeros(r, k);
        for (c, &j) in live.iter().enumerate() {
            for l in 0..k {
                g0[(j, l)] = z[(c, l)] / (norms[j] * sigma[l]);
            }
        }
        let kq = self.kernel_product(q.as_ref());
        let mut m = stolr_lowrank::mul(q.transpose(), kq.as_ref());
        all_reduce_mat(self.comm, &mut m);
        for i in 0..k {
            for j in 0..i {
                let v = 0.5 * (m[(i, j)] + m[(j, i)]);
                m[(i, j)] = v;
                m[(j, i)] = v;
            }
        }
        let (values, y) = stolr_lowrank::sym_eigen_desc(m.as_ref())?;
        let lambda1 = values.first().copied().unwrap_or(0.0);
        if lambda1.is_nan() || lambda1 <= floor {
            return Err(zero_kernel(r, self.config.center, lambda1, floor));
        }
        let kept = values.iter().take_while(|&&v| v > crate::kpca::rank::RANK_TOLERANCE * lambda1).count();
        let y = y.subcols(0, kept);
        let mut vectors = stolr_lowrank::mul(q.as_ref(), y);
        let kernel_vectors = stolr_lowrank::mul(kq.as_ref(), y);
        let mut residuals: Vec<f64> = (0..kept)
            .map(|j| (0..rows).map(|i| (kernel_vectors[(i, j)] - values[j] * vectors[(i, j)]).powi(2)).sum())
            .collect();
        self.comm.all_reduce_sum(&mut residuals);
        residuals.iter_mut().for_each(|s| *s = s.sqrt() / lambda1);
        let mut coefficients = stolr_lowrank::mul(ha.as_ref(), stolr_lowrank::mul(g0.as_ref(), y).as_ref());
        let mut pairs = Eigenpairs { values: values[..kept].to_vec(), vectors: Mat::new() };
        std::mem::swap(&mut pairs.vectors, &mut vectors);
        let signs = if self.comm.size() == 1 { pairs.fix_signs() } else { pairs.fix_signs_sharded(self.comm, first) };
        for (j, sign) in signs.iter().enumerate() {
            let scale = sign * pairs.values[j].sqrt();
            coefficients.col_mut(j).iter_mut().for_each(|c| *c *= scale);
        }
        let max_residual = residuals.iter().copied().fold(0.0, f64::max);
        Ok(KhaRitz { pairs, coefficients, converged: max_residual <= self.config.tolerance, residuals, span: k })
    }

    /// The eigenpairs of [`Kha::ritz`]: eigenvalues nonincreasing, eigenvectors `(n, k)`
    /// orthonormal with fixed signs, `k ≤ rank` (fewer when the kernel's numerical rank is
    /// lower).
    ///
    /// # Errors
    /// As [`Kha::ritz`].
    pub fn eigenpairs(&self) -> Result<Eigenpairs, SolverError> {
        Ok(self.ritz()?.pairs)
    }
}

/// Relative singular value, of the span of KHA's components with unit-norm columns, below
/// which a direction counts as a repeat of the others ([`Kha::ritz`]).
pub const SPAN_TOLERANCE: f64 = 1e-8;

/// What [`Kha::ritz`] returns: Ritz pairs of the (centred) kernel matrix on KHA's span.
#[derive(Debug, Clone, PartialEq)]
pub struct KhaRitz {
    /// Eigenvalues (nonincreasing) and orthonormal eigenvectors `(n, k)`, `k ≤ rank` (this
    /// rank's rows `(n_p, k)` on several ranks).
    pub pairs: Eigenpairs,
    /// Model coefficients `C` `(n, k)` over the training rows, with `K̃ C = U Λ^{1/2}` (this
    /// rank's rows on several ranks).
    pub coefficients: Mat<f64>,
    /// `‖K̃ u_j − λ_j u_j‖₂ / λ₁` for every returned pair.
    pub residuals: Vec<f64>,
    /// Whether the largest residual is at most [`KhaConfig::tolerance`].
    pub converged: bool,
    /// Number of independent directions in the span of the components (`≤ rank`).
    pub span: usize,
}

/// The largest eigenvalue at or below which a kernel matrix of `n` rows with largest diagonal
/// entry `max_diagonal` is numerically zero: `100·n·ε·max_i k(x_i, x_i)` (the size of the
/// rounding in the entries of `HKH`, summed over a row).
pub(crate) fn zero_kernel_floor(n: usize, max_diagonal: f64) -> f64 {
    100.0 * n as f64 * f64::EPSILON * max_diagonal.max(0.0)
}

/// The error for a (centred) kernel matrix that is numerically zero.
pub(crate) fn zero_kernel(rank: usize, center: bool, lambda: f64, floor: f64) -> SolverError {
    let what = if center { "the centred kernel matrix" } else { "the kernel matrix" };
    let why = if center {
        "every row is the same point in feature space (constant data?)"
    } else {
        "every row has zero norm in feature space"
    };
    SolverError::InvalidRank {
        rank,
        reason: format!(
            "{what} is numerically zero (largest eigenvalue {lambda:.3e}, at most the rounding level {floor:.3e}): \
             {why}, so it has no eigenpairs"
        ),
    }
}

impl IterativeSolver for Kha<'_> {
    /// One KHA step on a sample drawn uniformly from `rng` (docs/derivations.md §2.9 (3)); stops at
    /// `iterations`. Its centred kernel column reads all `n` rows (`samples_seen` grows by `n`).
    /// On [`SolverError::Diverged`] the coefficients are unchanged.
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        self.advance(rng)?;
        let stop = (self.t >= self.config.iterations).then_some(Stop::MaxIterations);
        Ok(StepReport { t: self.t, rank: self.config.rank, samples_seen: self.t * self.n, stop, ..Default::default() })
    }

    fn finished(&self) -> Option<Stop> {
        (self.t >= self.config.iterations).then_some(Stop::MaxIterations)
    }
}

/// `A ← A − η A·LT[y yᵀ]ᵀ` in `O(n·r)`: column `j` becomes `a_j − η y_j Σ_{l ≤ j} y_l a_l`
/// (old columns on the right), computed in place with the running sum kept in `acc`
/// (length `n`).
fn hebbian_update(a: &mut Mat<f64>, y: &[f64], eta: f64, acc: &mut [f64]) {
    acc.fill(0.0);
    for (j, &yj) in y.iter().enumerate() {
        let step = eta * yj;
        for (s, v) in acc.iter_mut().zip(a.col_as_slice_mut(j)) {
            *s += yj * *v;
            *v -= step * *s;
        }
    }
}

/// Subtracts from every column of `m` (this rank's rows of an `(n, k)` block) its mean over
/// all `n` rows, the column sums added over the ranks: `m ← H m`.
fn center_columns(comm: &dyn Communicator, n: usize, m: &mut Mat<f64>) {
    let mut sums: Vec<f64> = (0..m.ncols()).map(|j| m.col_as_slice(j).iter().sum::<f64>()).collect();
    comm.all_reduce_sum(&mut sums);
    for (j, sum) in sums.iter().enumerate() {
        let mean = sum / n as f64;
        m.col_as_slice_mut(j).iter_mut().for_each(|v| *v -= mean);
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The in-place update equals the dense `A − η A LT[y yᵀ]ᵀ`.
    #[test]
    fn hebbian_update_equals_dense_formula() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let (n, r) = (9, 4);
        let a = Mat::from_fn(n, r, |_, _| rng.random_range(-1.0..1.0));
        let y: Vec<f64> = (0..r).map(|_| rng.random_range(-2.0..2.0)).collect();
        let eta = 0.3;
        let lt = Mat::from_fn(r, r, |i, j| if j <= i { y[i] * y[j] } else { 0.0 });
        let prod = &a * lt.transpose();
        let dense = Mat::from_fn(n, r, |i, j| a[(i, j)] - eta * prod[(i, j)]);
        let mut fast = a.clone();
        hebbian_update(&mut fast, &y, eta, &mut vec![0.0; n]);
        assert!((&fast - &dense).norm_max() < 1e-14);
    }

    /// Rows with an outlier, duplicate rows and a constant column.
    fn hostile_rows(n: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut x = Mat::from_fn(n, 4, |_, j| if j == 3 { 2.5 } else { rng.random_range(-2.0..2.0) });
        for j in 0..3 {
            x[(7, j)] *= 40.0;
            x[(21, j)] = x[(20, j)];
            x[(22, j)] = x[(20, j)];
        }
        x
    }

    /// KHA run to the end then its Ritz step, on `p` thread ranks (`p = 0`: one process,
    /// [`Kha::new`]); the eigenpairs and coefficients with their rows gathered.
    fn kha_on(
        p: usize,
        x: &Mat<f64>,
        kernel: Kernel,
        config: &KhaConfig,
    ) -> Result<(Eigenpairs, Mat<f64>, Vec<f64>), SolverError> {
        let solve = |kha: &mut Kha<'_>| -> Result<KhaRitz, SolverError> {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
            while kha.finished().is_none() {
                kha.step(&mut rng)?;
            }
            kha.ritz()
        };
        if p == 0 {
            let mut kha = Kha::new(x.as_ref(), kernel, config.clone(), &mut Xoshiro256PlusPlus::seed_from_u64(5))?;
            let ritz = solve(&mut kha)?;
            return Ok((ritz.pairs, ritz.coefficients, ritz.residuals));
        }
        let n = x.nrows();
        let out = stolr_comm::ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(n, comm.rank(), comm.size());
            let local = x.as_ref().subrows(shard.first, shard.rows);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
            let ritz = Kha::new_sharded(local, kernel, config.clone(), &mut rng, comm, shard)
                .and_then(|mut kha| solve(&mut kha));
            ritz.map(|r| {
                let vectors = all_gather_rows(comm, r.pairs.vectors.as_ref());
                let coefficients = all_gather_rows(comm, r.coefficients.as_ref());
                (Eigenpairs { values: r.pairs.values, vectors }, coefficients, r.residuals)
            })
        });
        // Every rank returns the same result, or the same error.
        for o in &out[1..] {
            match (o, &out[0]) {
                (Ok(a), Ok(b)) => assert!(a.0.values == b.0.values && a.2 == b.2, "the ranks disagree"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("some ranks failed, others did not"),
            }
        }
        out.into_iter().next().unwrap()
    }

    /// KHA on 1, 2 and 3 ranks is one process's KHA: the same bits on one rank, to the
    /// rounding of the rank-ordered sums of `y` on more, centred or not.
    #[test]
    fn sharded_kha_is_one_process_kha() {
        let x = hostile_rows(61, 3);
        let kernel = Kernel::gaussian(2.0);
        for center in [true, false] {
            let config = KhaConfig { center, ..KhaConfig::new(3, 400) };
            let one = kha_on(0, &x, kernel, &config).unwrap();
            assert!(one.0.rank() >= 2);
            let single = kha_on(1, &x, kernel, &config).unwrap();
            assert_eq!(single, one, "one rank must give one process's bits");
            for p in [2, 3] {
                let (pairs, coefficients, residuals) = kha_on(p, &x, kernel, &config).unwrap();
                assert_eq!(pairs.rank(), one.0.rank());
                for (j, (value, residual)) in pairs.values.iter().zip(&residuals).enumerate() {
                    assert!((value - one.0.values[j]).abs() <= 1e-10 * one.0.values[0], "P = {p}, λ_{j}");
                    assert!((residual - one.2[j]).abs() <= 1e-8, "P = {p}, residual {j}");
                }
                // Signs are fixed over whole columns, so the vectors agree entry by entry.
                assert!((&pairs.vectors - &one.0.vectors).norm_max() <= 1e-9, "P = {p}, vectors");
                assert!((&coefficients - &one.1).norm_max() <= 1e-9 * one.1.norm_max(), "P = {p}, coefficients");
            }
        }
    }

    /// A non-finite entry on one rank's rows is the same error on every rank (the gathered rows
    /// are checked by all), and the shard must match the local rows.
    #[test]
    fn sharded_kha_refuses_alike_on_every_rank() {
        let mut x = hostile_rows(30, 4);
        x[(25, 1)] = f64::NAN;
        let err = kha_on(3, &x, Kernel::gaussian(1.0), &KhaConfig::new(2, 10)).unwrap_err();
        assert!(err.to_string().contains("NaN") || err.to_string().contains("finite"), "{err}");
        let x = hostile_rows(30, 4);
        let err = Kha::new_sharded(
            x.as_ref(),
            Kernel::gaussian(1.0),
            KhaConfig::new(2, 10),
            &mut Xoshiro256PlusPlus::seed_from_u64(1),
            &SingleProcess,
            RowShard { first: 0, rows: 29, total: 30 },
        )
        .unwrap_err();
        assert!(matches!(err, SolverError::InvalidConfig { name: "shard", .. }), "{err}");
    }

    /// The centred column equals the column of the dense `HKH`.
    #[test]
    fn centered_column_matches_dense_hkh() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let x = Mat::from_fn(30, 2, |_, _| rng.random_range(-2.0..2.0));
        let kernel = Kernel::gaussian(1.0);
        let mut kha = Kha::new(x.as_ref(), kernel, KhaConfig::new(2, 1), &mut rng).unwrap();
        let kc = stolr_estimators::centered_kernel_matrix(&kernel.matrix(x.as_ref()));
        for i in [0, 17, 29] {
            kha.centered_column(i);
            for j in 0..30 {
                assert!((kha.column[j] - kc[(j, i)]).abs() < 1e-12);
            }
        }
    }
}
