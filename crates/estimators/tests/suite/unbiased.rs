//! Unbiasedness of every estimator: the entry-wise sample mean of `T` draws must lie within a
//! Bonferroni-corrected CLT bound of the exact (centred) kernel matrix; biased variants must
//! fail the same check, so the check has power.

use crate::common;

use common::{clt_check, gaussian_data};
use faer::Mat;
use stolr_estimators::{
    Centered, ColumnSampling, EstimatorError, Factors, Kernel, KernelSampler, RandomFourierFeatures, RandomMaclaurin,
    centered_kernel_matrix,
};

const N: usize = 16;
const D: usize = 3;
const DRAWS: usize = 4000;

fn data() -> Mat<f64> {
    gaussian_data(N, D, 1.0, 7)
}

const GAUSSIAN: Kernel = Kernel::gaussian(1.5);
const LAPLACIAN: Kernel = Kernel::laplacian(2.0);
const POLYNOMIAL: Kernel = Kernel::polynomial(3.0, 1.0, 3);

fn assert_unbiased(sampler: &mut dyn KernelSampler, target: &Mat<f64>, seed: u64) {
    let report = clt_check(sampler, target, DRAWS, seed);
    eprintln!("{}: max |z| = {:.2} (bound {:.2})", sampler.name(), report.max_z, report.z);
    assert_eq!(
        report.violations,
        0,
        "{}: {} entries outside the CLT bound (max |z| = {:.2}, bound {:.2})",
        sampler.name(),
        report.violations,
        report.max_z,
        report.z
    );
}

fn assert_biased(sampler: &mut dyn KernelSampler, target: &Mat<f64>, seed: u64) {
    let report = clt_check(sampler, target, DRAWS, seed);
    eprintln!("{} (biased): {} violations, max |z| = {:.2}", sampler.name(), report.violations, report.max_z);
    assert!(
        report.violations > 0,
        "{}: a biased estimator passed the CLT check (max |z| = {:.2}, bound {:.2})",
        sampler.name(),
        report.max_z,
        report.z
    );
}

#[test]
fn rff_gaussian_is_unbiased() {
    let x = data();
    let k = GAUSSIAN.matrix(x.as_ref());
    let mut s = RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 5).unwrap();
    assert_unbiased(&mut s, &k, 1);
}

#[test]
fn rff_laplacian_is_unbiased() {
    let x = data();
    let k = LAPLACIAN.matrix(x.as_ref());
    let mut s = RandomFourierFeatures::new(x.as_ref(), LAPLACIAN, 5).unwrap();
    assert_unbiased(&mut s, &k, 2);
}

#[test]
fn column_sampling_is_unbiased() {
    let x = data();
    for (kernel, seed) in [(GAUSSIAN, 3), (POLYNOMIAL, 4)] {
        let k = kernel.matrix(x.as_ref());
        let mut s = ColumnSampling::new(x.as_ref(), kernel, 3, false).unwrap();
        assert_unbiased(&mut s, &k, seed);
    }
}

#[test]
fn symmetric_column_sampling_is_unbiased() {
    let x = data();
    for (kernel, seed) in [(LAPLACIAN, 5), (POLYNOMIAL, 6)] {
        let k = kernel.matrix(x.as_ref());
        let mut s = ColumnSampling::new(x.as_ref(), kernel, 3, true).unwrap();
        assert_unbiased(&mut s, &k, seed);
    }
}

#[test]
fn random_maclaurin_is_unbiased() {
    let x = data();
    let k = POLYNOMIAL.matrix(x.as_ref());
    let mut s = RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, 20).unwrap();
    assert_unbiased(&mut s, &k, 8);
    // offset 0: only the order-q term survives.
    let homogeneous = Kernel::polynomial(2.0, 0.0, 2);
    let k = homogeneous.matrix(x.as_ref());
    let mut s = RandomMaclaurin::new(x.as_ref(), homogeneous, 20).unwrap();
    assert_unbiased(&mut s, &k, 9);
}

#[test]
fn centered_rff_is_unbiased_for_hkh() {
    let x = data();
    let hkh = centered_kernel_matrix(&GAUSSIAN.matrix(x.as_ref()));
    let mut s = Centered::new(RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 5).unwrap());
    assert!(s.is_symmetric_psd());
    assert_unbiased(&mut s, &hkh, 10);
}

#[test]
fn centered_columns_is_unbiased_for_hkh() {
    let x = data();
    let hkh = centered_kernel_matrix(&GAUSSIAN.matrix(x.as_ref()));
    let mut s = Centered::new(ColumnSampling::new(x.as_ref(), GAUSSIAN, 3, false).unwrap());
    assert_unbiased(&mut s, &hkh, 11);
    let mut s = Centered::new(ColumnSampling::new(x.as_ref(), GAUSSIAN, 3, true).unwrap());
    assert_unbiased(&mut s, &hkh, 12);
}

#[test]
fn centered_maclaurin_is_unbiased_for_hkh() {
    let x = data();
    let hkh = centered_kernel_matrix(&POLYNOMIAL.matrix(x.as_ref()));
    let mut s = Centered::new(RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, 20).unwrap());
    assert_unbiased(&mut s, &hkh, 13);
}

/// Multiplies every draw of the inner sampler by `factor` (a deliberately biased estimator).
struct Scaled<S> {
    inner: S,
    factor: f64,
}

impl<S: KernelSampler> KernelSampler for Scaled<S> {
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
        let mut f = self.inner.sample(rng)?;
        let s = self.factor.sqrt();
        for j in 0..f.zeta.ncols() {
            f.zeta.col_as_slice_mut(j).iter_mut().for_each(|v| *v *= s);
        }
        if let Some(chi) = f.chi.as_mut() {
            for j in 0..chi.ncols() {
                chi.col_as_slice_mut(j).iter_mut().for_each(|v| *v *= s);
            }
        }
        Ok(f)
    }
    fn name(&self) -> &'static str {
        "scaled"
    }
}

#[test]
fn biased_estimators_fail_the_check() {
    let x = data();
    let k = GAUSSIAN.matrix(x.as_ref());
    // RFF with the classic extra sqrt(2) on each feature: E[xi] = 2K.
    let mut s = Scaled { inner: RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 5).unwrap(), factor: 2.0 };
    assert_biased(&mut s, &k, 1);
    // RFF of a kernel with a 30% wider bandwidth.
    let mut s = RandomFourierFeatures::new(x.as_ref(), Kernel::gaussian(1.95), 5).unwrap();
    assert_biased(&mut s, &k, 1);
    // Symmetric column sampling with 25% too much weight.
    let mut s = Scaled { inner: ColumnSampling::new(x.as_ref(), GAUSSIAN, 3, true).unwrap(), factor: 1.25 };
    assert_biased(&mut s, &k, 5);
    // Uncentred RFF against H K H.
    let hkh = centered_kernel_matrix(&k);
    let mut s = RandomFourierFeatures::new(x.as_ref(), GAUSSIAN, 5).unwrap();
    assert_biased(&mut s, &hkh, 10);
    // Maclaurin against the kernel with a different offset.
    let other = Kernel::polynomial(3.0, 1.2, 3);
    let mut s = RandomMaclaurin::new(x.as_ref(), POLYNOMIAL, 20).unwrap();
    assert_biased(&mut s, &other.matrix(x.as_ref()), 8);
}
