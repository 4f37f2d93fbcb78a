//! Figure 3 on MNIST (Section 6; protocol of docs/derivations.md §5.8): centred, scaled so that
//! `E‖x‖² = 1`, random 40/20/40 train/validation/test splits, one pass over the training split, `c`
//! of `η_t = c/√t` chosen on a grid by mean validation suboptimality; test suboptimality against
//! iterations and against `Σ k_t²`.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use faer::Mat;
use rand::seq::SliceRandom;
use stolr_datasets::{MnistSplit, read_mnist};
use stolr_lowrank::sym_eigen_desc;
use stolr_solvers::{IterationReport, Named, Observer, PcaMethod, StreamingPca};

use super::common::{METHODS, pass, solver, suboptimality};
use crate::curve::log_spaced;
use crate::observe::{Both, Measured};
use crate::runner::{DataDir, stream};
use crate::stats::{mean, std};
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// How MNIST is scaled after centring: `E‖x‖² = 1` over the data set (0.92 per pixel, where
/// the 65 constant pixels stay 0).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Scaling {
    /// docs/derivations.md §5.8 read literally: pixel j divided by `std_j·√d` (constant pixels left
    /// at 0). Pixels that are almost always 0 get a huge factor, so the rare images that touch them
    /// become spikes: `‖x‖²` reaches 224 (99.9th percentile 39) against a mean of 0.92.
    PerPixel,
    /// One scalar for all pixels: `x / sqrt(E‖x‖²)`; PCA of the centred data is unchanged.
    Global,
}

impl Scaling {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scaling::PerPixel => "per-pixel",
            Scaling::Global => "global",
        }
    }
}

/// One method with its chosen `c` on one k, over the splits.
pub(super) struct MethodCurves {
    pub(super) method: PcaMethod,
    /// The chosen `c` (`None` for the incremental method, which has no step).
    pub(super) c: Option<f64>,
    /// Mean over splits of the test suboptimality and of `Σ_s k_s²` at each mark.
    pub(super) test: Vec<f64>,
    pub(super) work: Vec<f64>,
    /// Final test suboptimality of each split.
    pub(super) finals: Vec<f64>,
    /// Mean samples per second.
    pub(super) rate: f64,
}

/// The experiment under one scaling.
pub(super) struct MnistRun {
    pub(super) scaling: Scaling,
    pub(super) n: usize,
    pub(super) n_train: usize,
    pub(super) n_val: usize,
    pub(super) splits: usize,
    /// The `c` grid.
    pub(super) grid: Vec<f64>,
    /// The marks (iterations) of the curves.
    pub(super) t: Vec<f64>,
    /// Per k, every method.
    pub(super) per_k: Vec<(usize, Vec<MethodCurves>)>,
}

/// MNIST as rows (samples), centred and scaled by `scaling`.
fn mnist_rows(data: &DataDir, scaling: Scaling) -> Result<Vec<Vec<f64>>, BenchError> {
    let x = read_mnist(&data.path("mnist"), MnistSplit::All, stolr_memory::MemoryBudget::default())?.x;
    let (n, d) = (x.nrows(), x.ncols());
    let mut rows: Vec<Vec<f64>> = (0..n).map(|i| (0..d).map(|j| x[(i, j)]).collect()).collect();
    let mut total_var = 0.0;
    let mut scales = vec![0.0; d];
    for (j, scale) in scales.iter_mut().enumerate() {
        let mean = rows.iter().map(|r| r[j]).sum::<f64>() / n as f64;
        let var = rows.iter().map(|r| (r[j] - mean).powi(2)).sum::<f64>() / n as f64;
        rows.iter_mut().for_each(|r| r[j] -= mean);
        total_var += var;
        *scale = if var > 0.0 { 1.0 / (var.sqrt() * (d as f64).sqrt()) } else { 0.0 };
    }
    if scaling == Scaling::Global {
        scales.fill(1.0 / total_var.sqrt());
    }
    rows.iter_mut().for_each(|r| r.iter_mut().zip(&scales).for_each(|(v, s)| *v *= s));
    Ok(rows)
}

/// `(1/n) Σ x xᵀ` over `rows[indices]`, and its eigenvalues (nonincreasing).
fn covariance(rows: &[Vec<f64>], indices: &[usize]) -> Result<(Mat<f64>, Vec<f64>), BenchError> {
    let d = rows[0].len();
    let x = Mat::from_fn(indices.len(), d, |i, j| rows[indices[i]][j]);
    let c = x.transpose() * &x * (1.0 / indices.len() as f64);
    let (values, _) = sym_eigen_desc(c.as_ref())?;
    Ok((c, values))
}

/// Accumulates the work proxy `Σ_s k_s²` over the samples (`k_s` the iterate's rank before
/// sample `s`), and keeps its value at the iterations whose score was measured.
#[derive(Default)]
struct Work {
    previous_rank: f64,
    sum: f64,
    at_marks: Vec<f64>,
}

impl Observer for Work {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.sum += self.previous_rank * self.previous_rank;
        self.previous_rank = report.rank as f64;
        if report.distance_to_target.is_some() {
            self.at_marks.push(self.sum);
        }
        ControlFlow::Continue(())
    }
}

/// What [`one_pass`] measured.
struct Pass {
    /// The suboptimality on each score at each mark.
    scores: Vec<Vec<f64>>,
    /// `Σ_s k_s²` up to each mark.
    work: Vec<f64>,
    /// Samples per second of the solver's updates.
    rate: f64,
}

/// One pass of `method` (rank `k`, step scale `c`, start from `seed`) over `train`, scored on
/// `(cov, top)` at `marks`: returns the suboptimality at each mark, Σ k_s² up to each mark, and
/// the samples per second.
fn one_pass(
    (method, k, c, seed): (PcaMethod, usize, f64, u64),
    rows: &[Vec<f64>],
    train: &[usize],
    scores: &[(&Mat<f64>, &[f64])],
    marks: &[usize],
) -> Result<Pass, BenchError> {
    let d = rows[0].len();
    let mut s = solver(method, d, k, c, seed)?;
    let mut work = Work { previous_rank: s.iterate_rank() as f64, ..Work::default() };
    let mut extra: Vec<Vec<f64>> = vec![Vec::new(); scores.len() - 1];
    let mut scoring = Duration::ZERO;
    let (test_cov, test_top) = scores[scores.len() - 1];
    // The last score is the distance to the target; the others are recorded on the way.
    let score = |s: &dyn StreamingPca| {
        let started = Instant::now();
        let u = s.subspace();
        for (o, (cov, top)) in extra.iter_mut().zip(scores) {
            o.push(suboptimality(cov, top, &u, k));
        }
        let test = suboptimality(test_cov, test_top, &u, k);
        scoring += started.elapsed();
        test
    };
    let mut seen = Measured::default();
    pass(s.as_mut(), train.iter().map(|&i| rows[i].clone()), marks, score, &mut Both(&mut seen, &mut work))?;
    let busy = seen.0.last().map_or(Duration::ZERO, |r| r.elapsed).saturating_sub(scoring).as_secs_f64();
    let mut out = extra;
    out.push(seen.distances());
    let work = work.at_marks;
    Ok(Pass { scores: out, work, rate: train.len() as f64 / busy })
}

/// Figure 3 under `scaling` with `splits` splits (split `s` shuffles with stream 0 of seed
/// `1000 + s`; every solver of that split starts from seed `s`). The paper's grid is
/// 2⁻¹²…2⁵; plain MSG's rank (and cost, `O(k_t² d)` per sample) grows as `c` shrinks and small
/// `c` never wins for it, so plain MSG gets 2⁻⁶…2⁵ in full runs; the other methods get the whole
/// grid (quick: 2⁻², 1, 4 for all). Records every chosen method in `results`.
///
/// # Errors
/// [`BenchError::Data`] if MNIST cannot be read (the caller may skip the figure); solver errors.
pub(super) fn run(
    data: &DataDir,
    quick: bool,
    splits: usize,
    scaling: Scaling,
    results: &mut ResultsFile,
) -> Result<MnistRun, BenchError> {
    let tag = scaling.name();
    let rows = mnist_rows(data, scaling)?;
    let n = rows.len();
    let grid: Vec<f64> = if quick { vec![2f64.powi(-2), 1.0, 4.0] } else { (-12..=5).map(|e| 2f64.powi(e)).collect() };
    let msg_grid_start = if quick { 0 } else { 6 };
    let ks = [1usize, 4, 8];
    let (n_train, n_val) = (n * 2 / 5, n / 5);
    let marks = log_spaced(n_train, 40);
    // [k][method][c] -> per split: (validation curve, test curve, work curve, rate)
    type Curves = (Vec<f64>, Vec<f64>, Vec<f64>, f64);
    let mut all: Vec<Vec<Vec<Vec<Curves>>>> = vec![vec![vec![Vec::new(); grid.len()]; METHODS.len()]; ks.len()];
    for split in 0..splits {
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut stream(1000 + split as u64, 0));
        let (train, rest) = order.split_at(n_train);
        let (val, test) = rest.split_at(n_val);
        let (c_val, top_val) = covariance(&rows, val)?;
        let (c_test, top_test) = covariance(&rows, test)?;
        let scores: [(&Mat<f64>, &[f64]); 2] = [(&c_val, &top_val), (&c_test, &top_test)];
        for (ki, &k) in ks.iter().enumerate() {
            for (mi, &method) in METHODS.iter().enumerate() {
                let first = if method == PcaMethod::Msg { msg_grid_start } else { 0 };
                let cs: &[f64] = if method == PcaMethod::Incremental { &grid[..1] } else { &grid };
                for (ci, &c) in cs.iter().enumerate().skip(first) {
                    let pass = one_pass((method, k, c, split as u64), &rows, train, &scores, &marks)?;
                    let [val, test] = <[Vec<f64>; 2]>::try_from(pass.scores).expect("two scores");
                    all[ki][mi][ci].push((val, test, pass.work, pass.rate));
                }
            }
            eprintln!("  {tag}: split {split}, k = {k} done");
        }
    }
    let xs: Vec<f64> = marks.iter().map(|&t| t as f64).collect();
    let mut per_k = Vec::new();
    for (ki, &k) in ks.iter().enumerate() {
        let mut methods = Vec::new();
        for (mi, &method) in METHODS.iter().enumerate() {
            let candidates = if method == PcaMethod::Incremental { 1 } else { grid.len() };
            let first = if method == PcaMethod::Msg { msg_grid_start } else { 0 };
            let val = |ci: usize| mean(&all[ki][mi][ci].iter().map(|r| *r.0.last().unwrap()).collect::<Vec<_>>());
            let best = (first..candidates).min_by(|&a, &b| val(a).total_cmp(&val(b))).unwrap_or(0);
            let runs = &all[ki][mi][best];
            let at = |m: usize, f: fn(&Curves) -> &Vec<f64>| mean(&runs.iter().map(|r| f(r)[m]).collect::<Vec<_>>());
            let curves = MethodCurves {
                method,
                c: if method == PcaMethod::Incremental { None } else { Some(grid[best]) },
                test: (0..marks.len()).map(|m| at(m, |r| &r.1)).collect(),
                work: (0..marks.len()).map(|m| at(m, |r| &r.2)).collect(),
                finals: runs.iter().map(|r| *r.1.last().unwrap()).collect(),
                rate: mean(&runs.iter().map(|r| r.3).collect::<Vec<_>>()),
            };
            let mut run =
                RunRecord::new("MNIST 40/20/40", method.name()).with_parameter("k", k).with_parameter("splits", splits);
            if let Some(c) = curves.c {
                run = run.with_parameter("c", c);
            }
            run.series.push(Series::new(
                "test_suboptimality",
                "iteration",
                "test suboptimality",
                xs.clone(),
                curves.test.clone(),
            )?);
            run.series.push(Series::new("work", "iteration", "sum of k_s^2", xs.clone(), curves.work.clone())?);
            run.set_scalar("final_test_suboptimality_mean", mean(&curves.finals));
            run.set_scalar("final_test_suboptimality_std", std(&curves.finals));
            run.set_scalar("samples_per_second", curves.rate);
            results.runs.push(run);
            methods.push(curves);
        }
        per_k.push((k, methods));
    }
    Ok(MnistRun { scaling, n, n_train, n_val, splits, grid, t: xs, per_k })
}
