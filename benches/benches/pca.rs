//! Criterion benchmarks of one epoch of each linear PCA solver on MNIST (70 000 × 784, pixels
//! divided by 255, r = 6): SVRG-PCA (consistent and paper settings), block VR-PCA, and the
//! exact Gram-matrix path for scale. One "epoch" here is a run with one epoch: snapshot, inner
//! loop, final snapshot and Rayleigh–Ritz. The stochastic solvers get row-major data, the exact
//! one column-major, as in `stolr pca`.
//!
//! Needs `../shared/data/mnist` (or `STOLR_DATA=DIR`); otherwise a Gaussian matrix of the same
//! shape is used.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_datasets::{MnistSplit, generate, read_mnist};
use stolr_solvers::{SvrgPcaConfig, Tolerance, VrPcaConfig, exact_pca, svrg_pca, vr_pca};

fn data() -> faer::Mat<f64> {
    let dir = std::env::var_os("STOLR_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    match read_mnist(&dir.join("mnist"), MnistSplit::All, Default::default()) {
        Ok(d) => d.x * (1.0 / 255.0),
        Err(e) => {
            eprintln!("MNIST not available ({e}); using a Gaussian 70000 × 784 matrix");
            generate::gaussian(70_000, 784, &mut Xoshiro256PlusPlus::seed_from_u64(0))
        }
    }
}

fn bench_pca(c: &mut Criterion) {
    let x_cols = data();
    // The stochastic solvers read one sample per inner step: row-major, as the CLI hands them.
    let rows = x_cols.transpose().to_owned();
    let x = rows.transpose();
    let r = 6;
    let mut group = c.benchmark_group("solvers/pca/mnist_r6");
    group.sample_size(10);
    let one_epoch = |cfg: SvrgPcaConfig| SvrgPcaConfig { max_epochs: 1, tolerance: Tolerance::Absolute(0.0), ..cfg };
    for (name, cfg) in [
        ("svrg_consistent_epoch", one_epoch(SvrgPcaConfig::consistent(r))),
        ("svrg_paper_epoch", one_epoch(SvrgPcaConfig::paper(r))),
    ] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        group.bench_function(name, |b| b.iter(|| black_box(svrg_pca(x, &cfg, &mut rng, &mut ()).unwrap())));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    group.bench_function("vr_pca_epoch", |b| {
        b.iter(|| black_box(vr_pca(x, &VrPcaConfig::new(r, 1), &mut rng, &mut ()).unwrap()))
    });
    group.bench_function("exact", |b| b.iter(|| black_box(exact_pca(x_cols.as_ref(), r).unwrap())));
    group.finish();
}

criterion_group!(benches, bench_pca);
criterion_main!(benches);
