//! Random Maclaurin features (Kar & Karnick 2012) for dot-product kernels.

use faer::{Accum, Mat};
use rand::Rng;
use stolr_lowrank::matmul;

use crate::parallel::for_each_col_mut;
use crate::rff::coordinate_rng;
use crate::sparse::ActiveColumns;
use crate::{DataRef, EstimatorError, Factors, Kernel, KernelSampler};

/// Unbiased symmetric PSD estimator of a dot-product kernel matrix
/// $\kappa(x, y) = \sum_{N \ge 0} a_N \langle x, y\rangle^N$, $a_N \ge 0$, by random Maclaurin
/// features; for every kernel with Maclaurin coefficients
/// ([`crate::KernelFunction::maclaurin_coefficient`]): the polynomial kernel, whose coefficients are
/// $a_N = \binom{q}{N} c^{q-N} s^{-N}$ for $N \le q$ and $0$ otherwise.
///
/// Each draw builds `D` independent features. Feature $j$ draws an order $N \ge 0$ with
/// $P(N) = 2^{-(N+1)}$, then $N$ Rademacher vectors $\omega_1, \dots, \omega_N \in \{\pm1\}^d$,
/// and sets $Z_j(x) = \sqrt{a_N 2^{N+1}} \prod_{l=1}^N \omega_l^\top x$ ($N = 0$ gives the
/// constant $\sqrt{2 a_0}$; $a_N = 0$ gives a zero column and draws no vectors). The draw is
/// $\xi = \zeta\zeta^\top$ with $\zeta = D^{-1/2} [Z_j(x_i)]_{ij}$, shape `(n, D)`.
/// Unbiased because $\mathbb{E}[\prod_l \omega_l^\top x\, \omega_l^\top y] = \langle x, y\rangle^N$.
///
/// The signs are drawn coordinate by coordinate: after the orders, each draw takes one `u64`
/// from the caller's generator, and the `M` signs of data column `l` come from their own
/// generator seeded by that number and `l` (the one random Fourier features use), one bit per
/// sign. So sparse rows ([`DataRef::Sparse`]) need the signs of the `m ≤ min(d, nnz)` columns
/// they store only, their products $\omega_l^\top x_i$ sum over the stored entries of $x_i$
/// (`nnz·M` per draw), and they give the same draw as the same rows dense.
///
/// Cost per draw: one GEMM `(n, d) × (d, M)` with $M = \sum_j N_j$ ($\mathbb{E} M \le D$)
/// and $O(nM)$ products.
///
/// # References
/// docs/derivations.md §1.1 (coefficients), §1.3(d); \[SKPCA\],
/// "Unbiased Estimators", item 3; Kar & Karnick, *Random Feature Maps for Dot Product
/// Kernels*, AISTATS 2012.
#[derive(Debug)]
pub struct RandomMaclaurin<'a> {
    x: DataRef<'a>,
    kernel: Kernel,
    features: usize,
    /// Sparse rows: their active columns.
    active: Option<ActiveColumns>,
}

impl<'a> RandomMaclaurin<'a> {
    /// Random Maclaurin features of the polynomial `kernel` on the rows of `x`, shape
    /// `(n, d)`, dense or sparse ([`DataRef`]; a `MatRef` converts), with `features = D`
    /// features per draw (factors of shape `(n, D)`).
    ///
    /// # Errors
    /// - [`EstimatorError::InvalidKernel`] if the kernel parameters are invalid;
    /// - [`EstimatorError::UnsupportedKernel`] for a kernel that is not a dot-product kernel
    ///   (Gaussian, Laplacian);
    /// - [`EstimatorError::ZeroFeatures`] if `features == 0`;
    /// - [`EstimatorError::EmptyData`] if `n == 0` or `d == 0`;
    /// - [`EstimatorError::NonFinite`] for a NaN or infinite entry of `x`.
    pub fn new(x: impl Into<DataRef<'a>>, kernel: Kernel, features: usize) -> Result<Self, EstimatorError> {
        let x = x.into();
        kernel.validate()?;
        if kernel.maclaurin_coefficient(0).is_none() {
            return Err(EstimatorError::UnsupportedKernel {
                estimator: "maclaurin",
                kernel: kernel.name(),
                hint: "random Maclaurin features need a dot-product kernel (polynomial); \
                       use random Fourier features or column sampling",
            });
        }
        if features == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "Maclaurin features" });
        }
        x.check()?;
        let active = match x {
            DataRef::DenseF32(_) => {
                return Err(EstimatorError::Float32Unsupported { what: "random Maclaurin features" });
            }
            DataRef::Dense(_) => None,
            DataRef::Sparse(s) => Some(ActiveColumns::new(s, &[])),
        };
        Ok(RandomMaclaurin { x, kernel, features, active })
    }

    /// The kernel whose matrix is estimated.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Number of features `D` per draw.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The Maclaurin coefficient $a_N$ of the kernel
    /// ([`crate::KernelFunction::maclaurin_coefficient`]).
    fn coefficient(&self, order: u32) -> f64 {
        self.kernel.maclaurin_coefficient(order).expect("a dot-product kernel, checked at construction")
    }
}

/// Draws $N \ge 0$ with $P(N) = 2^{-(N+1)}$: the number of leading failures of fair coin
/// flips, read off as trailing zero bits.
fn draw_order(rng: &mut dyn rand::Rng) -> u32 {
    let mut order = 0;
    loop {
        let bits = rng.next_u64();
        if bits != 0 {
            return order + bits.trailing_zeros();
        }
        order += 64;
    }
}

impl KernelSampler for RandomMaclaurin<'_> {
    fn n(&self) -> usize {
        self.x.nrows()
    }

    fn draw_rank(&self) -> usize {
        self.features
    }

    fn is_symmetric_psd(&self) -> bool {
        true
    }

    fn sample(&mut self, rng: &mut dyn rand::Rng) -> Result<Factors, EstimatorError> {
        let n = self.x.nrows();
        let features = self.features;
        // Per feature: the scale sqrt(a_N 2^{N+1} / D) and the range of its Rademacher
        // vectors among the columns of `omega`.
        let mut scales = Vec::with_capacity(features);
        let mut ranges = Vec::with_capacity(features);
        let mut total = 0usize;
        for _ in 0..features {
            let order = draw_order(rng);
            let a = self.coefficient(order);
            if a > 0.0 {
                let weight = a * 2f64.powf(f64::from(order) + 1.0) / features as f64;
                scales.push(weight.sqrt());
                ranges.push(total..total + order as usize);
                total += order as usize;
            } else {
                scales.push(0.0);
                ranges.push(total..total);
            }
        }
        // Rademacher vectors: the signs of data column `l` for the `total` vectors, one bit per
        // sign from `coordinate_rng(draw, l)`.
        let draw = rng.next_u64();
        let signs = |l: usize, out: &mut dyn FnMut(usize, f64)| {
            let mut r = coordinate_rng(draw, l);
            let mut bits = 0u64;
            for (left, col) in (0..total).map(|c| (c % 64, c)) {
                if left == 0 {
                    bits = r.next_u64();
                }
                out(col, if bits & 1 == 1 { 1.0 } else { -1.0 });
                bits >>= 1;
            }
        };
        let par = faer::get_global_parallelism();
        let mut projection = Mat::zeros(n, total);
        match (self.x, &self.active) {
            (DataRef::Sparse(s), Some(active)) => {
                // The vectors' rows of the active columns, transposed: (total, m).
                let mut wt = Mat::zeros(total, active.len());
                for (a, &l) in active.columns.iter().enumerate() {
                    signs(l, &mut |col, v| wt[(col, a)] = v);
                }
                let mut row = vec![0.0; total];
                for i in 0..n {
                    active.project_row(s, i, wt.as_ref(), &mut row);
                    for (c, &v) in row.iter().enumerate() {
                        projection[(i, c)] = v;
                    }
                }
            }
            _ => {
                let x = self.x.dense().expect("dense rows have no active columns");
                let mut omega = Mat::zeros(x.ncols(), total);
                for l in 0..x.ncols() {
                    signs(l, &mut |col, v| omega[(l, col)] = v);
                }
                matmul(projection.as_mut(), Accum::Replace, x, omega.as_ref(), 1.0, par);
            }
        }
        let projection = &projection;
        let mut zeta = Mat::zeros(n, features);
        for_each_col_mut(
            &mut zeta,
            par,
            |j| n * (ranges[j].len() + 1),
            |j, col| {
                let scale = scales[j];
                if scale == 0.0 {
                    return;
                }
                col.fill(scale);
                for l in ranges[j].clone() {
                    col.iter_mut().zip(projection.col_as_slice(l)).for_each(|(z, &p)| *z *= p);
                }
            },
        );
        Ok(Factors { zeta, chi: None })
    }

    fn name(&self) -> &'static str {
        "maclaurin"
    }
}
