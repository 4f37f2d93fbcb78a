//! Dense kernel matrices against the definition, and kernel parameter validation.

use crate::common;

use common::{gaussian_data, max_abs_diff};
use faer::Mat;
use proptest::prelude::*;
use stolr_estimators::{EstimatorError, Kernel, centered_kernel_matrix};

const KERNELS: [Kernel; 4] =
    [Kernel::gaussian(1.3), Kernel::laplacian(2.5), Kernel::polynomial(2.0, 1.0, 3), Kernel::polynomial(0.5, 0.0, 2)];

fn row(x: &Mat<f64>, i: usize) -> Vec<f64> {
    (0..x.ncols()).map(|j| x[(i, j)]).collect()
}

/// The kernel matrix by the definition, entry by entry.
fn by_definition(kernel: Kernel, x: &Mat<f64>, y: &Mat<f64>) -> Mat<f64> {
    Mat::from_fn(x.nrows(), y.nrows(), |i, j| kernel.eval(&row(x, i), &row(y, j)))
}

fn assert_matrix_matches_definition(kernel: Kernel, x: &Mat<f64>) {
    let k = kernel.matrix(x.as_ref());
    let exact = by_definition(kernel, x, x);
    let scale = exact.norm_max().max(1.0);
    assert!(
        max_abs_diff(&k, &exact) <= 1e-12 * scale,
        "{kernel:?}: matrix differs from eval by {}",
        max_abs_diff(&k, &exact)
    );
    for i in 0..k.nrows() {
        for j in 0..k.ncols() {
            assert_eq!(k[(i, j)], k[(j, i)], "{kernel:?}: not exactly symmetric");
        }
        if kernel.is_shift_invariant() {
            assert_eq!(k[(i, i)], 1.0, "{kernel:?}: diagonal is not 1");
        }
    }
}

#[test]
fn eval_matches_closed_forms() {
    let x = [1.0, -2.0, 0.5];
    let y = [0.0, 1.0, 2.5];
    // ||x-y||^2 = 1 + 9 + 4 = 14, ||x-y||_1 = 6, <x,y> = -2 + 1.25 = -0.75
    let g = Kernel::gaussian(2.0).eval(&x, &y);
    assert!((g - (-14.0f64 / 8.0).exp()).abs() < 1e-15);
    let l = Kernel::laplacian(3.0).eval(&x, &y);
    assert!((l - (-2.0f64).exp()).abs() < 1e-15);
    let p = Kernel::polynomial(0.25, 4.0, 3).eval(&x, &y);
    assert!((p - 1.0).abs() < 1e-15);
}

#[test]
fn matrix_matches_eval_small() {
    let x = gaussian_data(13, 4, 1.0, 1);
    for kernel in KERNELS {
        assert_matrix_matches_definition(kernel, &x);
    }
}

#[test]
fn matrix_matches_eval_multithreaded_size() {
    // Large enough for the element-wise passes to be split over threads.
    let x = gaussian_data(300, 5, 2.0, 2);
    for kernel in KERNELS {
        assert_matrix_matches_definition(kernel, &x);
    }
}

#[test]
fn gaussian_matrix_is_accurate_far_from_the_origin() {
    // Large common offset: centring inside `matrix` avoids cancellation in
    // ||x||² + ||y||² - 2<x,y>.
    let mut x = gaussian_data(40, 3, 0.1, 3);
    for i in 0..40 {
        for j in 0..3 {
            x[(i, j)] += 1e4;
        }
    }
    let kernel = Kernel::gaussian(0.1);
    let diff = max_abs_diff(&kernel.matrix(x.as_ref()), &by_definition(kernel, &x, &x));
    assert!(diff < 1e-9, "diff = {diff}");
}

#[test]
fn cross_and_columns_agree_with_matrix() {
    let x = gaussian_data(60, 3, 1.0, 4);
    let y = gaussian_data(7, 3, 1.5, 5);
    let idx = [0, 59, 17, 17, 3];
    for kernel in KERNELS {
        let k = kernel.matrix(x.as_ref());
        let scale = k.norm_max().max(1.0);
        let c = kernel.cross(x.as_ref(), x.as_ref());
        assert!(max_abs_diff(&c, &k) <= 1e-12 * scale, "{kernel:?}: cross(x, x) != matrix");
        let cols = kernel.columns(x.as_ref(), &idx);
        assert_eq!(cols.shape(), (60, idx.len()));
        let from_k = Mat::from_fn(60, idx.len(), |i, j| k[(i, idx[j])]);
        assert!(max_abs_diff(&cols, &from_k) <= 1e-12 * scale, "{kernel:?}: columns");
        let xy = kernel.cross(x.as_ref(), y.as_ref());
        assert_eq!(xy.shape(), (60, 7));
        let exact = by_definition(kernel, &x, &y);
        assert!(max_abs_diff(&xy, &exact) <= 1e-12 * exact.norm_max().max(1.0), "{kernel:?}: cross(x, y)");
    }
}

#[test]
fn centered_kernel_matrix_is_h_k_h() {
    let x = gaussian_data(9, 2, 1.0, 6);
    let k = Kernel::gaussian(1.0).matrix(x.as_ref());
    let n = 9;
    let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - 1.0 / n as f64);
    let hkh = &h * &k * &h;
    let c = centered_kernel_matrix(&k);
    assert!(max_abs_diff(&c, &hkh) < 1e-14);
    // Rows and columns of H K H sum to zero.
    for i in 0..n {
        let row_sum: f64 = (0..n).map(|j| c[(i, j)]).sum();
        assert!(row_sum.abs() < 1e-13);
    }
}

#[test]
fn validate_rejects_bad_parameters() {
    let bad = [
        (Kernel::gaussian(0.0), "sigma"),
        (Kernel::gaussian(-1.0), "sigma"),
        (Kernel::gaussian(f64::NAN), "sigma"),
        (Kernel::laplacian(f64::INFINITY), "sigma"),
        (Kernel::polynomial(0.0, 1.0, 2), "scale"),
        (Kernel::polynomial(1.0, -0.5, 2), "offset"),
        (Kernel::polynomial(1.0, 1.0, 0), "degree"),
    ];
    for (kernel, name) in bad {
        match kernel.validate() {
            Err(EstimatorError::InvalidKernel { parameter, .. }) => assert_eq!(parameter, name),
            other => panic!("{kernel:?}: expected InvalidKernel, got {other:?}"),
        }
        let message = kernel.validate().unwrap_err().to_string();
        assert!(message.contains(name), "message {message:?} does not name {name}");
    }
    for kernel in KERNELS {
        kernel.validate().unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn matrix_equals_eval_for_random_shapes(
        n in 1usize..25,
        d in 1usize..6,
        which in 0usize..4,
        seed in any::<u64>(),
    ) {
        let x = gaussian_data(n, d, 1.0, seed);
        let kernel = KERNELS[which];
        let k = kernel.matrix(x.as_ref());
        let exact = by_definition(kernel, &x, &x);
        prop_assert!(max_abs_diff(&k, &exact) <= 1e-12 * exact.norm_max().max(1.0));
    }
}

#[test]
fn degenerate_shapes() {
    // d = 0: every distance and inner product is 0.
    let x = Mat::<f64>::zeros(3, 0);
    let expected = [1.0, 1.0, 1.0];
    for (kernel, value) in KERNELS.iter().zip(expected.iter().chain([&0.0])) {
        let k = kernel.matrix(x.as_ref());
        assert_eq!(k.shape(), (3, 3));
        assert!(k[(0, 1)] == *value, "{kernel:?}");
    }
    // n = 0 and empty index sets.
    let x = Mat::<f64>::zeros(0, 2);
    for kernel in KERNELS {
        assert_eq!(kernel.matrix(x.as_ref()).shape(), (0, 0));
    }
    let x = gaussian_data(4, 2, 1.0, 9);
    for kernel in KERNELS {
        assert_eq!(kernel.columns(x.as_ref(), &[]).shape(), (4, 0));
    }
}
