//! SVRG-PCA, VR-PCA, Rayleigh–Ritz and exact PCA on generated data with a known answer.

use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_datasets::generate;
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{
    SolverError, Stop, SvrgPcaConfig, VrPcaConfig, captured_norm, exact_pca, penalty_objective, rayleigh_ritz,
    svrg_pca, variance_reduced_direction, vr_pca,
};

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

fn gaussian(n: usize, d: usize, seed: u64) -> Mat<f64> {
    generate::gaussian(n, d, &mut rng(seed))
}

/// Dense eigenpairs of `XᵀX`, nonincreasing.
fn dense_pairs(x: &Mat<f64>) -> (Vec<f64>, Mat<f64>) {
    sym_eigen_desc((x.transpose() * x).as_ref()).unwrap()
}

#[test]
fn exact_pca_matches_dense_on_tall_and_wide_data() {
    for (n, d) in [(60, 8), (8, 60)] {
        let x = gaussian(n, d, 1);
        let (vals, vecs) = dense_pairs(&x);
        let pairs = exact_pca(x.as_ref(), 4).unwrap();
        for j in 0..4 {
            assert!((pairs.values[j] - vals[j]).abs() < 1e-9 * vals[0]);
            let dot: f64 = (0..d).map(|i| pairs.vectors[(i, j)] * vecs[(i, j)]).sum();
            assert!((dot.abs() - 1.0).abs() < 1e-9, "({n}, {d}) component {j}: |cos| = {}", dot.abs());
        }
    }
}

/// Rayleigh–Ritz on a basis of the exact top-r eigenspace (scrambled by an invertible matrix)
/// returns the exact eigenpairs.
#[test]
fn rayleigh_ritz_on_an_exact_basis_is_exact() {
    let x = gaussian(80, 10, 2);
    let (vals, vecs) = dense_pairs(&x);
    let mix = Mat::from_fn(3, 3, |i, j| if i == j { 2.0 } else { 0.3 * (i + 2 * j) as f64 });
    let basis = vecs.subcols(0, 3) * &mix;
    let pairs = rayleigh_ritz(x.as_ref(), basis.as_ref()).unwrap();
    for j in 0..3 {
        assert!((pairs.values[j] - vals[j]).abs() < 1e-9 * vals[0]);
        let dot: f64 = (0..10).map(|i| pairs.vectors[(i, j)] * vecs[(i, j)]).sum();
        assert!((dot.abs() - 1.0).abs() < 1e-9);
    }
    let sslev = vals[..3].iter().sum::<f64>().sqrt();
    assert!((captured_norm(&pairs.values) - sslev).abs() < 1e-9 * sslev);
}

/// The analytic gradient of `F_μ` matches central finite differences of the objective.
#[test]
fn gradient_matches_finite_differences() {
    let x = gaussian(40, 6, 3);
    let w = gaussian(6, 2, 4);
    let (nu, mu) = (3.0, 0.7);
    let (_, grad) = penalty_objective(x.as_ref(), w.as_ref(), nu, mu);
    let h = 1e-6;
    for i in 0..6 {
        for j in 0..2 {
            let mut wp = w.clone();
            wp[(i, j)] += h;
            let mut wm = w.clone();
            wm[(i, j)] -= h;
            let fd = (penalty_objective(x.as_ref(), wp.as_ref(), nu, mu).0
                - penalty_objective(x.as_ref(), wm.as_ref(), nu, mu).0)
                / (2.0 * h);
            assert!(
                (fd - grad[(i, j)]).abs() < 1e-6 * (1.0 + grad[(i, j)].abs()),
                "({i},{j}): {fd} vs {}",
                grad[(i, j)]
            );
        }
    }
}

/// The SVRG direction is unbiased: its exact mean over the samples is the full gradient.
#[test]
fn variance_reduced_direction_mean_is_the_gradient() {
    let (n, d) = (30, 5);
    let x = gaussian(n, d, 5);
    let w = gaussian(d, 2, 6);
    let w_snap = gaussian(d, 2, 7);
    let (nu, mu) = (2.5, 1.1);
    let (_, grad) = penalty_objective(x.as_ref(), w.as_ref(), nu, mu);
    let cw_snap = x.transpose() * (&x * &w_snap) * (1.0 / n as f64);
    let mut mean = Mat::<f64>::zeros(d, 2);
    for i in 0..n {
        mean += variance_reduced_direction(x.as_ref(), i, w.as_ref(), w_snap.as_ref(), cw_snap.as_ref(), nu, mu);
    }
    mean *= 1.0 / n as f64;
    assert!((&mean - &grad).norm_max() < 1e-12 * (1.0 + grad.norm_max()));
}

#[test]
fn svrg_consistent_reaches_sslev_on_eigengap_data() {
    for (gap, r) in [(0.16, 3), (0.0016, 3), (0.005, 6)] {
        let data = generate::eigengap(1000, 100, gap, &mut rng(10)).unwrap();
        let sslev = data.sslev(r).unwrap();
        let out = svrg_pca(data.x.as_ref(), &SvrgPcaConfig::consistent(r), &mut rng(11), &mut ()).unwrap();
        let got = captured_norm(&out.pairs.values);
        assert!(
            got >= 0.9999 * sslev,
            "gap {gap}, r {r}: {got} vs sslev {sslev} ({:?}, {} epochs)",
            out.stop,
            out.epochs
        );
        let g = out.pairs.vectors.transpose() * &out.pairs.vectors;
        assert!((&g - Mat::<f64>::identity(r, r)).norm_max() < 1e-10);
    }
}

/// Paper mode shrinks the iterate towards 0 (its defaults violate Theorem 2.1) and stops on the
/// gradient norm after few epochs; Rayleigh–Ritz still lands near the paper's column
/// (docs/derivations.md §3.4).
#[test]
fn svrg_paper_mode_shrinks_and_still_recovers_the_span() {
    let data = generate::eigengap(1000, 100, 0.16, &mut rng(12)).unwrap();
    let out = svrg_pca(data.x.as_ref(), &SvrgPcaConfig::paper(6), &mut rng(13), &mut ()).unwrap();
    assert_eq!(out.stop, Stop::Converged);
    assert!(out.final_iterate_norm < 1e-3, "iterate norm {}", out.final_iterate_norm);
    assert!(out.epochs < 30);
    let got = captured_norm(&out.pairs.values);
    assert!((got - 2.0605).abs() < 0.05, "{got} vs paper 2.0605");
}

#[test]
fn vr_pca_reaches_sslev_to_three_digits() {
    let data = generate::eigengap(1000, 100, 0.16, &mut rng(14)).unwrap();
    let sslev = data.sslev(3).unwrap();
    let out = vr_pca(data.x.as_ref(), &VrPcaConfig::new(3, 10), &mut rng(15), &mut ()).unwrap();
    let got = captured_norm(&out.pairs.values);
    assert!((got - sslev).abs() < 5e-4 * sslev, "{got} vs {sslev}");
}

#[test]
fn bad_input_is_a_typed_error() {
    let x = gaussian(20, 5, 16);
    assert!(matches!(exact_pca(x.as_ref(), 0), Err(SolverError::InvalidRank { .. })));
    assert!(matches!(exact_pca(x.as_ref(), 6), Err(SolverError::InvalidRank { .. })));
    assert!(matches!(
        svrg_pca(x.as_ref(), &SvrgPcaConfig::consistent(6), &mut rng(1), &mut ()),
        Err(SolverError::InvalidRank { .. })
    ));
    assert!(matches!(
        vr_pca(x.as_ref(), &VrPcaConfig::new(0, 3), &mut rng(1), &mut ()),
        Err(SolverError::InvalidRank { .. })
    ));
    let mut bad = x.clone();
    bad[(4, 2)] = f64::NAN;
    assert!(matches!(
        svrg_pca(bad.as_ref(), &SvrgPcaConfig::consistent(2), &mut rng(1), &mut ()),
        Err(SolverError::Estimator(_))
    ));
    let cfg = SvrgPcaConfig { c2: -1.0, ..SvrgPcaConfig::consistent(2) };
    assert!(matches!(svrg_pca(x.as_ref(), &cfg, &mut rng(1), &mut ()), Err(SolverError::InvalidConfig { .. })));
}

#[test]
fn the_explained_variance_ratio_is_each_eigenvalues_share_of_the_trace() {
    use stolr_solvers::{Fit, Pca, PcaModel, PcaSolver};
    // An outlier row, duplicate rows and a constant column; rank d: the shares add up to 1.
    let mut x = gaussian(80, 4, 7);
    for i in 0..80 {
        x[(i, 3)] = 2.5;
    }
    for j in 0..4 {
        x[(9, j)] = x[(2, j)];
        x[(0, j)] = 40.0 * (j as f64 + 1.0);
    }
    let pca = Pca { rank: 3, center: true, scale: false, solver: PcaSolver::Exact };
    let model: PcaModel = pca.fit(x.as_ref(), &mut rng(1), &mut ()).unwrap();
    let ratio = model.explained_variance_ratio().unwrap();
    // The covariance's eigenvalues by a dense decomposition, for the shares.
    let means: Vec<f64> = (0..4).map(|j| (0..80).map(|i| x[(i, j)]).sum::<f64>() / 80.0).collect();
    let centred = Mat::from_fn(80, 4, |i, j| x[(i, j)] - means[j]);
    let (values, _) = dense_pairs(&centred);
    let trace: f64 = values.iter().sum();
    for (r, v) in ratio.iter().zip(&values) {
        assert!((r - v / trace).abs() < 1e-12, "{r} vs {}", v / trace);
    }
    assert!(ratio.iter().sum::<f64>() <= 1.0 + 1e-12);
    // A total below the explained variance, or not finite, is refused.
    for bad in [f64::NAN, -1.0, 1e-9] {
        assert!(model.clone().with_total_variance(bad).is_err(), "{bad}");
    }
}

/// Exact PCA from uneven blocks of rows (a Dask array's chunks): the two rounds of column sums
/// and the Gram parts added in block order ([`Pca::exact_means_round`],
/// [`Pca::exact_gram_part`], [`Pca::exact_from_gram`]) give the one-process job's model, with a
/// column at an offset of 1e9 (the means' second pass must remove the rounding of the first).
#[test]
fn exact_pca_from_blocks_of_rows_equals_the_job() {
    use stolr_estimators::DataRef;
    use stolr_solvers::{Pca, PcaJob, PcaSolver, Shard};
    let mut x = gaussian(203, 5, 7);
    for i in 0..203 {
        x[(i, 1)] += 1e9;
        x[(i, 3)] *= 1e-3;
    }
    let pca = Pca { rank: 3, center: true, scale: false, solver: PcaSolver::Exact };
    let whole = PcaJob::new(pca.clone(), 0).run(Shard::whole(x.as_ref()), &mut ()).unwrap().model;
    let cuts = [0, 37, 74, 111, 148, 185, 203];
    let block = |b: usize| DataRef::Dense(x.as_ref().subrows(cuts[b], cuts[b + 1] - cuts[b]));
    let sum = |round: &[Vec<f64>]| {
        let mut total = vec![0.0; 5];
        for b in 0..cuts.len() - 1 {
            let part = Pca::exact_means_round(block(b), round).unwrap();
            total.iter_mut().zip(&part).for_each(|(t, p)| *t += p);
        }
        total
    };
    let n = vec![203.0];
    let sums = sum(std::slice::from_ref(&n));
    let corrections = sum(&[n.clone(), sums.clone()]);
    let empty = Mat::<f64>::zeros(0, 5);
    let mean = Pca::exact_means_round(DataRef::Dense(empty.as_ref()), &[n, sums, corrections]).unwrap();
    let mut g = Mat::<f64>::zeros(5, 5);
    for b in 0..cuts.len() - 1 {
        g += &Pca::exact_gram_part(block(b), &mean, None);
    }
    let model = pca.exact_from_gram(g, mean.clone(), vec![1.0; 5], 203).unwrap();
    for (a, b) in mean.iter().zip(whole.mean()) {
        assert!((a - b).abs() <= 2.0 * f64::EPSILON * b.abs().max(1.0), "mean {a} vs {b}");
    }
    let (va, vb) = (model.explained_variance(), whole.explained_variance());
    for (a, b) in va.iter().zip(&vb) {
        assert!((a - b).abs() <= 1e-12 * vb[0], "variance {a} vs {b}");
    }
    // The offset did not leak into the variance: the column's spread is about 1.
    assert!(vb[0] < 10.0, "{vb:?}");
    let (ca, cb) = (model.components(), whole.components());
    for j in 0..3 {
        let dot: f64 = (0..5).map(|i| ca[(i, j)] * cb[(i, j)]).sum();
        assert!((dot - 1.0).abs() < 1e-12, "component {j}: cos = {dot}");
    }
    // A non-finite entry in a block is refused by the block's round.
    let mut bad = x.clone();
    bad[(50, 2)] = f64::NAN;
    assert!(Pca::exact_means_round(DataRef::Dense(bad.as_ref().subrows(37, 37)), &[vec![203.0]]).is_err());
}

/// The exact fit centres its rows in the same pass as the Gram matrix (the plain mean's sums
/// first, then `G − c cᵀ/n` with the correction sums `c` taken beside `G`), falling back to the
/// two-pass mean when a column's correction is not small (one process: centred first by a shift
/// read off rows spread over the matrix). Against the dense computation on rows
/// centred by the mean to the last bit:
/// - hostile columns (scales 1e-8 and 1e8, an outlier row, duplicated rows, a zero and a
///   nonzero constant column whose plain mean may round off its value): the mean to 4 ulps,
///   the eigenvalues to 1e-12 of the largest, the two leading components;
/// - unit-scale columns with one at an offset of 1e9: every eigenvalue to 1e-9 of itself (the
///   subtraction `G − c cᵀ/n` loses no digits that matter);
/// - more rows than the one-process shift samples, sorted (the first rows 50 above the rest in
///   half the columns), an outlier row, a column at 1e9 and a constant 0.1 column (whose mean
///   comes out as 0.1 exactly): the mean, the top eigenvalues to 1e-10 of themselves and the
///   components;
///
/// float32 rows fit the same model as their float64 copy; a NaN is still named by its entry.
#[test]
fn exact_pca_centred_in_one_pass_matches_the_dense_computation_on_hostile_columns() {
    use stolr_solvers::{Pca, PcaJob, PcaSolver, Shard};
    let (n, d) = (301, 7);
    let pca = Pca { rank: 3, center: true, scale: false, solver: PcaSolver::Exact };
    let fit = |shard: Shard<'_>| PcaJob::new(pca.clone(), 0).run(shard, &mut ()).unwrap().model;
    // The mean to the last bit (a compensated second pass), the centred rows' eigenpairs.
    let reference = |x: &Mat<f64>| {
        let mean: Vec<f64> = (0..d)
            .map(|j| {
                let first = (0..n).map(|i| x[(i, j)]).sum::<f64>() / n as f64;
                first + (0..n).map(|i| x[(i, j)] - first).sum::<f64>() / n as f64
            })
            .collect();
        let (values, vectors) = dense_pairs(&Mat::from_fn(n, d, |i, j| x[(i, j)] - mean[j]));
        (mean, values.iter().map(|v| v / (n - 1) as f64).collect::<Vec<_>>(), vectors)
    };
    for constant in [0.0, 0.1, 3.3] {
        let mut hostile = gaussian(n, d, 11);
        let mut offset = gaussian(n, d, 12);
        for i in 0..n {
            hostile[(i, 0)] += 1e9;
            hostile[(i, 1)] *= 1e-8;
            hostile[(i, 2)] *= 1e8;
            offset[(i, 0)] = 10.0 * offset[(i, 0)] + 1e9;
            for x in [&mut hostile, &mut offset] {
                x[(i, 3)] = 0.0;
                x[(i, 4)] = constant;
            }
        }
        for i in 20..40 {
            for j in 0..d {
                hostile[(i, j)] = hostile[(5, j)];
            }
        }
        hostile[(7, 5)] = 1e4;
        for (x, all_relative) in [(&hostile, false), (&offset, true)] {
            let model = fit(Shard::whole(x.as_ref()));
            let (mean, values, vectors) = reference(x);
            for (a, b) in model.mean().iter().zip(&mean) {
                assert!((a - b).abs() <= 4.0 * f64::EPSILON * b.abs(), "mean {a} vs {b} (constant {constant})");
            }
            let variance = model.explained_variance();
            for j in 0..3 {
                let scale = if all_relative { 1e-9 * values[j] } else { 1e-12 * values[0] };
                assert!((variance[j] - values[j]).abs() <= scale, "{j}: {} vs {} ({constant})", variance[j], values[j]);
                if all_relative || j < 2 {
                    let dot: f64 = (0..d).map(|i| model.components()[(i, j)] * vectors[(i, j)]).sum();
                    assert!((dot.abs() - 1.0).abs() < 1e-9, "component {j}: |cos| = {}", dot.abs());
                }
            }
            // Float32 rows (these rounded to float32) fit their float64 copy's model.
            let single = Mat::from_fn(n, d, |i, j| x[(i, j)] as f32);
            let widened = Mat::from_fn(n, d, |i, j| f64::from(single[(i, j)]));
            let (from_single, from_widened) =
                (fit(Shard::whole_f32(single.as_ref())), fit(Shard::whole(widened.as_ref())));
            assert_eq!(from_single.explained_variance(), from_widened.explained_variance());
            assert_eq!(from_single.mean(), from_widened.mean());
        }
    }
    // More rows than the shift samples (d = 600: 218), sorted so that the first 250 rows sit 50
    // above the rest in every other column, with an outlier row, a column at 1e9 and a
    // constant column of 0.1.
    let (n, d) = (700, 600);
    let mut x = gaussian(n, d, 13);
    for i in 0..n {
        for j in (0..d).step_by(2) {
            x[(i, j)] += if i < 250 { 50.0 } else { 0.0 };
        }
        x[(i, 1)] += 1e9;
        x[(i, 3)] = 0.1;
    }
    x[(3, 5)] = 1e5;
    let wide = Pca { rank: 3, ..pca.clone() };
    let model = PcaJob::new(wide, 0).run(Shard::whole(x.as_ref()), &mut ()).unwrap().model;
    let mean: Vec<f64> = (0..d)
        .map(|j| {
            let first = (0..n).map(|i| x[(i, j)]).sum::<f64>() / n as f64;
            first + (0..n).map(|i| x[(i, j)] - first).sum::<f64>() / n as f64
        })
        .collect();
    let centred = Mat::from_fn(n, d, |i, j| x[(i, j)] - mean[j]);
    for (j, (a, b)) in model.mean().iter().zip(&mean).enumerate() {
        let spread = (0..n).map(|i| centred[(i, j)].abs()).fold(0.0, f64::max);
        assert!((a - b).abs() <= 4.0 * f64::EPSILON * (b.abs() + spread), "mean {j}: {a} vs {b}");
    }
    assert_eq!(model.mean()[3].to_bits(), 0.1f64.to_bits());
    let (values, vectors) = dense_pairs(&centred);
    for j in 0..3 {
        let want = values[j] / (n - 1) as f64;
        assert!(
            (model.explained_variance()[j] - want).abs() <= 1e-10 * want,
            "{j}: {} vs {want}",
            model.explained_variance()[j]
        );
        let dot: f64 = (0..d).map(|i| model.components()[(i, j)] * vectors[(i, j)]).sum();
        assert!((dot.abs() - 1.0).abs() < 1e-9, "component {j}: |cos| = {}", dot.abs());
    }

    // A NaN is named by its entry, although the sums found it.
    let mut bad = gaussian(50, 4, 2);
    bad[(31, 2)] = f64::NAN;
    let err = PcaJob::new(pca.clone(), 0).run(Shard::whole(bad.as_ref()), &mut ()).unwrap_err();
    assert!(err.to_string().contains("31") && err.to_string().contains("2"), "{err}");
}

/// The exact fit of row-major rows (a C-order NumPy array) is the fit of the same rows
/// column-major, bit for bit, centred and scaled or only centred: the centring copies row-major
/// rows in tiles of rows, and a row count that is not a multiple of the tile, an outlier row,
/// duplicate rows and a constant column change nothing.
#[test]
fn exact_pca_of_row_major_rows_is_that_of_the_same_rows_column_major() {
    use stolr_solvers::{Fit, Pca, PcaSolver};
    let (n, d) = (1013, 37);
    let mut x = gaussian(n, d, 21);
    for j in 0..d {
        x[(5, j)] = 1e6 * (1.0 + j as f64);
        x[(600, j)] = x[(7, j)];
        x[(j, 4)] = 0.0;
    }
    for i in 0..n {
        x[(i, 4)] = 3.25;
    }
    let data: Vec<f64> = (0..n).flat_map(|i| (0..d).map(move |j| (i, j))).map(|(i, j)| x[(i, j)]).collect();
    let row_major = faer::MatRef::from_row_major_slice(&data, n, d);
    for scale in [false, true] {
        let pca = || Pca::new(4, PcaSolver::Exact).center(true).scale(scale);
        let a = pca().fit(x.as_ref(), &mut rng(1), &mut ()).unwrap();
        let b = pca().fit(row_major, &mut rng(1), &mut ()).unwrap();
        let bits = |m: faer::MatRef<'_, f64>| {
            (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits())).collect::<Vec<_>>()
        };
        assert_eq!(bits(a.components()), bits(b.components()), "scale {scale}");
        assert_eq!(
            a.eigenvalues().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            b.eigenvalues().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}
