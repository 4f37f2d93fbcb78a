//! Criterion benchmarks of one SKPCA iteration and its parts on the paper's data sets
//! (Mushrooms 8124 × 112, Magic 19020 × 10 standardized; Gaussian kernel, σ by the 20th
//! percentile rule, k = 50 random Fourier features, τ = 10), at the iterate reached after a
//! warm-up of 300 iterations, so `rank(Z_t)` is representative.
//!
//! Needs `../shared/data` (or `STOLR_DATA=DIR`); data sets that are missing are skipped.
//! `STOLR_BENCH_ONLY=mushrooms` (or `magic`) runs one data set.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_datasets::{read_libsvm, read_magic};
use stolr_estimators::{
    DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, KernelSampler, RandomFourierFeatures, bandwidth_rule,
};
use stolr_lowrank::{Orthogonalization, shrink_psd};
use stolr_model::standardize;
use stolr_solvers::{Iterate, Skpca, SkpcaConfig, run};

fn data_dir() -> PathBuf {
    std::env::var_os("STOLR_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"))
}

fn datasets() -> Vec<(&'static str, faer::Mat<f64>)> {
    let dir = data_dir();
    let mut out = Vec::new();
    match read_libsvm(&dir.join("mushrooms/mushrooms"), Default::default()) {
        Ok(d) => out.push(("mushrooms", d.x)),
        Err(e) => eprintln!("skipping mushrooms: {e}"),
    }
    match read_magic(&dir.join("magic04/magic04.data"), Default::default()) {
        Ok(mut d) => {
            standardize(&mut d.x);
            out.push(("magic", d.x));
        }
        Err(e) => eprintln!("skipping magic: {e}"),
    }
    out
}

fn bench_skpca(c: &mut Criterion) {
    let only = std::env::var("STOLR_BENCH_ONLY").ok();
    for (name, x) in datasets() {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        let sigma =
            bandwidth_rule(x.as_ref(), DEFAULT_BANDWIDTH_PERCENTILE, DEFAULT_BANDWIDTH_PAIRS, &mut rng).unwrap();
        let kernel = Kernel::gaussian(sigma);
        let warm_up = RandomFourierFeatures::new(x.as_ref(), kernel, 50).unwrap();
        let mut solver =
            Skpca::new(SkpcaConfig { tau: 10.0, iterations: 300, ..Default::default() }, Box::new(warm_up)).unwrap();
        run(&mut solver, &mut rng, &mut ()).unwrap();
        let mut sampler = RandomFourierFeatures::new(x.as_ref(), kernel, 50).unwrap();
        let Iterate::Psd(z) = solver.iterate().clone() else { unreachable!("RFF feeds the PSD path") };
        eprintln!("{name}: n = {}, rank(Z_301) = {}", x.nrows(), z.rank());
        let mut group = c.benchmark_group(format!("skpca/{name}"));
        group.sample_size(30);
        group.bench_function("rff_draw", |b| b.iter(|| black_box(sampler.sample(&mut rng).unwrap())));
        let draw = sampler.sample(&mut rng).unwrap();
        let eta = 2.0 / 301.0;
        for (label, how) in [
            ("shrink_step_block_gs", Orthogonalization::BlockGramSchmidt),
            ("shrink_step_fresh_qr", Orthogonalization::FreshQr),
        ] {
            group.bench_function(label, |b| {
                b.iter(|| black_box(shrink_psd(&z, draw.zeta.clone(), eta, eta * 10.0, how).unwrap()))
            });
        }
        // One SKPCA iteration from Z_301: a draw and the shrinkage step (what `Skpca::step` does).
        group.bench_function("iteration", |b| {
            b.iter(|| {
                let draw = sampler.sample(&mut rng).unwrap();
                black_box(shrink_psd(&z, draw.zeta, eta, eta * 10.0, Orthogonalization::BlockGramSchmidt).unwrap())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_skpca);
criterion_main!(benches);
