//! Criterion benchmarks of the streaming PCA solvers (\[MSG\]) in samples per second: capped
//! MSG (k = 8, K = 9), the incremental algorithm (k = 8), plain MSG and Oja, each fed the
//! same 10 000 MNIST samples (centred, scaled to E‖x‖² = 1 as in \[MSG\], Section 6), d = 784.
//!
//! Needs `../shared/data/mnist` (or `STOLR_DATA=DIR`); otherwise Gaussian samples of the same
//! shape are used.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_datasets::{MnistSplit, generate, read_mnist};
use stolr_solvers::{IncrementalPca, Msg, MsgConfig, Oja, StepSize, StreamingPca};

const SAMPLES: usize = 10_000;

/// `SAMPLES` rows of length 784: centred, divided by `sqrt(E‖x − mean‖²)`.
fn samples() -> Vec<Vec<f64>> {
    let dir = std::env::var_os("STOLR_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let x = match read_mnist(&dir.join("mnist"), MnistSplit::Test, Default::default()) {
        Ok(d) => d.x,
        Err(e) => {
            eprintln!("MNIST not available ({e}); using Gaussian samples");
            generate::gaussian(SAMPLES, 784, &mut Xoshiro256PlusPlus::seed_from_u64(0))
        }
    };
    let (n, d) = (x.nrows().min(SAMPLES), x.ncols());
    let mean: Vec<f64> = (0..d).map(|j| (0..n).map(|i| x[(i, j)]).sum::<f64>() / n as f64).collect();
    let mut rows: Vec<Vec<f64>> = (0..n).map(|i| (0..d).map(|j| x[(i, j)] - mean[j]).collect()).collect();
    let scale = (rows.iter().flatten().map(|v| v * v).sum::<f64>() / n as f64).sqrt();
    rows.iter_mut().flatten().for_each(|v| *v /= scale);
    rows
}

fn feed(mut solver: impl StreamingPca, rows: &[Vec<f64>]) -> usize {
    for x in rows {
        solver.observe(x).unwrap();
    }
    solver.iterate_rank()
}

fn bench_streaming(c: &mut Criterion) {
    let rows = samples();
    let (d, k) = (rows[0].len(), 8);
    let mut group = c.benchmark_group("solvers/streaming/mnist_k8");
    group.sample_size(10);
    group.throughput(Throughput::Elements(rows.len() as u64));
    let seeded = || Xoshiro256PlusPlus::seed_from_u64(1);
    group.bench_function("capped_msg_K9", |b| {
        b.iter_batched(
            || Msg::new(MsgConfig::capped(d, k), &mut seeded()).unwrap(),
            |s| black_box(feed(s, &rows)),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("incremental", |b| {
        b.iter_batched(|| IncrementalPca::new(d, k).unwrap(), |s| black_box(feed(s, &rows)), BatchSize::LargeInput)
    });
    group.bench_function("oja", |b| {
        b.iter_batched(
            || Oja::new(d, k, StepSize::ScaleFree { c: MsgConfig::DEFAULT_C }, &mut seeded()).unwrap(),
            |s| black_box(feed(s, &rows)),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("msg", |b| {
        b.iter_batched(
            || Msg::new(MsgConfig::msg(d, k), &mut seeded()).unwrap(),
            |s| black_box(feed(s, &rows)),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_streaming);
criterion_main!(benches);
