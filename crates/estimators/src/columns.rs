//! Column sampling: the general-kernel estimators of \[SKPCA\].

use faer::Mat;
use rand::RngExt;

use stolr_comm::{Communicator, RowShard};

use crate::kernels::PreparedKernel;
use crate::{DataRef, EstimatorError, Factors, Kernel, KernelSampler};

/// Unbiased estimator of any kernel matrix by sampling `k` of its columns.
///
/// Each draw takes indices $i_1, \dots, i_k$ i.i.d. uniform on $\{0, \dots, n-1\}$ (with
/// replacement, which the unbiasedness of each term needs), $C_I = K_{:, I}$ and
/// $E_I = I_n[:, I]$, both `(n, k)`, and returns
/// - (a) asymmetric, `symmetric == false`: $\xi = (n/k) C_I E_I^\top$, i.e.
///   $\zeta = (n/k) C_I$, $\chi = E_I$, shape `(n, k)`, rank $\le k$;
/// - (b) symmetric, `symmetric == true`: $\xi = (n/2k)(C_I E_I^\top + E_I C_I^\top)$, i.e.
///   $\zeta = (n/2k)[C_I, E_I]$, $\chi = [E_I, C_I]$, shape `(n, 2k)`, rank $\le 2k$.
///
/// Neither draw is PSD ((b) is symmetric but indefinite), so `chi` is always `Some` and
/// [`KernelSampler::is_symmetric_psd`] is `false`.
///
/// Cost per draw: $k$ kernel columns, $O(nkd)$ (one GEMM for the Gaussian and polynomial
/// kernels); the data are prepared once at construction ($O(nd)$ extra memory: two copies of
/// `X`, shifted and original, for the Gaussian kernel, whose values are accurate whatever the
/// offset of the rows, see [`crate::KernelEvaluation`]).
///
/// # References
/// \[SKPCA\], "Unbiased Estimators", item 1; docs/derivations.md
/// §1.3(a), (b).
pub struct ColumnSampling<'a> {
    x: DataRef<'a>,
    kernel: Kernel,
    columns: usize,
    symmetric: bool,
    prepared: PreparedKernel,
    /// The ranks the rows are split over and this rank's place ([`ColumnSampling::sharded`]);
    /// `None`: every row here.
    shard: Option<(&'a dyn Communicator, RowShard)>,
}

impl std::fmt::Debug for ColumnSampling<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnSampling")
            .field("n", &self.x.nrows())
            .field("d", &self.x.ncols())
            .field("kernel", &self.kernel)
            .field("columns", &self.columns)
            .field("symmetric", &self.symmetric)
            .finish()
    }
}

impl<'a> ColumnSampling<'a> {
    /// Column sampling of the matrix of `kernel` on the rows of `x`, shape `(n, d)`, dense or
    /// sparse ([`DataRef`]; a `MatRef` converts; sparse rows are kept sparse, their kernel
    /// columns summed over the stored entries), with `columns = k` sampled columns per draw;
    /// `symmetric` selects estimator (b).
    ///
    /// # Errors
    /// - [`EstimatorError::InvalidKernel`] if the kernel parameters are invalid;
    /// - [`EstimatorError::ZeroFeatures`] if `columns == 0`;
    /// - [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`;
    /// - [`EstimatorError::NonFinite`] for a NaN or infinite entry of `x`.
    pub fn new(
        x: impl Into<DataRef<'a>>,
        kernel: Kernel,
        columns: usize,
        symmetric: bool,
    ) -> Result<Self, EstimatorError> {
        let x = x.into();
        kernel.validate()?;
        if columns == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "sampled columns" });
        }
        x.check()?;
        Ok(ColumnSampling { x, kernel, columns, symmetric, prepared: PreparedKernel::new(kernel, x), shard: None })
    }

    /// Column sampling of the `n × n` kernel matrix of rows split over the ranks of `comm`: the
    /// sampler holds this rank's rows, global rows `shard.first .. shard.first + shard.rows`
    /// of `shard.total = n`, and its factors are this rank's rows `(n_local, a)` of the draw
    /// one process makes of all `n` rows.
    ///
    /// **Scheme.** Every rank draws the same `k` indices over the global `n` from its `rng`
    /// (the seed shared by every rank: the indices one process draws); the rows `x_I` `(k, d)`
    /// are assembled from their owners as Nyström's landmarks are
    /// ([`stolr_comm::rows_by_index`]: `k·d` doubles summed over the ranks, the non-owners
    /// contributing zeros, so the sum is exact), and each rank forms its rows of
    /// `C_I = K(X, x_I)` and of `E_I`. Dense or sparse rows (the sampled rows cross densified,
    /// `8·k·d` bytes). One rank draws the bits of [`ColumnSampling::new`]'s sampler; several,
    /// the same draws up to the rounding of the kernel values (each rank shifts its rows to its
    /// own median). Sampling is collective: every rank must draw together.
    ///
    /// # Errors
    /// [`EstimatorError::ShapeMismatch`] if the sampler's rows are not `shard.rows` or
    /// `shard.first + shard.rows > shard.total`.
    pub fn sharded(mut self, comm: &'a dyn Communicator, shard: RowShard) -> Result<Self, EstimatorError> {
        if self.x.nrows() != shard.rows || shard.first.saturating_add(shard.rows) > shard.total {
            return Err(EstimatorError::ShapeMismatch {
                what: "the sampler's rows (the shard's rows within its total)",
                expected: shard.rows.min(shard.total.saturating_sub(shard.first)),
                found: self.x.nrows(),
            });
        }
        self.shard = (comm.size() > 1).then_some((comm, shard));
        Ok(self)
    }

    /// `(n, C_I, this rank's rows of E_I as (local row, column) pairs)` for the sampled global
    /// indices `idx`: one process its columns of `K`; sharded, the assembled rows' kernel with
    /// this rank's rows.
    fn kernel_columns(&self, idx: &[usize]) -> (Mat<f64>, Vec<(usize, usize)>) {
        let par = faer::get_global_parallelism();
        match self.shard {
            None => (self.prepared.columns(idx, par), idx.iter().copied().enumerate().map(|(j, i)| (i, j)).collect()),
            Some((comm, shard)) => {
                let d = self.x.ncols();
                let mut rows = Mat::<f64>::zeros(idx.len(), d);
                let mut own = Vec::new();
                for (j, &i) in idx.iter().enumerate() {
                    if shard.contains(i) {
                        let local = i - shard.first;
                        rows.as_mut().row_mut(j).copy_from(self.x.subrows(local, 1).to_dense().row(0));
                        own.push((local, j));
                    }
                }
                stolr_comm::all_reduce_mat(comm, &mut rows);
                (self.prepared.cross_with_own(rows.as_ref(), &own, par), own)
            }
        }
    }

    /// The kernel whose matrix is estimated.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Number of sampled columns `k` per draw.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Whether this is the symmetric estimator (b).
    pub fn is_symmetric(&self) -> bool {
        self.symmetric
    }
}

impl KernelSampler for ColumnSampling<'_> {
    fn n(&self) -> usize {
        self.x.nrows()
    }

    fn draw_rank(&self) -> usize {
        if self.symmetric { 2 * self.columns } else { self.columns }
    }

    fn is_symmetric_psd(&self) -> bool {
        false
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        // `n` the global count (the indices range over it and scale the draw), `rows` this
        // rank's (all of them on one process).
        let rows = self.x.nrows();
        let n = self.shard.map_or(rows, |(_, shard)| shard.total);
        let k = self.columns;
        let idx: Vec<usize> = (0..k).map(|_| rng.random_range(0..n)).collect();
        let (c, own) = self.kernel_columns(&idx);
        let factors = if self.symmetric {
            let scale = n as f64 / (2 * k) as f64;
            let mut zeta = Mat::zeros(rows, 2 * k);
            let mut chi = Mat::zeros(rows, 2 * k);
            for j in 0..k {
                zeta.col_as_slice_mut(j).iter_mut().zip(c.col_as_slice(j)).for_each(|(z, &v)| *z = scale * v);
                chi.col_as_slice_mut(k + j).copy_from_slice(c.col_as_slice(j));
            }
            for &(i, j) in &own {
                zeta[(i, k + j)] = scale;
                chi[(i, j)] = 1.0;
            }
            Factors { zeta, chi: Some(chi) }
        } else {
            let scale = n as f64 / k as f64;
            let mut chi = Mat::zeros(rows, k);
            for &(i, j) in &own {
                chi[(i, j)] = 1.0;
            }
            let mut zeta = c;
            for j in 0..k {
                zeta.col_as_slice_mut(j).iter_mut().for_each(|z| *z *= scale);
            }
            Factors { zeta, chi: Some(chi) }
        };
        Ok(factors)
    }

    fn name(&self) -> &'static str {
        if self.symmetric { "columns-sym" } else { "columns" }
    }
}
