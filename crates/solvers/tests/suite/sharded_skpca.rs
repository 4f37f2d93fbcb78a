//! SKPCA on rows split across ranks simulated by threads ([`ThreadGroup`]), through the
//! library's job path ([`KernelPca::fit_shard`]): the column samplers (sampled indices drawn
//! over the global `n`, their rows assembled from their owners) and centring (column means over
//! every rank) on `P = 1, 2, 3` give one process's fit — the same draws, the same iterate up to
//! the rounding of the rank-ordered sums; one rank gives its bits.

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, ThreadGroup};
use stolr_estimators::{DataRef, Kernel};
use stolr_solvers::{KernelPca, KernelPcaFit, KpcaSolver, SamplerKind, Shard, SkpcaConfig, Transformer};

/// Small random rows with what a sharded fit must survive: an outlier row, a row repeated on
/// two ranks (rows 1 and 40, and 7 and 8 next to each other) and a constant column.
fn hostile_rows() -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let ring = stolr_datasets::generate::rings(48, 0.2, &mut rng).x;
    let mut x = Mat::from_fn(ring.nrows(), 3, |i, j| if j < 2 { ring[(i, j)] } else { 2.5 });
    x[(20, 0)] = 9.0;
    x[(20, 1)] = -7.5;
    for (to, from) in [(40, 1), (8, 7)] {
        for j in 0..3 {
            x[(to, j)] = x[(from, j)];
        }
    }
    x
}

fn params(sampler: SamplerKind, center: bool) -> KernelPca {
    let (kernel, tau, features) = match sampler {
        SamplerKind::Maclaurin => (Kernel::polynomial(0.5, 1.0, 2), 2.0, 12),
        SamplerKind::Rff => (Kernel::gaussian(1.2), 2.0, 10),
        _ => (Kernel::gaussian(1.2), 2.0, 4),
    };
    let config = SkpcaConfig { tau, iterations: 30, max_rank: Some(40), ..Default::default() };
    KernelPca { center, ..KernelPca::new(4, kernel, KpcaSolver::Skpca { config, sampler, features }) }
}

/// The fit on `p` thread ranks (rank 0's result), each rank given its balanced share of the
/// rows and the same seed; `p == 0`: one process, without a communicator.
fn fit_on(p: usize, x: &Mat<f64>, params: &KernelPca) -> KernelPcaFit {
    let n = x.nrows();
    if p == 0 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let all = DataRef::Dense(x.as_ref());
        return params.fit_shard(&Shard::whole(x.as_ref()), Some(all), None, &mut rng, &mut ()).unwrap().unwrap();
    }
    let mut out = ThreadGroup::run(p, |comm| {
        let place = RowShard::balanced(n, comm.rank(), comm.size());
        let local = x.subrows(place.first, place.rows).to_owned();
        let all = comm.is_root().then(|| DataRef::Dense(x.as_ref()));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        params.fit_shard(&Shard::part(local, place, comm), all, None, &mut rng, &mut ()).unwrap()
    });
    assert!(out[1..].iter().all(Option::is_none), "only rank 0 returns the fit");
    out.swap_remove(0).unwrap()
}

/// The largest difference of the eigenvalues relative to the first, and of the eigenvectors
/// (unit columns) up to the sign of each column.
fn differences(a: &KernelPcaFit, b: &KernelPcaFit) -> (f64, f64) {
    let (va, vb) = (&a.pairs.values, &b.pairs.values);
    assert_eq!(va.len(), vb.len(), "{va:?} {vb:?}");
    let ev = va.iter().zip(vb).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / va[0];
    let (ua, ub) = (a.pairs.vectors.as_ref(), b.pairs.vectors.as_ref());
    assert_eq!(ua.shape(), ub.shape());
    let column =
        |j: usize, sign: f64| (0..ua.nrows()).map(|i| (ua[(i, j)] - sign * ub[(i, j)]).abs()).fold(0.0, f64::max);
    let vec = (0..ua.ncols()).map(|j| column(j, 1.0).min(column(j, -1.0))).fold(0.0, f64::max);
    (ev, vec)
}

fn max_abs(a: MatRef<'_, f64>) -> f64 {
    (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| a[(i, j)].abs())).fold(0.0, f64::max)
}

#[test]
fn sharded_skpca_with_column_samplers_and_centring_matches_one_process() {
    let x = hostile_rows();
    let test_rows =
        Mat::from_fn(5, 3, |i, j| (i as f64 * 0.7 - 1.0) * (j as f64 + 0.5) * if j == 2 { 0.0 } else { 1.0 });
    let cases = [
        (SamplerKind::Columns, false),
        (SamplerKind::ColumnsSym, false),
        (SamplerKind::Columns, true),
        (SamplerKind::ColumnsSym, true),
        (SamplerKind::Rff, true),
        (SamplerKind::Maclaurin, true),
    ];
    for (sampler, center) in cases {
        let params = params(sampler, center);
        let single = fit_on(0, &x, &params);
        assert!(single.pairs.rank() >= 2, "{sampler:?}, center {center}: rank {}", single.pairs.rank());
        let projected = single.model.transform(test_rows.as_ref()).unwrap();
        for p in [1, 2, 3] {
            let got = fit_on(p, &x, &params);
            let (ev, vec) = differences(&single, &got);
            let proj = max_abs((&got.model.transform(test_rows.as_ref()).unwrap() - &projected).as_ref())
                / max_abs(projected.as_ref());
            eprintln!(
                "{sampler:?}, center {center}, P = {p}: eigenvalues {ev:e}, vectors {vec:e}, projections {proj:e}"
            );
            if p == 1 {
                assert_eq!(got.pairs, single.pairs, "{sampler:?}, center {center}: one rank gives the same bits");
                assert_eq!(proj, 0.0);
            }
            assert_eq!(got.iterations, single.iterations);
            assert!(
                ev <= 1e-12 && vec <= 1e-12 && proj <= 1e-12,
                "{sampler:?}, center {center}, P = {p}: eigenvalues {ev:e}, vectors {vec:e}, projections {proj:e}"
            );
        }
    }
}
