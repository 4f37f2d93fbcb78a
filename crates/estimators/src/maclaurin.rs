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
        check_maclaurin(&kernel, features)?;
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

/// One draw of the random Maclaurin feature map of [`RandomMaclaurin`], kept so that rows are
/// mapped one at a time (a stream) and new rows later: $D$ features, feature $j$ of order
/// $N_j$ with scale $\sqrt{a_{N_j} 2^{N_j+1} / D}$ and the Rademacher vectors `signs` columns
/// $\sum_{l<j} N_l$ to $\sum_{l\le j} N_l$, so that
/// $z_j(x) = \text{scale}_j \prod_{c} (\text{signs}_{:,c}^\top x)$ and $z(x)^\top z(y)$ is an
/// unbiased estimate of $\kappa(x, y)$ (the convention of [`RandomMaclaurin`]: a feature whose
/// coefficient $a_N$ is 0 has order 0 and scale 0 here).
///
/// Memory `8·d·M` bytes for the signs, $M = \sum_j N_j$ ($\mathbb E M \le D$).
///
/// # References
/// Kar & Karnick, *Random Feature Maps for Dot Product Kernels*, AISTATS 2012.
#[derive(Debug, Clone, PartialEq)]
pub struct MaclaurinMap {
    signs: Mat<f64>,
    orders: Vec<u32>,
    scales: Vec<f64>,
}

/// The checks [`RandomMaclaurin::new`] and [`MaclaurinMap::draw`] share: a valid dot-product
/// kernel and at least one feature.
///
/// # Errors
/// [`EstimatorError::InvalidKernel`]; [`EstimatorError::UnsupportedKernel`] for a kernel that
/// is not a dot-product kernel; [`EstimatorError::ZeroFeatures`] if `features == 0`.
fn check_maclaurin(kernel: &Kernel, features: usize) -> Result<(), EstimatorError> {
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
    Ok(())
}

impl MaclaurinMap {
    /// Draws the map of `features = D` features for rows of `d` features and the dot-product
    /// `kernel` from `rng`, as one draw of [`RandomMaclaurin`] does (the orders, then one `u64`
    /// seeding the signs of each data column).
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`]; [`EstimatorError::UnsupportedKernel`] for a kernel
    /// that is not a dot-product kernel; [`EstimatorError::ZeroFeatures`] if `features == 0`;
    /// [`EstimatorError::EmptyData`] if `d == 0`.
    pub fn draw(kernel: &Kernel, d: usize, features: usize, rng: &mut dyn rand::Rng) -> Result<Self, EstimatorError> {
        check_maclaurin(kernel, features)?;
        if d == 0 {
            return Err(EstimatorError::EmptyData { nrows: 1, ncols: 0 });
        }
        let mut orders = Vec::with_capacity(features);
        let mut scales = Vec::with_capacity(features);
        for _ in 0..features {
            let order = draw_order(rng);
            let a = kernel.maclaurin_coefficient(order).unwrap_or(0.0);
            if a > 0.0 {
                scales.push((a * 2f64.powf(f64::from(order) + 1.0) / features as f64).sqrt());
                orders.push(order);
            } else {
                scales.push(0.0);
                orders.push(0);
            }
        }
        let total: usize = orders.iter().map(|&o| o as usize).sum();
        let draw = rng.next_u64();
        let mut signs = Mat::zeros(d, total);
        for l in 0..d {
            let mut r = coordinate_rng(draw, l);
            let mut bits = 0u64;
            for c in 0..total {
                if c % 64 == 0 {
                    bits = r.next_u64();
                }
                signs[(l, c)] = if bits & 1 == 1 { 1.0 } else { -1.0 };
                bits >>= 1;
            }
        }
        Ok(Self { signs, orders, scales })
    }

    /// A map from its parts (as saved with a model): `signs` `(d, M)` with entries ±1, the
    /// `orders` `N_j` (summing to `M`) and the `scales` (finite, ≥ 0), both of length `D`.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidFeatureMap`] if the sizes disagree or an entry is not as stated.
    pub fn from_parts(signs: Mat<f64>, orders: Vec<u32>, scales: Vec<f64>) -> Result<Self, EstimatorError> {
        let invalid = |reason: String| EstimatorError::InvalidFeatureMap { reason };
        if orders.len() != scales.len() || orders.is_empty() {
            return Err(invalid(format!(
                "{} orders and {} scales (one each per feature, D ≥ 1)",
                orders.len(),
                scales.len()
            )));
        }
        let total: u64 = orders.iter().map(|&o| u64::from(o)).sum();
        if total != signs.ncols() as u64 || signs.nrows() == 0 {
            return Err(invalid(format!(
                "the orders sum to {total}, the signs are {} × {}",
                signs.nrows(),
                signs.ncols()
            )));
        }
        if scales.iter().any(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(invalid("a scale is negative or not finite".into()));
        }
        if (0..signs.ncols()).any(|c| signs.col(c).iter().any(|&v| v != 1.0 && v != -1.0)) {
            return Err(invalid("a sign is not ±1".into()));
        }
        Ok(Self { signs, orders, scales })
    }

    /// The Rademacher vectors `(d, M)`, one per column.
    pub fn signs(&self) -> faer::MatRef<'_, f64> {
        self.signs.as_ref()
    }

    /// The order `N_j` of every feature, length `D`.
    pub fn orders(&self) -> &[u32] {
        &self.orders
    }

    /// The scale of every feature, length `D`.
    pub fn scales(&self) -> &[f64] {
        &self.scales
    }

    /// Number of features `D`.
    pub fn features(&self) -> usize {
        self.orders.len()
    }

    /// Number of features `d` of the rows.
    pub fn dim(&self) -> usize {
        self.signs.nrows()
    }

    /// The features of one row `x` (length `d`) into `out` (length `D`), with `projections`
    /// (length `M`) as scratch.
    ///
    /// # Panics
    /// If the lengths are not as stated.
    pub fn features_into(&self, x: &[f64], projections: &mut [f64], out: &mut [f64]) {
        assert_eq!(x.len(), self.dim(), "row length");
        assert_eq!(out.len(), self.features(), "feature length");
        for (c, p) in projections.iter_mut().enumerate() {
            *p = x.iter().zip(self.signs.col(c).iter()).map(|(a, b)| a * b).sum();
        }
        let mut start = 0;
        for (j, z) in out.iter_mut().enumerate() {
            let order = self.orders[j] as usize;
            *z = projections[start..start + order].iter().fold(self.scales[j], |acc, p| acc * p);
            start += order;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn the_map_gives_the_features_of_the_estimators_draw() {
        // The same generator state: the map's features of each row are the estimator's factors.
        let x = Mat::from_fn(7, 4, |i, j| ((i * 4 + j) as f64 * 0.37).sin());
        let kernel = Kernel::polynomial(2.0, 0.5, 3);
        let mut sampler = RandomMaclaurin::new(x.as_ref(), kernel, 200).unwrap();
        let zeta = sampler.sample(&mut Xoshiro256PlusPlus::seed_from_u64(5)).unwrap().zeta;
        let map = MaclaurinMap::draw(&kernel, 4, 200, &mut Xoshiro256PlusPlus::seed_from_u64(5)).unwrap();
        assert!(map.orders().iter().any(|&o| o >= 2), "some products of several vectors");
        let mut scratch = vec![0.0; map.signs().ncols()];
        let mut out = vec![0.0; 200];
        for i in 0..7 {
            let row: Vec<f64> = (0..4).map(|j| x[(i, j)]).collect();
            map.features_into(&row, &mut scratch, &mut out);
            for j in 0..200 {
                assert!((out[j] - zeta[(i, j)]).abs() <= 1e-12 * (1.0 + zeta[(i, j)].abs()), "row {i}, feature {j}");
            }
        }
        // Rebuilt from its parts: the same map; inconsistent parts are refused.
        let again = MaclaurinMap::from_parts(map.signs().to_owned(), map.orders().to_vec(), map.scales().to_vec());
        assert_eq!(again.unwrap(), map);
        let mut orders = map.orders().to_vec();
        orders[0] += 1;
        assert!(MaclaurinMap::from_parts(map.signs().to_owned(), orders, map.scales().to_vec()).is_err());
        let mut scales = map.scales().to_vec();
        scales[1] = f64::NAN;
        assert!(MaclaurinMap::from_parts(map.signs().to_owned(), map.orders().to_vec(), scales).is_err());
        let mut signs = map.signs().to_owned();
        signs[(0, 0)] = 0.5;
        assert!(MaclaurinMap::from_parts(signs, map.orders().to_vec(), map.scales().to_vec()).is_err());
        assert!(MaclaurinMap::draw(&Kernel::gaussian(1.0), 4, 10, &mut Xoshiro256PlusPlus::seed_from_u64(1)).is_err());
        assert!(MaclaurinMap::draw(&kernel, 4, 0, &mut Xoshiro256PlusPlus::seed_from_u64(1)).is_err());
    }
}
