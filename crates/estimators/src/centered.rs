//! Centring in feature space: unbiased estimators of $HKH$.

use faer::Mat;

use stolr_comm::{Communicator, SingleProcess};

use crate::{EstimatorError, Factors, KernelSampler};

/// Wraps a sampler of $\xi$ with $\mathbb{E}[\xi] = K$ into a sampler of
/// $H\xi H = (H\zeta)(H\chi)^\top$, unbiased for the centred kernel matrix $HKH$,
/// $H = I_n - \mathbf{1}\mathbf{1}^\top/n$.
///
/// $H\zeta$ subtracts its mean from every column of $\zeta$ (likewise $\chi$): $O(na)$ per
/// draw, and the shape `(n, a)`, the rank bound and the symmetry (`chi == None` stays `None`)
/// are those of the inner sampler. $H\xi H$ equals the paper's $\xi + \theta$.
///
/// [`KernelSampler::name`] reports the inner sampler's name; [`Centered::inner`] gives access
/// to it.
///
/// # References
/// \[SKPCA\], "Unbiased Estimators" (the correction $\theta$ after
/// Algorithm 1); docs/derivations.md §1.2, §1.3(e).
pub struct Centered<'c, S: KernelSampler> {
    inner: S,
    /// The ranks the rows are split over ([`SingleProcess`] unless [`Centered::sharded`]).
    comm: &'c dyn Communicator,
    /// The rows over every rank, `n` (`None`: the draw's rows, one process).
    total: Option<usize>,
}

impl<S: KernelSampler + std::fmt::Debug> std::fmt::Debug for Centered<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Centered").field("inner", &self.inner).field("total", &self.total).finish_non_exhaustive()
    }
}

impl<S: KernelSampler> Centered<'static, S> {
    /// Centres every draw of `inner`.
    pub fn new(inner: S) -> Self {
        Centered { inner, comm: &SingleProcess, total: None }
    }
}

impl<'c, S: KernelSampler> Centered<'c, S> {
    /// Centres every draw of `inner`, a sampler whose factors are this rank's rows of a draw
    /// split over the ranks of `comm` (a sharded sampler, e.g.
    /// [`crate::ColumnSampling::sharded`]), over the `total = n` rows of every rank: the column
    /// sums of each factor are formed per rank and added in rank order
    /// ([`Communicator::all_reduce_sum`]: `a` doubles per factor and draw). With one rank,
    /// [`Centered::new`]'s bits. Sampling is collective.
    ///
    /// # References
    /// As [`Centered`]; docs/distributed.md (SKPCA with `--center`).
    pub fn sharded(inner: S, comm: &'c dyn Communicator, total: usize) -> Self {
        Centered { inner, comm, total: Some(total) }
    }

    /// The wrapped sampler.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner sampler.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// `m ← H m`: every column of `m` (this rank's rows) loses its mean over all `n` rows.
    fn center(&self, m: &mut Mat<f64>) {
        let n = self.total.unwrap_or(m.nrows());
        if n == 0 {
            return;
        }
        let mut sums: Vec<f64> = (0..m.ncols()).map(|j| m.col_as_slice(j).iter().sum::<f64>()).collect();
        self.comm.all_reduce_sum(&mut sums);
        for (j, sum) in sums.iter().enumerate() {
            let mean = sum / n as f64;
            m.col_as_slice_mut(j).iter_mut().for_each(|v| *v -= mean);
        }
    }
}

impl<S: KernelSampler> KernelSampler for Centered<'_, S> {
    fn n(&self) -> usize {
        self.inner.n()
    }

    fn draw_rank(&self) -> usize {
        self.inner.draw_rank()
    }

    fn is_symmetric_psd(&self) -> bool {
        self.inner.is_symmetric_psd()
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        let mut factors = self.inner.sample(rng)?;
        self.center(&mut factors.zeta);
        if let Some(chi) = factors.chi.as_mut() {
            self.center(chi);
        }
        Ok(factors)
    }

    /// The inner sampler's draw into `out` (reusing its storage when the inner sampler does),
    /// then centred in place.
    fn sample_into(&mut self, rng: &mut dyn rand::Rng, out: &mut Factors) -> Result<(), EstimatorError> {
        self.inner.sample_into(rng, out)?;
        self.center(&mut out.zeta);
        if let Some(chi) = out.chi.as_mut() {
            self.center(chi);
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// The dense centred kernel matrix $HKH$, $H = I_n - \mathbf{1}\mathbf{1}^\top/n$, of the
/// square matrix `k`, shape `(n, n)`: entry $(i, j)$ is
/// $K_{ij} - \bar K_{i\cdot} - \bar K_{\cdot j} + \bar K$ (row mean, column mean, grand mean),
/// which equals the paper's $K + \Theta$. For tests and exact baselines: $O(n^2)$.
///
/// # Panics
/// If `k` is not square.
///
/// # References
/// docs/derivations.md §1.2; \[SKPCA\], "Unbiased Estimators" ($\Theta$).
pub fn centered_kernel_matrix(k: &Mat<f64>) -> Mat<f64> {
    let n = k.nrows();
    assert_eq!(n, k.ncols(), "centered_kernel_matrix needs a square matrix");
    if n == 0 {
        return Mat::zeros(0, 0);
    }
    let inv = 1.0 / n as f64;
    let col_means: Vec<f64> = (0..n).map(|j| k.col_as_slice(j).iter().sum::<f64>() * inv).collect();
    let mut row_means = vec![0.0; n];
    for j in 0..n {
        for (r, &v) in row_means.iter_mut().zip(k.col_as_slice(j)) {
            *r += v;
        }
    }
    row_means.iter_mut().for_each(|r| *r *= inv);
    let grand = col_means.iter().sum::<f64>() * inv;
    let mut out = k.clone();
    for (j, &col_mean) in col_means.iter().enumerate() {
        let shift = grand - col_mean;
        for (v, &r) in out.col_as_slice_mut(j).iter_mut().zip(&row_means) {
            *v += shift - r;
        }
    }
    out
}
