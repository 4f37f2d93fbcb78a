//! Kernel PCA returns what it promises: orthonormal eigenvectors in order (KHA's Rayleigh–Ritz
//! step), a captured share never above 1, no more pairs than the kernel's numerical rank (with a
//! warning naming how many exist), a typed error instead of NaN for a zero kernel, and
//! `transform` of the training rows equal to the fit's projections `U Λ^{1/2}`.

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{Kernel, centered_kernel_matrix};
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{
    KernelPca, KernelPcaFit, KpcaSolver, KpcaWarning, SamplerKind, SkpcaConfig, SolverError, Transformer,
};

/// Three blobs in 2-D, `n = 120` (a centred Gaussian spectrum with clear gaps at the top).
fn blobs(seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let centres = [(0.0, 0.0, 0.7), (3.0, 0.5, 1.0), (0.8, 3.5, 0.5)];
    Mat::from_fn(120, 2, |i, j| {
        let (cx, cy, s) = centres[i % 3];
        let g: f64 = StandardNormal.sample(&mut rng);
        [cx, cy][j] + s * g
    })
}

/// The exact (centred) kernel matrix and its eigenvalues, nonincreasing.
fn exact_spectrum(x: MatRef<'_, f64>, kernel: &Kernel, center: bool) -> (Mat<f64>, Vec<f64>) {
    let mut k = kernel.matrix(x);
    if center {
        k = centered_kernel_matrix(&k);
    }
    let (values, _) = sym_eigen_desc(k.as_ref()).unwrap();
    (k, values)
}

/// `max |UᵀU − I|`.
fn orthonormality_error(u: MatRef<'_, f64>) -> f64 {
    let g = u.transpose() * u;
    let mut worst = 0.0_f64;
    for i in 0..g.nrows() {
        for j in 0..g.ncols() {
            let want = if i == j { 1.0 } else { 0.0 };
            worst = worst.max((g[(i, j)] - want).abs());
        }
    }
    worst
}

/// `max |transform(X) − U Λ^{1/2}| / max |U Λ^{1/2}|`: the model's training projections
/// against the projections a fit writes (`projections.npy`).
fn transform_gap(fit: &KernelPcaFit, x: MatRef<'_, f64>) -> f64 {
    let z = fit.model.transform(x).unwrap();
    let projections = fit.pairs.projections();
    assert_eq!(z.shape(), projections.shape());
    let scale = projections.norm_max();
    (&z - &projections).norm_max() / scale
}

fn kha(eta: f64, iterations: usize) -> KpcaSolver {
    KpcaSolver::Kha { eta, iterations, init_scale: 0.01 }
}

fn fit(params: &KernelPca, x: MatRef<'_, f64>, seed: u64) -> Result<KernelPcaFit, SolverError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    params.fit_prepared(x, None, &mut rng, &mut ())
}

const GAUSS: Kernel = Kernel::gaussian(1.5);

/// KHA at its defaults (η = 0.05, 1000 steps; the case): the Rayleigh–Ritz step gives
/// orthonormal eigenvectors and nonincreasing eigenvalues even though the run has not
/// converged, says so, never captures more than the whole trace, and its model transforms the
/// training rows into exactly the fit's projections. Before the step: ‖UᵀU − I‖ ≈ 0.65,
/// captured share above 1, transform 65 % off.
#[test]
fn kha_at_its_defaults_is_orthonormal_and_honest() {
    let x = blobs(1);
    for center in [true, false] {
        let params = KernelPca::new(5, GAUSS, kha(0.05, 1000)).center(center);
        let fit = fit(&params, x.as_ref(), 2).unwrap();
        let u = fit.pairs.vectors.as_ref();
        assert_eq!(fit.pairs.rank(), 5);
        let ortho = orthonormality_error(u);
        assert!(ortho < 1e-10, "center {center}: |UᵀU − I| = {ortho}");
        assert!(fit.pairs.values.windows(2).all(|w| w[0] >= w[1]), "{:?}", fit.pairs.values);
        // Signs as the rest of the crate: the largest absolute entry of each column positive.
        for j in 0..5 {
            let col = u.col(j);
            let big = (0..col.nrows()).max_by(|&a, &b| col[a].abs().total_cmp(&col[b].abs())).unwrap();
            assert!(col[big] > 0.0);
        }
        // Captured share u'K̃u / tr K̃ summed over the pairs: at most 1 for orthonormal u.
        let (k, exact) = exact_spectrum(x.as_ref(), &GAUSS, center);
        let trace: f64 = (0..k.nrows()).map(|i| k[(i, i)]).sum();
        let ku = &k * u;
        let captured: f64 = (0..5).map(|j| (0..k.nrows()).map(|i| u[(i, j)] * ku[(i, j)]).sum::<f64>()).sum();
        assert!(captured / trace <= 1.0 + 1e-12, "captured share {}", captured / trace);
        // Ritz values never exceed the true ones (Cauchy interlacing).
        for (got, want) in fit.pairs.values.iter().zip(&exact) {
            assert!(*got <= want * (1.0 + 1e-12), "Ritz value {got} above the eigenvalue {want}");
        }
        // The convergence test and the residuals it reports are the true ones.
        let residual = (0..5)
            .map(|j| {
                let r: f64 = (0..k.nrows()).map(|i| (ku[(i, j)] - fit.pairs.values[j] * u[(i, j)]).powi(2)).sum();
                r.sqrt() / fit.pairs.values[0]
            })
            .fold(0.0, f64::max);
        let reported = fit.max_residual.unwrap();
        assert!((reported - residual).abs() <= 1e-9 * residual.max(1e-300), "{reported} vs {residual}");
        assert_eq!(fit.converged, Some(residual <= 1e-2));
        if fit.converged == Some(false) {
            assert!(fit.warnings.iter().any(|w| matches!(w, KpcaWarning::NotConverged { .. })), "{:?}", fit.warnings);
        }
        let gap = transform_gap(&fit, x.as_ref());
        assert!(gap < 1e-10, "center {center}: transform vs projections {gap}");
    }
}

/// KHA with a small step and many steps converges (largest relative residual 5.5e-3 here, at
/// η = 0.05 it stays near 2e-2): eigenvalues within 1e-4·λ₁ of the exact dense ones (4e-5
/// measured), `converged` set, no warning.
#[test]
fn converged_kha_matches_the_exact_eigenvalues() {
    let x = blobs(3);
    let params = KernelPca::new(3, GAUSS, kha(0.005, 400_000)).center(true);
    let fit = fit(&params, x.as_ref(), 4).unwrap();
    let (_, exact) = exact_spectrum(x.as_ref(), &GAUSS, true);
    assert_eq!(fit.converged, Some(true), "residual {:?}", fit.max_residual);
    assert!(fit.warnings.is_empty(), "{:?}", fit.warnings);
    for (got, want) in fit.pairs.values.iter().zip(&exact) {
        assert!((got - want).abs() <= 1e-4 * exact[0], "{got} vs {want}");
    }
    assert!(orthonormality_error(fit.pairs.vectors.as_ref()) < 1e-10);
    assert!(transform_gap(&fit, x.as_ref()) < 1e-10);
}

/// The solvers that take a rank, for the rank-deficient cases.
fn solvers() -> Vec<KpcaSolver> {
    vec![
        KpcaSolver::exact(),
        KpcaSolver::Nystrom { landmarks: 40 },
        kha(0.05, 2000),
        KpcaSolver::Skpca {
            config: SkpcaConfig { tau: 1.0, iterations: 200, ..Default::default() },
            sampler: SamplerKind::Rff,
            features: 20,
        },
    ]
}

/// The warning a fit of `returned < requested` pairs must carry.
fn names_how_many(fit: &KernelPcaFit, requested: usize) -> bool {
    fit.warnings.iter().any(|w| match *w {
        KpcaWarning::RankDeficient { requested: r, returned, .. }
        | KpcaWarning::BelowTau { requested: r, returned, .. } => {
            r == requested && returned == fit.pairs.rank() && w.to_string().contains(&format!("only {returned}"))
        }
        _ => false,
    })
}

/// A rank-1 kernel (identical rows, uncentred: `K = 11ᵀ`) with rank 5: one pair, `λ = n`,
/// `u = 1/√n`, and a warning that names how many exist, for every solver (KHA returned five
/// copies of one pair; Nyström and SKPCA one pair without a word).
#[test]
fn identical_rows_give_one_pair_and_a_warning() {
    let x = Mat::from_fn(60, 3, |_, j| [0.3, -1.2, 2.0][j]);
    for solver in solvers() {
        let name = solver.name();
        let params = KernelPca::new(5, GAUSS, solver);
        let fit = fit(&params, x.as_ref(), 7).unwrap();
        assert_eq!(fit.pairs.rank(), 1, "{name}: {:?}", fit.pairs.values);
        assert!(names_how_many(&fit, 5), "{name}: {:?}", fit.warnings);
        if name != "skpca" {
            assert!((fit.pairs.values[0] - 60.0).abs() < 1e-9 * 60.0, "{name}: {:?}", fit.pairs.values);
        }
        let u = fit.pairs.vectors.col(0);
        assert!((0..60).all(|i| (u[i] - 1.0 / 60f64.sqrt()).abs() < 1e-10), "{name}");
        assert!(fit.pairs.values.iter().all(|v| v.is_finite()));
    }
}

/// Points on a line through the origin with the linear (degree-1 polynomial) kernel, centred:
/// `K̃` has rank 1. Asking for 4 pairs returns 1 with a warning, and its eigenvalue is the exact
/// one.
#[test]
fn a_line_with_a_linear_kernel_has_rank_one() {
    let linear = Kernel::polynomial(1.0, 0.0, 1);
    let x = Mat::from_fn(50, 2, |i, j| (i as f64 * 0.37).sin() * [1.0, -2.0][j]);
    let (_, exact) = exact_spectrum(x.as_ref(), &linear, true);
    for solver in [KpcaSolver::exact(), KpcaSolver::Nystrom { landmarks: 20 }, kha(0.02, 5000)] {
        let name = solver.name();
        let params = KernelPca::new(4, linear, solver).center(true);
        let fit = fit(&params, x.as_ref(), 8).unwrap();
        assert_eq!(fit.pairs.rank(), 1, "{name}: {:?}", fit.pairs.values);
        assert!(names_how_many(&fit, 4), "{name}: {:?}", fit.warnings);
        assert!(
            (fit.pairs.values[0] - exact[0]).abs() < 1e-9 * exact[0],
            "{name}: {:?} vs {}",
            fit.pairs.values,
            exact[0]
        );
        assert!(transform_gap(&fit, x.as_ref()) < 1e-10, "{name}");
    }
}

/// Constant data with centring: the centred kernel matrix is zero. Nyström returned 0 pairs and
/// `λ₁ = NaN` with exit 0; now every solver refuses with a typed error that says so.
#[test]
fn constant_data_with_centring_is_a_typed_error() {
    let x = Mat::from_fn(80, 2, |_, j| [4.0, -1.5][j]);
    for solver in [KpcaSolver::exact(), KpcaSolver::Nystrom { landmarks: 30 }, kha(0.05, 300)] {
        let name = solver.name();
        let params = KernelPca::new(2, GAUSS, solver).center(true);
        match fit(&params, x.as_ref(), 9) {
            Err(e @ SolverError::InvalidRank { .. }) => {
                assert!(e.to_string().contains("centred kernel matrix is numerically zero"), "{name}: {e}")
            }
            Err(e) => panic!("{name}: unexpected error {e}"),
            Ok(fit) => panic!("{name}: {} pairs {:?}", fit.pairs.rank(), fit.pairs.values),
        }
    }
}

/// The model's transform of the training rows equals the fit's projections `U Λ^{1/2}` to
/// 1e-10 for the exact solver (dense, and above 256 rows the Krylov–Schur path), Nyström and
/// KHA, centred or not.
#[test]
fn transform_of_the_training_rows_equals_the_projections() {
    let small = blobs(11);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let large = Mat::from_fn(400, 3, |_, _| <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng));
    for center in [false, true] {
        for (x, solver) in [
            (&small, KpcaSolver::exact()),
            (&large, KpcaSolver::exact()),
            (&small, KpcaSolver::Nystrom { landmarks: 50 }),
            (&large, kha(0.05, 3000)),
        ] {
            let name = solver.name();
            let params = KernelPca::new(6, GAUSS, solver).center(center);
            let fit = fit(&params, x.as_ref(), 13).unwrap();
            let gap = transform_gap(&fit, x.as_ref());
            eprintln!("{name} n={} center {center}: gap {gap:e}", x.nrows());
            assert!(gap < 1e-10, "{name}, n = {}, center {center}: {gap}", x.nrows());
            assert!(orthonormality_error(fit.pairs.vectors.as_ref()) < 1e-10, "{name}");
        }
    }
}
