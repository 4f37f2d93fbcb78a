//! SKPCA and the kernel PCA baselines on small generated data with a known answer.

use faer::Mat;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{Centered, ColumnSampling, Kernel, RandomFourierFeatures, centered_kernel_matrix};
use stolr_lowrank::{Eigenpairs, sym_eigen_desc};
use stolr_solvers::{
    ExactKpcaConfig, IterationReport, NystromConfig, Skpca, SkpcaConfig, SolverError, Stop, exact_kpca, nystrom_kpca,
    shrunk_target, tau_for_rank,
};

/// `n` points in 3-D with anisotropic Gaussian spread (the spec's Appendix A.2 setting).
fn data(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let scale = [3.0, 1.5, 0.5];
    Mat::from_fn(n, 3, |_, j| scale[j] * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng))
}

const GAUSS: Kernel = Kernel::Gaussian { sigma: 1.5 };

fn all_eigenpairs(k: &Mat<f64>) -> Eigenpairs {
    let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
    Eigenpairs { values, vectors }
}

/// Largest principal angle sine between the column spaces of two orthonormal `(n, r)` bases.
fn subspace_gap(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let pa = a * a.transpose();
    let pb = b * b.transpose();
    let d = &pa - &pb;
    let (vals, _) = sym_eigen_desc(d.as_ref()).unwrap();
    vals.iter().fold(0.0_f64, |m, v| m.max(v.abs()))
}

#[test]
fn nystrom_with_all_landmarks_equals_exact() {
    let x = data(150, 1);
    for center in [false, true] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let exact = exact_kpca(x.as_ref(), &GAUSS, &ExactKpcaConfig { center, ..ExactKpcaConfig::new(8) }).unwrap();
        let ny =
            nystrom_kpca(x.as_ref(), &GAUSS, &NystromConfig { landmarks: 150, rank: 8, center }, &mut rng).unwrap();
        assert_eq!(ny.rank(), 8);
        for (a, b) in ny.values.iter().zip(&exact.values) {
            assert!((a - b).abs() < 1e-6 * exact.values[0], "{a} vs {b}");
        }
        assert!(subspace_gap(&ny.vectors, &exact.vectors) < 1e-6);
    }
}

#[test]
fn nystrom_with_few_landmarks_is_an_approximation_from_below() {
    // K - K̃ is PSD for the Nyström approximation, so its eigenvalues cannot exceed K's.
    let x = data(150, 3);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let exact = exact_kpca(x.as_ref(), &GAUSS, &ExactKpcaConfig::new(5)).unwrap();
    let ny =
        nystrom_kpca(x.as_ref(), &GAUSS, &NystromConfig { landmarks: 30, rank: 5, center: false }, &mut rng).unwrap();
    for (a, b) in ny.values.iter().zip(&exact.values) {
        assert!(*a <= b + 1e-9 * exact.values[0]);
    }
    let g = ny.vectors.transpose() * &ny.vectors;
    assert!((&g - Mat::<f64>::identity(5, 5)).norm_max() < 1e-9);
}

/// SPGD with random Fourier features converges to `K̂ = D_τ[K]`: the error decreases, stays
/// under Theorem 1's bound, and the recovered eigenvalues obey Weyl's inequality
/// `|λ̂_i − λ_i| ≤ ‖Z − K̂‖_F`.
#[test]
fn skpca_rff_converges_to_shrunk_kernel() {
    let n = 120;
    let x = data(n, 5);
    let k = GAUSS.matrix(x.as_ref());
    let all = all_eigenpairs(&k);
    let tau = 0.5 * (all.values[5] + all.values[6]); // rank(K̂) = 6
    let target = shrunk_target(&all, tau).unwrap();
    assert_eq!(target.rank(), 6);
    let mut sampler = RandomFourierFeatures::new(x.as_ref(), GAUSS, 50).unwrap();
    let t_max = 2000;
    let mut solver = Skpca::new(SkpcaConfig { tau, iterations: t_max, ..Default::default() }, n, true).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let mut reports: Vec<IterationReport> = Vec::new();
    let stop = solver.run(&mut sampler, &mut rng, Some(&target), &mut reports).unwrap();
    assert_eq!(stop, Stop::MaxIterations);
    assert_eq!(reports.len(), t_max);
    let err = |t: usize| reports[t - 1].error.unwrap();
    assert!(err(t_max) < err(100) / 5.0, "error at T {} vs at 100 {}", err(t_max), err(100));
    // Theorem 1 with C = n (|ξ_ij| ≤ 1 for RFF), δ = 0.01, max rank over the run.
    let r_max = reports.iter().map(|r| r.rank).max().unwrap() as f64;
    let c = n as f64;
    let log_term = ((2.0 * (t_max as f64).log2()).ceil() / 0.01).ln();
    let bound = 8.0 / t_max as f64 * (c * tau * r_max.sqrt() + c * c * (8.0 + 6.0 * log_term));
    assert!(err(t_max) * (n * n) as f64 <= bound);
    // Weyl: each recovered eigenvalue is within ‖Z − K̂‖_F of the exact one.
    let pairs = solver.eigenpairs().unwrap();
    let dist = (err(t_max) * (n * n) as f64).sqrt();
    assert!(pairs.rank() >= 6);
    for i in 0..6 {
        assert!(
            (pairs.values[i] - all.values[i]).abs() <= dist + 1e-9,
            "{i}: {} vs {}",
            pairs.values[i],
            all.values[i]
        );
    }
    assert!(pairs.values.windows(2).all(|w| w[0] >= w[1]));
}

/// The general (non-symmetric) path with column sampling, centred, converges to `D_τ[HKH]`.
#[test]
fn skpca_centered_column_sampling_converges() {
    let n = 80;
    let x = data(n, 7);
    let kc = centered_kernel_matrix(&GAUSS.matrix(x.as_ref()));
    let all = all_eigenpairs(&kc);
    let tau = 0.5 * (all.values[2] + all.values[3]);
    let target = shrunk_target(&all, tau).unwrap();
    let mut sampler = Centered::new(ColumnSampling::new(x.as_ref(), GAUSS, 10, false).unwrap());
    let mut solver = Skpca::new(SkpcaConfig { tau, iterations: 3000, ..Default::default() }, n, false).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let mut reports: Vec<IterationReport> = Vec::new();
    solver.run(&mut sampler, &mut rng, Some(&target), &mut reports).unwrap();
    let first = reports[49].error.unwrap();
    let last = reports.last().unwrap().error.unwrap();
    assert!(last < first / 5.0, "{last} vs {first}");
    let pairs = solver.eigenpairs().unwrap();
    let dist = (last * (n * n) as f64).sqrt();
    for i in 0..3 {
        assert!((pairs.values[i] - all.values[i]).abs() <= dist + 1e-9);
    }
}

#[test]
fn same_seed_same_result() {
    let x = data(60, 9);
    let run = |seed| {
        let mut sampler = RandomFourierFeatures::new(x.as_ref(), GAUSS, 5).unwrap();
        let mut solver = Skpca::new(SkpcaConfig { tau: 1.0, iterations: 50, ..Default::default() }, 60, true).unwrap();
        solver.run(&mut sampler, &mut Xoshiro256PlusPlus::seed_from_u64(seed), None, &mut ()).unwrap();
        solver.eigenpairs().unwrap()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn rank_cap_ends_the_run_with_a_reason() {
    let x = data(60, 10);
    let mut sampler = RandomFourierFeatures::new(x.as_ref(), GAUSS, 20).unwrap();
    let mut solver =
        Skpca::new(SkpcaConfig { tau: 1e-6, iterations: 100, max_rank: Some(15), ..Default::default() }, 60, true)
            .unwrap();
    let stop = solver.run(&mut sampler, &mut Xoshiro256PlusPlus::seed_from_u64(1), None, &mut ()).unwrap();
    assert!(matches!(stop, Stop::RankCapReached { cap: 15, rank } if rank > 15));
    assert!(solver.iterations_done() < 100);
}

#[test]
fn tau_above_the_spectrum_collapses_the_rank() {
    let x = data(40, 11);
    let mut sampler = RandomFourierFeatures::new(x.as_ref(), GAUSS, 5).unwrap();
    let mut solver = Skpca::new(SkpcaConfig { tau: 1e6, iterations: 20, ..Default::default() }, 40, true).unwrap();
    solver.run(&mut sampler, &mut Xoshiro256PlusPlus::seed_from_u64(1), None, &mut ()).unwrap();
    assert!(matches!(solver.eigenpairs(), Err(SolverError::RankCollapsed { .. })));
}

/// With the whole data set as the subsample (m = n), the chosen τ separates exactly `rank`
/// eigenvalues of K.
#[test]
fn tau_for_rank_separates_the_requested_rank() {
    let n = 100;
    let x = data(n, 12);
    let all = all_eigenpairs(&GAUSS.matrix(x.as_ref()));
    for rank in [1, 4, 10] {
        let choice =
            tau_for_rank(x.as_ref(), &GAUSS, rank, n, false, &mut Xoshiro256PlusPlus::seed_from_u64(3)).unwrap();
        assert_eq!(all.values.iter().filter(|&&v| v > choice.tau).count(), rank);
    }
}

#[test]
fn bad_parameters_are_typed_errors() {
    let x = data(20, 13);
    for tau in [0.0, -1.0, f64::NAN] {
        assert!(matches!(
            Skpca::new(SkpcaConfig { tau, ..Default::default() }, 20, true),
            Err(SolverError::InvalidConfig { name: "tau", .. })
        ));
    }
    assert!(matches!(
        Skpca::new(SkpcaConfig { iterations: 0, ..Default::default() }, 20, true),
        Err(SolverError::InvalidConfig { .. })
    ));
    assert!(matches!(exact_kpca(x.as_ref(), &GAUSS, &ExactKpcaConfig::new(21)), Err(SolverError::InvalidRank { .. })));
    assert!(matches!(exact_kpca(x.as_ref(), &GAUSS, &ExactKpcaConfig::new(0)), Err(SolverError::InvalidRank { .. })));
    let mut bad = x.clone();
    bad[(3, 1)] = f64::INFINITY;
    assert!(matches!(exact_kpca(bad.as_ref(), &GAUSS, &ExactKpcaConfig::new(2)), Err(SolverError::Estimator(_))));
    let budget = ExactKpcaConfig { max_kernel_bytes: 100, ..ExactKpcaConfig::new(2) };
    assert!(matches!(exact_kpca(x.as_ref(), &GAUSS, &budget), Err(SolverError::KernelTooLarge { .. })));
    // A general sampler cannot feed the PSD path.
    let mut cols = ColumnSampling::new(x.as_ref(), GAUSS, 3, false).unwrap();
    let mut solver = Skpca::new(SkpcaConfig::default(), 20, true).unwrap();
    assert!(matches!(
        solver.step(&mut cols, &mut Xoshiro256PlusPlus::seed_from_u64(1)),
        Err(SolverError::SamplerMismatch { .. })
    ));
    assert_eq!(solver.iterations_done(), 0);
}
