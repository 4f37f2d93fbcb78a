//! Random Fourier features (Rahimi & Recht 2007), exactly as in paper 000.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef};
use rand_distr::{Cauchy, Distribution, StandardNormal};

use crate::data::check_data;
use crate::parallel::for_each_col_mut;
use crate::{EstimatorError, Factors, Kernel, KernelSampler};

/// Unbiased symmetric PSD estimator of a shift-invariant kernel matrix by random Fourier
/// features.
///
/// Each draw takes `k` frequencies $w_1, \dots, w_k$ i.i.d. from the spectral density $p(w)$
/// of the kernel and returns $\xi = \zeta\zeta^\top$ with
/// $\zeta = k^{-1/2}[\cos(Xw_1), \sin(Xw_1), \dots, \cos(Xw_k), \sin(Xw_k)]$, shape `(n, 2k)`
/// (cos and sin element-wise; no random phase, no $\sqrt 2$). Unbiased because
/// $\cos(w^\top x_i)\cos(w^\top x_j) + \sin(w^\top x_i)\sin(w^\top x_j) = \cos(w^\top(x_i - x_j))$
/// and $\mathbb{E}_w \cos(w^\top(x - y)) = \kappa(x, y)$ (Bochner); $|\xi_{ij}| \le 1$.
///
/// Spectral densities: Gaussian $w = g/\sigma$, $g \sim N(0, I_d)$; Laplacian (ℓ1)
/// $w_l = c_l/\sigma$ with $c_l \sim \mathrm{Cauchy}(0, 1)$ i.i.d.
///
/// Cost per draw: one GEMM `(n, d) × (d, k)` and `2nk` cos/sin evaluations, spread over
/// `faer::get_global_parallelism()` threads.
///
/// # References
/// Paper `000_64249a13de5bd3cc.txt`, "Unbiased Estimators", item 2; `spec/math.md` §1.3(c);
/// Rahimi & Recht, *Random Features for Large-Scale Kernel Machines*, NIPS 2007.
#[derive(Debug)]
pub struct RandomFourierFeatures<'a> {
    x: MatRef<'a, f64>,
    kernel: Kernel,
    features: usize,
    /// Frequencies $[w_1, \dots, w_k]$, shape `(d, k)`, reused across draws.
    omega: Mat<f64>,
    /// Projections $X W$, shape `(n, k)`, reused across draws.
    projection: Mat<f64>,
}

impl<'a> RandomFourierFeatures<'a> {
    /// Random Fourier features of `kernel` on the rows of `x`, shape `(n, d)`, with `features
    /// = k` frequencies per draw (factors of shape `(n, 2k)`).
    ///
    /// # Errors
    /// - [`EstimatorError::InvalidKernel`] if the kernel parameters are invalid;
    /// - [`EstimatorError::UnsupportedKernel`] for [`Kernel::Polynomial`] (not shift-invariant);
    /// - [`EstimatorError::ZeroFeatures`] if `features == 0`;
    /// - [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`;
    /// - [`EstimatorError::NonFinite`] for a NaN or infinite entry of `x`.
    pub fn new(x: MatRef<'a, f64>, kernel: Kernel, features: usize) -> Result<Self, EstimatorError> {
        kernel.validate()?;
        if !kernel.is_shift_invariant() {
            return Err(EstimatorError::UnsupportedKernel {
                estimator: "rff",
                kernel: kernel.name(),
                hint: "random Fourier features need a shift-invariant kernel (gaussian, \
                       laplacian); use random Maclaurin features or column sampling",
            });
        }
        if features == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "random Fourier features" });
        }
        check_data(x)?;
        let (n, d) = x.shape();
        Ok(RandomFourierFeatures {
            x,
            kernel,
            features,
            omega: Mat::zeros(d, features),
            projection: Mat::zeros(n, features),
        })
    }

    /// The kernel whose matrix is estimated.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Number of frequencies `k` per draw.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Fills `omega` column by column (frequency `w_j` is column `j`) from the spectral density.
    fn draw_frequencies(&mut self, rng: &mut dyn rand::Rng) {
        let (d, k) = self.omega.shape();
        match self.kernel {
            Kernel::Gaussian { sigma } => {
                let inv = 1.0 / sigma;
                for j in 0..k {
                    for l in 0..d {
                        let g: f64 = StandardNormal.sample(rng);
                        self.omega[(l, j)] = g * inv;
                    }
                }
            }
            Kernel::Laplacian { sigma } => {
                let cauchy = Cauchy::new(0.0, 1.0 / sigma).expect("sigma is finite and > 0, checked at construction");
                for j in 0..k {
                    for l in 0..d {
                        self.omega[(l, j)] = cauchy.sample(rng);
                    }
                }
            }
            Kernel::Polynomial { .. } => unreachable!("rejected at construction"),
        }
    }
}

impl KernelSampler for RandomFourierFeatures<'_> {
    fn n(&self) -> usize {
        self.x.nrows()
    }

    fn draw_rank(&self) -> usize {
        2 * self.features
    }

    fn is_symmetric_psd(&self) -> bool {
        true
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        self.draw_frequencies(rng);
        let par = faer::get_global_parallelism();
        matmul(self.projection.as_mut(), Accum::Replace, self.x, self.omega.as_ref(), 1.0, par);
        let n = self.x.nrows();
        let scale = 1.0 / (self.features as f64).sqrt();
        let projection = &self.projection;
        let mut zeta = Mat::zeros(n, 2 * self.features);
        for_each_col_mut(
            &mut zeta,
            par,
            |_| 16 * n,
            |c, col| {
                let p = projection.col_as_slice(c / 2);
                if c % 2 == 0 {
                    for (z, &t) in col.iter_mut().zip(p) {
                        *z = scale * t.cos();
                    }
                } else {
                    for (z, &t) in col.iter_mut().zip(p) {
                        *z = scale * t.sin();
                    }
                }
            },
        );
        Ok(Factors { zeta, chi: None })
    }

    fn name(&self) -> &'static str {
        "rff"
    }
}
