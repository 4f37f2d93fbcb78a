//! Every solver gives the same bits with 1, 2 and 4 threads: kernel PCA (exact dense, exact
//! matrix-free, Nyström, SKPCA with a PSD and a general iterate, KHA; the certificate and the
//! choice of τ), linear PCA (exact, SVRG-PCA, VR-PCA), the streaming solvers (MSG, capped MSG,
//! incremental, Oja) and kernel ridge regression (SLKL and KRR on all points), each through the
//! public library API and its fitted model. The sizes cross the thresholds where work is split
//! (several row groups of the reductions, faer's parallel matrix–vector products and
//! eigendecompositions, several batches of kernel tiles).
//!
//! Its own test binary: it sets faer's global parallelism, so everything runs in one test, one
//! setting after the other (the families of solvers side by side within a setting).

use faer::{Mat, MatRef, Par};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_memory::MemoryBudget;
use stolr_solvers::{
    CertifyConfig, CertifyMethod, ColumnMode, ExactOperator, Fit, FitRegression, IncrementalPca, IterativeSolver,
    KernelPca, KernelRidge, KpcaSolver, KrrSolver, MatrixFreeConfig, Msg, MsgConfig, Oja, Pca, PcaSolver, Predictor,
    SamplerKind, SkpcaConfig, Slkl, SlklConfig, StepSize, StreamPass, StreamingPca, SvrgPcaConfig, Transformer,
    VrPcaConfig, certify, matrix_free_kpca, matrix_rows, run, tau_for_rank,
};

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// `(n, d)` data: four Gaussian blobs, so kernels and covariances have a clear top spectrum.
fn blobs(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut r = rng(seed);
    let centres: Vec<Vec<f64>> = (0..4)
        .map(|_| (0..d).map(|_| 3.0 * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut r)).collect())
        .collect();
    Mat::from_fn(n, d, |i, j| {
        centres[i % 4][j] + <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut r)
    })
}

fn bits(m: MatRef<'_, f64>) -> Vec<u64> {
    (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits())).collect()
}

fn vec_bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

type Results = Vec<(&'static str, Vec<u64>)>;

fn kernel_pca(out: &mut Results) {
    let gauss = Kernel::gaussian(3.0);
    let x = blobs(1200, 5, 1);
    let held_out = blobs(300, 5, 2);
    let mut fit = |name: &'static str, params: KernelPca, x: MatRef<'_, f64>| {
        let fit = params.fit_prepared(x, None, &mut rng(7), &mut ()).unwrap();
        let z = fit.model.transform(held_out.as_ref()).unwrap();
        out.push((name, [vec_bits(&fit.pairs.values), bits(fit.pairs.vectors.as_ref()), bits(z.as_ref())].concat()));
        fit
    };
    let dense = KpcaSolver::Exact { tolerance: 1e-10, operator: ExactOperator::Dense };
    let exact = fit("exact", KernelPca::new(5, gauss, dense).center(true), x.as_ref());
    let rank1 = KpcaSolver::Exact { tolerance: 1e-10, operator: ExactOperator::Dense };
    fit("exact, rank 1", KernelPca::new(1, gauss, rank1), x.as_ref());
    fit("nystrom", KernelPca::new(5, gauss, KpcaSolver::Nystrom { landmarks: 650 }).center(true), x.as_ref());
    fit("kha", KernelPca::new(3, gauss, KpcaSolver::Kha { eta: 0.05, iterations: 400, init_scale: 0.1 }), x.as_ref());

    // SKPCA on more rows than one Gram group (4096), with the PSD and the general iterate.
    let big = blobs(9000, 5, 3);
    let skpca = |sampler, features, iterations| KpcaSolver::Skpca {
        config: SkpcaConfig { tau: 40.0, iterations, ..Default::default() },
        sampler,
        features,
    };
    fit("skpca rff", KernelPca::new(5, gauss, skpca(SamplerKind::Rff, 25, 12)).center(true), big.as_ref());
    fit("skpca columns", KernelPca::new(3, gauss, skpca(SamplerKind::Columns, 4, 6)), big.as_ref());

    let mf = MatrixFreeConfig { tile: 64, memory: MemoryBudget::UNLIMITED, center: true, ..MatrixFreeConfig::new(4) };
    let mf_fit = matrix_free_kpca(x.as_ref(), &gauss, &mf).unwrap();
    out.push(("matrix-free", [vec_bits(&mf_fit.pairs.values), bits(mf_fit.pairs.vectors.as_ref())].concat()));

    for method in [CertifyMethod::Exact, CertifyMethod::Estimate] {
        let config =
            CertifyConfig { method: Some(method), tile: 100, memory: MemoryBudget::UNLIMITED, ..Default::default() };
        let c = certify(x.as_ref(), &gauss, false, None, &exact.pairs, &config, &mut rng(5)).unwrap();
        out.push(("certificate", [vec_bits(&c.residuals), vec_bits(&c.captured), vec_bits(&[c.trace])].concat()));
    }
    let tau = tau_for_rank(x.as_ref(), &gauss, 5, 700, true, MemoryBudget::UNLIMITED, &mut rng(6)).unwrap();
    out.push(("tau", [vec_bits(&[tau.tau]), vec_bits(&tau.estimated_eigenvalues)].concat()));
}

fn linear_pca(out: &mut Results) {
    let x = blobs(6000, 300, 4);
    let held_out = blobs(500, 300, 5);
    let mut fit = |name: &'static str, params: Pca| {
        let model = params.fit(x.as_ref(), &mut rng(8), &mut ()).unwrap();
        let z = model.transform(held_out.as_ref()).unwrap();
        out.push((name, [vec_bits(model.eigenvalues()), bits(model.components()), bits(z.as_ref())].concat()));
    };
    fit("pca exact", Pca::new(4, PcaSolver::Exact).center(true));
    fit("pca exact, rank 1", Pca::new(1, PcaSolver::Exact).center(true));
    let svrg = SvrgPcaConfig { max_epochs: 3, ..SvrgPcaConfig::consistent(3) };
    fit("svrg-bb", Pca::new(3, PcaSolver::SvrgBb(svrg)).center(true));
    let vr = VrPcaConfig { epoch_length: Some(400), ..VrPcaConfig::new(3, 2) };
    fit("vr-pca", Pca::new(3, PcaSolver::VrPca(vr)).center(true).scale(true));
}

fn streaming(out: &mut Results) {
    let x = blobs(3000, 300, 9);
    let (d, k) = (300, 5);
    let step = StepSize::ScaleFree { c: 1.0 };
    let mut solvers: Vec<(&'static str, Box<dyn StreamingPca>)> = vec![
        ("msg", Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(d, k) }, &mut rng(1)).unwrap())),
        (
            "capped msg",
            Box::new(Msg::new(MsgConfig { step, cap: Some(k + 1), ..MsgConfig::msg(d, k) }, &mut rng(1)).unwrap()),
        ),
        ("incremental", Box::new(IncrementalPca::new(d, k).unwrap())),
        ("oja", Box::new(Oja::new(d, k, step, &mut rng(1)).unwrap())),
    ];
    for (name, solver) in solvers.iter_mut() {
        run(&mut StreamPass::new(&mut **solver, matrix_rows(x.as_ref())), &mut rng(2), &mut ()).unwrap();
        out.push((name, bits(solver.subspace().as_ref())));
    }
    // Capped MSG's mini-batches (the small Gram matrix of the batch and the kept basis).
    let mut batched = Msg::new(MsgConfig { step, cap: Some(2 * k), ..MsgConfig::msg(d, k) }, &mut rng(1)).unwrap();
    for start in (0..x.nrows()).step_by(16) {
        batched.observe_minibatch(x.as_ref().subrows(start, 16.min(x.nrows() - start))).unwrap();
    }
    out.push(("capped msg, batches of 16", bits(batched.subspace().as_ref())));
}

fn regression(out: &mut Results) {
    // SLKL's Woodbury probes sum over n·p products: enough rows and active columns to split.
    let x = blobs(20_000, 4, 11);
    let mut r = rng(13);
    let y: Vec<f64> = (0..20_000)
        .map(|i| x[(i, 0)].sin() + 0.5 * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut r))
        .collect();
    let held_out = blobs(700, 4, 12);
    let gauss = Kernel::gaussian(1.0);
    let slkl = SlklConfig { landmarks: 400, nu: 1e-4, lambda: 0.1, max_epochs: 2, ..SlklConfig::default() };
    for (name, solver, rows) in [("slkl", KrrSolver::Slkl(slkl), 20_000), ("krr", KrrSolver::Krr { lambda: 0.1 }, 1500)]
    {
        let params = KernelRidge { standardize: true, ..KernelRidge::new(gauss, solver) };
        let model = params.fit(x.as_ref().subrows(0, rows), &y[..rows], &mut rng(3), &mut ()).unwrap();
        out.push((name, vec_bits(model.expansion().coefficients())));
        let predicted = model.predict(held_out.as_ref()).unwrap();
        out.push((name, predicted.iter().map(|v| v.to_bits()).collect()));
    }
    // SLKL's probes read off the Gram matrix of the landmark columns (summed in an order fixed
    // by the shape), formed on the fly with an unlimited budget.
    let config = SlklConfig {
        lambda: 0.05,
        nu: 0.01,
        landmarks: 300,
        max_epochs: 2,
        column_mode: ColumnMode::OnTheFly,
        ..SlklConfig::default()
    };
    let mut s = Slkl::new(x.as_ref().subrows(0, 3000), &y[..3000], &gauss, config, &mut rng(1)).unwrap();
    s.set_memory_budget(MemoryBudget::UNLIMITED);
    let mut r = rng(2);
    while s.finished().is_none() {
        s.step(&mut r).unwrap();
    }
    assert!(s.uses_gram(), "SLKL with an unlimited budget forms the Gram matrix");
    out.push(("slkl with the Gram matrix: weights", vec_bits(s.weights())));
    out.push(("slkl with the Gram matrix: beta", vec_bits(s.woodbury().beta())));
    out.push(("slkl with the Gram matrix: objective", vec![s.objective().to_bits()]));
}

/// Every family's results under `par`. The four families run at the same time on threads of
/// their own (with one thread each, the test would otherwise leave a core idle for a third of
/// its time); each result is the same bits whatever runs beside it, and they are gathered in
/// a fixed order.
fn all(par: Par) -> Results {
    faer::set_global_parallelism(par);
    let families: [fn(&mut Results); 4] = [kernel_pca, linear_pca, streaming, regression];
    std::thread::scope(|scope| {
        let running: Vec<_> = families
            .iter()
            .map(|family| {
                scope.spawn(move || {
                    let mut out = Vec::new();
                    family(&mut out);
                    out
                })
            })
            .collect();
        running.into_iter().flat_map(|family| family.join().expect("a family of solvers panicked")).collect()
    })
}

#[test]
fn every_solver_gives_the_same_bits_on_one_two_and_four_threads() {
    let one = all(Par::Seq);
    for par in [Par::rayon(2), Par::rayon(4)] {
        let several = all(par);
        assert_eq!(one.len(), several.len());
        let differ: Vec<&str> =
            one.iter().zip(&several).filter(|((_, a), (_, b))| a != b).map(|((name, _), _)| *name).collect();
        assert!(differ.is_empty(), "the bits differ between one thread and {par:?} for: {differ:?}");
    }
}
