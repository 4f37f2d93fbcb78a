//! Every reduction and factorization of `stolr-lowrank` gives the same bits on one thread and on
//! several: the in-place Rayleigh–Ritz step (its Gram matrix summed over row groups fixed by
//! `n`), the tall products `aᵀb` and `(XW, XᵀXW)`, matrix–vector products, the dense
//! factorizations, the Krylov–Schur partial eigensolver, Cholesky solves and the Woodbury
//! probes of SLKL. Shapes are chosen to cross the thresholds where the work is split (several
//! row groups, faer's parallel matrix–vector products and tridiagonalization). Its own test
//! binary: it sets faer's global parallelism, so everything runs in one test, one setting after
//! the other.

use faer::{Accum, Mat, Par};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{
    SymLowRank, WoodburyInverse, gram_and_sums_of_row_blocks, gram_apply, matmul, mul, shrink_psd_in_place,
    spd_inverse, spd_solve, sym_eigen_desc, sym_eigenvalues_desc, tall_inner, thin_qr, thin_svd, top_eigenpairs,
};

fn gaussian(rows: usize, cols: usize, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
    Mat::from_fn(rows, cols, |_, _| <StandardNormal as Distribution<f64>>::sample(&StandardNormal, rng))
}

/// The bit patterns of a matrix, column by column.
fn bits(m: &Mat<f64>) -> Vec<u64> {
    (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits())).collect()
}

fn vec_bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Everything computed with the global parallelism `par`, as named bit patterns.
fn run(par: Par) -> Vec<(&'static str, Vec<u64>)> {
    faer::set_global_parallelism(par);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut out = Vec::new();

    // SKPCA's in-place step: several row groups of the Gram matrix and blocks of the product.
    let (n, a) = (3 * 4096 + 77, 6);
    let mut z = SymLowRank::zeros(n);
    for t in 1..=4 {
        let eta = 2.0 / t as f64;
        let zeta = gaussian(n, a, &mut rng);
        shrink_psd_in_place(&mut z, zeta.as_ref(), eta, eta * 50.0).unwrap();
    }
    assert!(z.rank() > 0);
    out.push(("shrink_psd_in_place", [bits(&z.u().to_owned()), vec_bits(z.s())].concat()));

    // Tall inner products: many row groups, and one column (Woodbury's Vᵀx).
    let x = gaussian(40_000, 30, &mut rng);
    let y = gaussian(40_000, 3, &mut rng);
    out.push(("tall_inner", bits(&tall_inner(x.as_ref(), y.as_ref(), false))));
    out.push(("tall_inner lower", bits(&tall_inner(x.as_ref(), x.as_ref(), true))));
    out.push(("tall_inner vector", bits(&tall_inner(x.as_ref(), y.as_ref().subcols(0, 1), false))));
    let w = gaussian(30, 4, &mut rng);
    let (xw, xtxw) = gram_apply(x.as_ref(), w.as_ref());
    out.push(("gram_apply", [bits(&xw), bits(&xtxw)].concat()));
    let (xw1, xtxw1) = gram_apply(x.transpose().to_owned().transpose(), w.as_ref().subcols(0, 1));
    out.push(("gram_apply rank 1, row-major", [bits(&xw1), bits(&xtxw1)].concat()));

    // Gram matrix and column sums of row blocks, several lanes (d = 30: four).
    let (g, sums) = gram_and_sums_of_row_blocks(40_000, 30, 1000, |start, mut out| {
        out.copy_from(x.as_ref().subrows(start, out.nrows()));
    });
    out.push(("gram_and_sums_of_row_blocks", [bits(&g), vec_bits(&sums)].concat()));

    // Matrix–vector products (faer splits their summation among threads), both orientations.
    let big = gaussian(5000, 300, &mut rng);
    let v = gaussian(300, 1, &mut rng);
    let mut col = gaussian(5000, 1, &mut rng);
    matmul(col.as_mut(), Accum::Add, big.as_ref(), v.as_ref(), 0.5, par);
    out.push(("matmul column", bits(&col)));
    let u = gaussian(1, 5000, &mut rng);
    out.push(("mul row", bits(&mul(u.as_ref(), big.as_ref()))));
    out.push(("mul matrix", bits(&mul(big.as_ref(), gaussian(300, 7, &mut rng).as_ref()))));

    // Dense factorizations past faer's parallel thresholds.
    let g = gaussian(700, 700, &mut rng);
    let sym = &g + g.transpose();
    let (values, vectors) = sym_eigen_desc(sym.as_ref()).unwrap();
    out.push(("sym_eigen_desc", [vec_bits(&values), bits(&vectors)].concat()));
    out.push(("sym_eigenvalues_desc", vec_bits(&sym_eigenvalues_desc(sym.as_ref()).unwrap())));
    let (q, r) = thin_qr(x.as_ref());
    out.push(("thin_qr", [bits(&q), bits(&r)].concat()));
    let (su, s, sv) = thin_svd(g.as_ref().subcols(0, 600)).unwrap();
    out.push(("thin_svd", [bits(&su), vec_bits(&s), bits(&sv)].concat()));
    let spd = &g * g.transpose() + Mat::<f64>::identity(700, 700);
    out.push(("top_eigenpairs", {
        let pairs = top_eigenpairs(spd.as_ref(), 5, 1e-12).unwrap();
        [vec_bits(&pairs.values), bits(&pairs.vectors)].concat()
    }));
    let rhs1 = gaussian(700, 1, &mut rng);
    out.push(("spd_solve 1 rhs", bits(&spd_solve(spd.as_ref(), rhs1.as_ref(), "spd").unwrap())));
    out.push(("spd_solve 5 rhs", bits(&spd_solve(spd.as_ref(), gaussian(700, 5, &mut rng).as_ref(), "spd").unwrap())));
    out.push(("spd_inverse", bits(&spd_inverse(spd.as_ref(), "spd").unwrap())));

    // SLKL's state: columns pushed one by one (each probed), a refresh, a probe.
    let yv: Vec<f64> = (0..40_000).map(|i| (i as f64 * 0.01).sin()).collect();
    let mut state = WoodburyInverse::new(0.5, &yv).unwrap();
    for _ in 0..60 {
        let k: Vec<f64> = gaussian(40_000, 1, &mut rng).col_as_slice(0).to_vec();
        state.push(&k, 0.7).unwrap();
    }
    state.refresh().unwrap();
    let k: Vec<f64> = gaussian(40_000, 1, &mut rng).col_as_slice(0).to_vec();
    let probe = state.probe(&k).unwrap();
    out.push((
        "woodbury",
        [
            bits(&state.sigma().to_owned()),
            vec_bits(state.beta()),
            vec_bits(&probe.q),
            vec_bits(&probe.u),
            vec_bits(&[probe.quadratics.k_g_y, probe.quadratics.k_g_k]),
        ]
        .concat(),
    ));
    out
}

#[test]
fn same_bits_on_one_two_and_four_threads() {
    let one = run(Par::Seq);
    for par in [Par::rayon(2), Par::rayon(4)] {
        let several = run(par);
        for ((name, a), (_, b)) in one.iter().zip(&several) {
            assert!(a == b, "{name}: the bits differ between one thread and {par:?}");
        }
    }
}
