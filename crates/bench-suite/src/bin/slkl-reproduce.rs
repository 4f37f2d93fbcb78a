//! `slkl-reproduce`: paper 004's experiments (SLKL, stochastic low-rank kernel learning for
//! regression) against KRR on all points (KRR_n), KRR on the landmarks (KRR_M) and uniform
//! weights (Unif).
//!
//! 1. Table 2: test MSE (mean ± std over runs) on sinc, Boston housing and Abalone for four
//!    values of M, rows KRR_n, KRR_M, Unif, SLKL. Each run draws its own data (sinc) or its own
//!    random train/test split (Boston 350/156, Abalone 3000/1177; features standardized with the
//!    training statistics, σ by the 20th-percentile rule on the training features; sinc σ = 1),
//!    and its own landmarks J, shared by KRR_M, Unif and SLKL. λ = 1. ν is chosen once per
//!    (dataset, M), separately for SLKL and Unif, by 5-fold cross-validation on run 0's
//!    training set over the grid 10⁻⁴…10¹, and then kept for every run.
//! 2. Figure 1: the objective F(μ) of (14) against coordinate updates on sinc, several runs.
//! 3. Figures 2–3: ‖μ‖₀ against M and against ν (log grid 10⁻⁴…10¹) on sinc.
//! 4. With `--stolr PATH`: fit time and peak memory of SLKL, KRR_M and KRR_n as separate
//!    `stolr krr` processes on Abalone and on generated sinc data of growing n (`--bench-n`);
//!    with `--sklearn SCRIPT`, scikit-learn's KernelRidge on the same Abalone split.
//!
//! Usage: `slkl-reproduce [--quick] [--runs N] [--data DIR] [--out DIR] [--stolr PATH]
//! [--sklearn SCRIPT] [--bench-n N,N,...]` (normally through `cargo xtask reproduce slkl`).
//! Writes `slkl.json` (the bench-suite result schema), `slkl.md` and the plots
//! `fig1_objective.*`, `fig2_sparsity_vs_m.*`, `fig3_sparsity_vs_nu.*`, `nu_validation_*.*`
//! (SVG and PNG) to the output folder (default `results/slkl`).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::Value;
use stolr_bench_suite::table::{fixed, mean_pm_std, mean_std};
use stolr_bench_suite::{LinePlot, LineStyle, PlotSeries, ResultsFile, RunRecord, Series, Table, render};
use stolr_datasets::{
    Dataset, TrainTest, generate, random_folds, random_split, read_abalone, read_housing, write_npy_indices,
    write_npy_matrix, write_npy_vector,
};
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, bandwidth_rule};
use stolr_solvers::{
    IterationReport, KrrConfig, NuModel, Observer, Slkl, SlklConfig, UnifConfig, UniformWeight, krr, krr_subset,
    log_grid, mean_squared_error, select_landmarks, select_nu, unif,
};

/// λ of every experiment (paper 004, Section 5).
const LAMBDA: f64 = 1.0;

struct Options {
    quick: bool,
    runs: usize,
    data: PathBuf,
    out: PathBuf,
    stolr: Option<PathBuf>,
    sklearn: Option<PathBuf>,
    bench_n: Option<Vec<usize>>,
}

const USAGE: &str = "usage: slkl-reproduce [--quick] [--runs N] [--data DIR] [--out DIR] [--stolr PATH] \
                     [--sklearn SCRIPT] [--bench-n N,N,...]";

fn options() -> Result<Options> {
    let mut o = Options {
        quick: false,
        runs: 0,
        data: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
        out: PathBuf::from("results/slkl"),
        stolr: None,
        sklearn: None,
        bench_n: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value; {USAGE}"));
        match a.as_str() {
            "--quick" => o.quick = true,
            "--runs" | "--seeds" => o.runs = value()?.parse().context("--runs")?,
            "--data" => o.data = PathBuf::from(value()?),
            "--out" => o.out = PathBuf::from(value()?),
            "--stolr" => o.stolr = Some(PathBuf::from(value()?)),
            "--sklearn" => o.sklearn = Some(PathBuf::from(value()?)),
            "--bench-n" => {
                let text = value()?;
                let sizes = text
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.trim().parse::<usize>().with_context(|| format!("--bench-n: bad size '{s}'")))
                    .collect::<Result<Vec<_>>>()?;
                o.bench_n = Some(sizes);
            }
            other => bail!("unknown argument {other}; {USAGE}"),
        }
    }
    if o.runs == 0 {
        o.runs = if o.quick { 3 } else { 20 };
    }
    Ok(o)
}

/// A seeded generator for one purpose, run and variant: every random choice of the
/// reproduction comes from one of these.
fn rng(purpose: u64, run: usize, variant: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(purpose * 1_000_003 + run as u64 * 1009 + variant as u64)
}
const RNG_DATA: u64 = 1;
const RNG_SPLIT: u64 = 2;
const RNG_SIGMA: u64 = 3;
const RNG_LANDMARKS: u64 = 4;
const RNG_COORDINATES: u64 = 5;
const RNG_NU: u64 = 6;

/// One of paper 004's regression sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Data {
    Sinc,
    Boston,
    Abalone,
}

impl Data {
    fn name(self) -> &'static str {
        match self {
            Data::Sinc => "sinc",
            Data::Boston => "boston",
            Data::Abalone => "abalone",
        }
    }

    /// The M of Table 2 (spec §6.14's suggested defaults); quick mode keeps two.
    fn landmarks(self, quick: bool) -> Vec<usize> {
        match (self, quick) {
            (Data::Boston, false) => vec![25, 50, 100, 200],
            (Data::Boston, true) => vec![25, 100],
            (_, false) => vec![50, 100, 200, 500],
            (_, true) => vec![50, 200],
        }
    }

    /// Test-set size of the random split (Table 1).
    fn test_size(self) -> usize {
        match self {
            Data::Sinc => 1000,
            Data::Boston => 156,
            Data::Abalone => 1177,
        }
    }
}

/// A training and a test set ready for the solvers, with the kernel width.
struct Problem {
    x: Mat<f64>,
    y: Vec<f64>,
    xt: Mat<f64>,
    yt: Vec<f64>,
    sigma: f64,
}

impl Problem {
    fn kernel(&self) -> Kernel {
        Kernel::Gaussian { sigma: self.sigma }
    }
}

/// The full file of a UCI set, read once.
fn read_full(data: Data, dir: &Path) -> Result<Option<Dataset>> {
    Ok(match data {
        Data::Sinc => None,
        Data::Boston => Some(read_housing(&dir.join("boston_housing/housing.data"))?),
        Data::Abalone => Some(read_abalone(&dir.join("abalone/abalone.data"))?),
    })
}

/// Run `run`'s problem: new sinc data, or a new standardized split of `full`.
fn problem(data: Data, full: Option<&Dataset>, run: usize) -> Result<Problem> {
    let (tt, sigma): (TrainTest, Option<f64>) = match full {
        None => (generate::sinc(1000, data.test_size(), &mut rng(RNG_DATA, run, 0))?, Some(1.0)),
        Some(full) => {
            let split = random_split(full.n(), data.test_size(), &mut rng(RNG_SPLIT, run, 0))?;
            let mut tt = split.apply(full)?;
            tt.standardize()?;
            (tt, None)
        }
    };
    let sigma = match sigma {
        Some(s) => s,
        None => bandwidth_rule(
            tt.train.x.as_ref(),
            DEFAULT_BANDWIDTH_PERCENTILE,
            DEFAULT_BANDWIDTH_PAIRS,
            &mut rng(RNG_SIGMA, run, 0),
        )?,
    };
    let y = tt.train.targets().context("numeric targets")?.to_vec();
    let yt = tt.test.targets().context("numeric targets")?.to_vec();
    Ok(Problem { x: tt.train.x, y, xt: tt.test.x, yt, sigma })
}

fn slkl_config(nu: f64, m: usize) -> SlklConfig {
    SlklConfig { lambda: LAMBDA, nu, landmarks: m, ..SlklConfig::default() }
}

fn predict_mse(e: &stolr_solvers::KernelExpansion, p: &Problem) -> Result<f64> {
    let pred: Vec<f64> = e.predict(p.xt.as_ref())?.iter().copied().collect();
    Ok(mean_squared_error(&pred, &p.yt))
}

/// The ν grid: 10⁻⁴…10¹, two points per decade (one in quick mode).
fn nu_grid(quick: bool) -> Vec<f64> {
    log_grid(-4, 1, if quick { 1 } else { 2 })
}

/// Folds of every cross-validation (ν of SLKL and Unif, λ of KRR_n).
const FOLDS: usize = 5;

/// The cross-validation folds of `p`'s training set, shared by every validation on it.
fn folds(p: &Problem) -> Result<Vec<usize>> {
    Ok(random_folds(p.x.nrows(), FOLDS, &mut rng(RNG_NU, 0, 0))?)
}

/// ν for SLKL and for Unif at `m` landmarks by cross-validation on `p`'s training set.
/// Returns `(nu_slkl, nu_unif, record of the validation curves, SLKL's curve)`.
fn choose_nu(
    data: Data,
    p: &Problem,
    folds: &[usize],
    m: usize,
    quick: bool,
) -> Result<(f64, f64, RunRecord, PlotSeries)> {
    let grid = nu_grid(quick);
    let config = slkl_config(grid[0], m);
    let fit_rng = rng(RNG_NU, 1, m);
    let started = Instant::now();
    let mut record = RunRecord::new(data.name(), "nu-validation").with_parameter("M", m).with_parameter("folds", FOLDS);
    let mut chosen = [0.0; 2];
    let mut series = None;
    for (k, model) in [NuModel::Slkl, NuModel::Unif].into_iter().enumerate() {
        let sel = select_nu(p.x.as_ref(), &p.y, folds, &p.kernel(), &config, model, &grid, &fit_rng)?;
        chosen[k] = sel.nu;
        let name = if model == NuModel::Slkl { "slkl" } else { "unif" };
        let mse: Vec<f64> = sel.candidates.iter().map(|c| c.validation_mse).collect();
        record.series.push(Series::new(
            format!("{name}_validation_mse"),
            "nu",
            "validation MSE",
            grid.clone(),
            mse.clone(),
        )?);
        record.set_scalar(format!("{name}_nu"), sel.nu);
        if model == NuModel::Slkl {
            let sparsity: Vec<f64> = sel.candidates.iter().map(|c| c.sparsity).collect();
            record.series.push(Series::new("slkl_sparsity", "nu", "‖μ‖₀", grid.clone(), sparsity)?);
            series = Some(PlotSeries::new(format!("SLKL, M = {m}"), grid.clone(), mse));
        }
    }
    record.time_seconds = started.elapsed().as_secs_f64();
    Ok((chosen[0], chosen[1], record, series.expect("SLKL is validated")))
}

/// λ of KRR_n by cross-validation on the same folds and the ν grid (the paper fixes λ = 1 for
/// every method; this is the tuned reference).
fn choose_lambda(data: Data, p: &Problem, folds: &[usize], quick: bool) -> Result<(f64, RunRecord)> {
    let grid = nu_grid(quick);
    let started = Instant::now();
    let n = p.x.nrows();
    let mut squared = vec![0.0; grid.len()];
    for f in 0..FOLDS {
        let fit: Vec<usize> = (0..n).filter(|&i| folds[i] != f).collect();
        let val: Vec<usize> = (0..n).filter(|&i| folds[i] == f).collect();
        let rows = |idx: &[usize]| Mat::from_fn(idx.len(), p.x.ncols(), |i, j| p.x[(idx[i], j)]);
        let (x_fit, x_val) = (rows(&fit), rows(&val));
        let y_fit: Vec<f64> = fit.iter().map(|&i| p.y[i]).collect();
        for (g, &lambda) in grid.iter().enumerate() {
            let e = krr(x_fit.as_ref(), &y_fit, &p.kernel(), &KrrConfig { lambda, ..KrrConfig::default() })?;
            let pred = e.predict(x_val.as_ref())?;
            squared[g] += val.iter().zip(pred.iter()).map(|(&i, f)| (f - p.y[i]).powi(2)).sum::<f64>();
        }
    }
    let mse: Vec<f64> = squared.iter().map(|s| s / n as f64).collect();
    let best = (0..grid.len()).min_by(|&a, &b| mse[a].total_cmp(&mse[b])).unwrap_or(0);
    let mut record = RunRecord::new(data.name(), "krr-n-lambda-validation").with_parameter("folds", FOLDS);
    record.series.push(Series::new("validation_mse", "lambda", "validation MSE", grid.clone(), mse)?);
    record.set_scalar("lambda", grid[best]);
    record.time_seconds = started.elapsed().as_secs_f64();
    Ok((grid[best], record))
}

/// The methods of Table 2, in row order.
const METHODS: [&str; 6] = ["KRR_n", "KRR_n, λ validated", "KRR_M", "Unif, μ_i = 1", "Unif, best common μ", "SLKL"];

/// Per-(dataset, method, M) results over the runs.
#[derive(Default, Clone)]
struct Cell {
    mse: Vec<f64>,
    sparsity: Vec<f64>,
    epochs: Vec<f64>,
    seconds: Vec<f64>,
}

impl Cell {
    fn push(&mut self, mse: f64, seconds: f64) {
        self.mse.push(mse);
        self.seconds.push(seconds);
    }
}

fn main() -> Result<()> {
    let o = options()?;
    std::fs::create_dir_all(&o.out).with_context(|| format!("cannot create {}", o.out.display()))?;
    let mut results = ResultsFile::new("paper 004: SLKL (stochastic low-rank kernel learning) for regression");
    let started = Instant::now();
    let mut md = String::from("# Paper 004: SLKL, reproduced\n\n");
    md += &format!(
        "Generated by `cargo xtask reproduce slkl{}` ({} runs per cell).\n\n",
        if o.quick { " --quick" } else { "" },
        o.runs
    );
    let mut nus = Vec::new();
    md += &table2(&o, &mut results, &mut nus)?;
    eprintln!("Table 2 done ({:.1} s)", started.elapsed().as_secs_f64());
    let nu_at = |data: Data| nus.iter().find(|(d, m, _)| *d == data && *m == 200).map(|t| t.2);
    md += &figures(&o, &mut results, nu_at(Data::Sinc).unwrap_or(1e-2))?;
    eprintln!("figures done ({:.1} s)", started.elapsed().as_secs_f64());
    if let Some(stolr) = &o.stolr {
        md += &benchmark(&o, stolr, nu_at(Data::Abalone), nu_at(Data::Sinc).unwrap_or(1e-2), &mut results)?;
        eprintln!("benchmark done ({:.1} s)", started.elapsed().as_secs_f64());
    } else {
        md += "## Benchmark\n\nSkipped: no `--stolr PATH` given.\n";
    }
    results.write(&o.out.join("slkl.json"))?;
    std::fs::write(o.out.join("slkl.md"), &md)?;
    eprintln!("wrote {}/slkl.{{json,md}} and plots in {:.1} s", o.out.display(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Table 2 (one table per dataset: rows the methods, columns M), plus the validation curves.
/// Pushes `(dataset, M, ν_slkl)` to `nus`.
fn table2(o: &Options, results: &mut ResultsFile, nus: &mut Vec<(Data, usize, f64)>) -> Result<String> {
    let datasets = [Data::Sinc, Data::Boston, Data::Abalone];
    let mut md = format!(
        "## Table 2: test MSE (mean ± std over {runs} runs)\n\n\
         Protocol. λ = 1 (paper 004, Section 5). sinc: 1000 noisy training points (10 dB SNR), 1000 clean test \
         points, new data every run, σ = 1. Boston (350 train / 156 test) and Abalone (3000 / 1177, sex one-hot, \
         d = 10): a new random split every run, features standardized with the training statistics, targets as \
         they are, σ = 20th percentile of the training distances (the paper used Smola & Schölkopf's partition \
         and widths, which we do not have). Every run draws its own landmarks J, shared by KRR_M, both Unif rows \
         and SLKL. ν is chosen per dataset and M, separately for SLKL and Unif, by 5-fold cross-validation on run \
         0's training set (grid 10⁻⁴…10¹, {per} per decade) and kept for all runs. SLKL: exact coordinate \
         rule, ε = 10⁻³, at most 1000 epochs.\n\n\
         Rows. KRR_n: all n training points, λ = 1, as in the paper. KRR_n, λ validated: the same with λ chosen by \
         the same cross-validation (a tuned reference the paper does not have). KRR_M: KRR on the M landmarks \
         only. Unif, μ_i = 1: KRR with K_μ = Σ_J k_i k_iᵀ/K_ii (our reading of the paper's Unif, whose value is \
         not given). Unif, best common μ: the common weight c minimising (14) at its validated ν. SLKL / KRR_n: mean \
         ± std of the per-run ratio of test MSEs (same data, split and σ). **Bold**: the best low-rank method \
         (KRR_M, Unif, SLKL) in a column, as in the paper.\n\n",
        runs = o.runs,
        per = if o.quick { "one point" } else { "two points" },
    );
    for data in datasets {
        let full = match read_full(data, &o.data) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{}: skipped ({e})", data.name());
                md += &format!("### {}\n\nSkipped: {e}.\n\n", data.name());
                continue;
            }
        };
        let ms = data.landmarks(o.quick);
        let p0 = problem(data, full.as_ref(), 0)?;
        let folds = folds(&p0)?;
        let mut chosen = Vec::new();
        let mut validation_plot = LinePlot::new(
            format!("{}: 5-fold cross-validation MSE of SLKL against ν (run 0)", data.name()),
            "ν",
            "validation MSE",
        );
        validation_plot.x_log = true;
        for &m in &ms {
            let (nu_s, nu_u, record, series) = choose_nu(data, &p0, &folds, m, o.quick)?;
            eprintln!("  {} M = {m}: nu SLKL {nu_s:.1e}, Unif {nu_u:.1e} ({:.1} s)", data.name(), record.time_seconds);
            results.runs.push(record);
            validation_plot.series.push(series);
            chosen.push((nu_s, nu_u));
            nus.push((data, m, nu_s));
        }
        render(&validation_plot, &o.out.join(format!("nu_validation_{}", data.name())))?;
        let (lambda_val, record) = choose_lambda(data, &p0, &folds, o.quick)?;
        results.runs.push(record);
        // cells[k][method]; the KRR_n cells do not depend on M and are repeated.
        let mut cells = vec![vec![Cell::default(); METHODS.len()]; ms.len()];
        let mut ratio = vec![Vec::new(); ms.len()];
        for run in 0..o.runs {
            let p = if run == 0 { None } else { Some(problem(data, full.as_ref(), run)?) };
            let p = p.as_ref().unwrap_or(&p0);
            let kernel = p.kernel();
            let mut full_cells = Vec::new();
            for lambda in [LAMBDA, lambda_val] {
                let t = Instant::now();
                let e = krr(p.x.as_ref(), &p.y, &kernel, &KrrConfig { lambda, ..KrrConfig::default() })?;
                full_cells.push((predict_mse(&e, p)?, t.elapsed().as_secs_f64()));
            }
            for (k, &m) in ms.iter().enumerate() {
                let (nu_s, nu_u) = chosen[k];
                let c = &mut cells[k];
                c[0].push(full_cells[0].0, full_cells[0].1);
                c[1].push(full_cells[1].0, full_cells[1].1);
                let j = select_landmarks(p.x.nrows(), m, &mut rng(RNG_LANDMARKS, run, m))?;
                let t = Instant::now();
                let sub =
                    krr_subset(p.x.as_ref(), &p.y, &kernel, &KrrConfig { lambda: LAMBDA, ..KrrConfig::default() }, &j)?;
                c[2].push(predict_mse(&sub, p)?, t.elapsed().as_secs_f64());
                for (slot, weight, nu) in [(3, UniformWeight::Fixed(1.0), 1.0), (4, UniformWeight::Optimal, nu_u)] {
                    let t = Instant::now();
                    let u = unif(p.x.as_ref(), &p.y, &kernel, &UnifConfig { lambda: LAMBDA, nu, weight }, &j)?;
                    c[slot].push(predict_mse(&u.expansion, p)?, t.elapsed().as_secs_f64());
                    c[slot].sparsity.push(u.expansion.len() as f64);
                }
                let t = Instant::now();
                let mut solver =
                    Slkl::new(p.x.as_ref(), &p.y, &kernel, slkl_config(nu_s, m), &mut rng(RNG_LANDMARKS, run, m))?;
                if solver.selected() != &j[..] {
                    bail!("SLKL drew other landmarks than KRR_M and Unif");
                }
                let model = {
                    let stop = stolr_solvers::run(&mut solver, &mut rng(RNG_COORDINATES, run, m), &mut ())?;
                    solver.model(stop)?
                };
                let mse = predict_mse(&model.expansion, p)?;
                c[5].push(mse, t.elapsed().as_secs_f64());
                c[5].sparsity.push(model.sparsity() as f64);
                c[5].epochs.push(model.epochs as f64);
                ratio[k].push(mse / full_cells[0].0);
            }
        }
        eprintln!("  {}: {} runs done", data.name(), o.runs);
        let digits = if data == Data::Sinc { 5 } else { 3 };
        let mut table = Table::new(std::iter::once("method".to_owned()).chain(ms.iter().map(|m| format!("M = {m}"))))
            .numeric_after(1);
        for (row, method) in METHODS.iter().enumerate() {
            let cells_row: Vec<String> = (0..ms.len())
                .map(|k| {
                    let text = mean_pm_std(&cells[k][row].mse, digits);
                    let best = (2..METHODS.len())
                        .min_by(|&a, &b| mean(&cells[k][a].mse).total_cmp(&mean(&cells[k][b].mse)))
                        .unwrap_or(5);
                    if row == best { format!("**{text}**") } else { text }
                })
                .collect();
            table.push_row(std::iter::once((*method).to_owned()).chain(cells_row))?;
        }
        table.push_row(std::iter::once("SLKL / KRR_n".to_owned()).chain(ratio.iter().map(|r| mean_pm_std(r, 3))))?;
        table.push_row(
            std::iter::once("SLKL ‖μ‖₀".to_owned()).chain((0..ms.len()).map(|k| mean_pm_std(&cells[k][5].sparsity, 1))),
        )?;
        table.push_row(
            std::iter::once("SLKL epochs".to_owned()).chain((0..ms.len()).map(|k| mean_pm_std(&cells[k][5].epochs, 0))),
        )?;
        table.push_row(std::iter::once("ν (SLKL)".to_owned()).chain(chosen.iter().map(|c| format!("{:.1e}", c.0))))?;
        table.push_row(
            std::iter::once("ν (Unif, best μ)".to_owned()).chain(chosen.iter().map(|c| format!("{:.1e}", c.1))),
        )?;
        md += &format!(
            "### {} (n = {}, test {}, σ = {})\n\n{table}\nKRR_n, λ validated: λ = {lambda_val:.1e}.\n\n",
            data.name(),
            p0.x.nrows(),
            p0.xt.nrows(),
            if data == Data::Sinc { "1".to_owned() } else { format!("{:.3} in run 0", p0.sigma) },
        );
        for (k, &m) in ms.iter().enumerate() {
            for (row, method) in METHODS.iter().enumerate().skip(2) {
                let nu = match row {
                    4 => Some(chosen[k].1),
                    5 => Some(chosen[k].0),
                    _ => None,
                };
                results.runs.push(cell_record(data, method, Some(m), &cells[k][row], nu)?);
            }
        }
        results.runs.push(cell_record(data, METHODS[0], None, &cells[0][0], None)?);
        results
            .runs
            .push(cell_record(data, METHODS[1], None, &cells[0][1], None)?.with_parameter("lambda", lambda_val));
    }
    md += "The paper's cell values are lost; its claims: SLKL ≫ Unif, SLKL beats KRR_M for M large enough, SLKL is \
           comparable to KRR_n (better on Abalone).\n\n\
           Cross-validation curves of SLKL: ![sinc](nu_validation_sinc.png) ![boston](nu_validation_boston.png) \
           ![abalone](nu_validation_abalone.png)\n\n";
    Ok(md)
}

fn mean(v: &[f64]) -> f64 {
    mean_std(v).map_or(f64::NAN, |m| m.0)
}

fn cell_record(data: Data, method: &str, m: Option<usize>, cell: &Cell, nu: Option<f64>) -> Result<RunRecord> {
    let mut r =
        RunRecord::new(data.name(), method).with_parameter("lambda", LAMBDA).with_parameter("runs", cell.mse.len());
    if let Some(m) = m {
        r = r.with_parameter("M", m);
    }
    if let Some(nu) = nu {
        r = r.with_parameter("nu", nu);
    }
    let runs: Vec<f64> = (0..cell.mse.len()).map(|i| i as f64).collect();
    r.series.push(Series::new("test_mse", "run", "test MSE", runs.clone(), cell.mse.clone())?);
    if let Some((mean, std)) = mean_std(&cell.mse) {
        r.set_scalar("test_mse_mean", mean);
        r.set_scalar("test_mse_std", std);
    }
    if !cell.sparsity.is_empty() {
        r.series.push(Series::new("sparsity", "run", "‖μ‖₀", runs.clone(), cell.sparsity.clone())?);
        r.set_scalar("sparsity_mean", mean_std(&cell.sparsity).map_or(f64::NAN, |s| s.0));
    }
    if !cell.epochs.is_empty() {
        r.set_scalar("epochs_mean", mean_std(&cell.epochs).map_or(f64::NAN, |s| s.0));
    }
    r.set_scalar("fit_seconds_mean", mean_std(&cell.seconds).map_or(f64::NAN, |s| s.0));
    r.time_seconds = cell.seconds.iter().sum();
    Ok(r)
}

/// Records `F(μ)` after every coordinate update.
struct Objective(Vec<f64>);

impl Observer for Objective {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.0.push(report.objective.unwrap_or(f64::NAN));
        ControlFlow::Continue(())
    }
}

/// Figures 1–3 on sinc.
fn figures(o: &Options, results: &mut ResultsFile, nu: f64) -> Result<String> {
    let p = problem(Data::Sinc, None, 0)?;
    let kernel = p.kernel();
    let m_fig1 = 200;
    let fig_runs = if o.quick { 3 } else { 10 };
    let mut md = format!(
        "## Figure 1: objective against iterations (sinc)\n\nn = 1000, M = {m_fig1}, ν = {nu:.1e} (the validated \
         value), λ = 1, {fig_runs} runs with different landmarks and coordinate orders, exact rule. F(μ) of (14) \
         after every coordinate update.\n\n"
    );
    let mut plot = LinePlot::new(
        format!("sinc: objective F(μ) of (14) against iterations, M = {m_fig1}, ν = {nu:.1e} (paper 004, Fig. 1)"),
        "iteration (coordinate updates)",
        "F(μ)",
    );
    plot.x_log = true;
    plot.y_log = true;
    let mut finals = Vec::new();
    for run in 0..fig_runs {
        let started = Instant::now();
        let mut solver =
            Slkl::new(p.x.as_ref(), &p.y, &kernel, slkl_config(nu, m_fig1), &mut rng(RNG_LANDMARKS, 100 + run, 0))?;
        let mut obs = Objective(Vec::new());
        let model = {
            let stop = stolr_solvers::run(&mut solver, &mut rng(RNG_COORDINATES, 100 + run, 0), &mut obs)?;
            solver.model(stop)?
        };
        let (xs, ys) = thin(&obs.0, 400);
        finals.push(model.objective);
        plot.series.push(PlotSeries::new(format!("run {run}"), xs.clone(), ys.clone()));
        let mut r =
            RunRecord::new("sinc", "slkl").with_parameter("M", m_fig1).with_parameter("nu", nu).with_seed(run as u64);
        r.series.push(Series::new("objective", "iteration", "F(mu)", xs, ys)?);
        r.set_scalar("final_objective", model.objective);
        r.set_scalar("iterations", model.iterations as f64);
        r.set_scalar("sparsity", model.sparsity() as f64);
        r.time_seconds = started.elapsed().as_secs_f64();
        results.runs.push(r);
    }
    render(&plot, &o.out.join("fig1_objective"))?;
    // The same runs as F(μ_t) − F(μ_final) of each run (its own minimum up to the stopping
    // tolerance): the convergence rate the paper leaves open. The final point (0) is not drawn.
    let mut gap_plot = LinePlot::new(
        format!("sinc: F(μ_t) − F(μ_final) of each run, M = {m_fig1}, ν = {nu:.1e}"),
        "iteration (coordinate updates)",
        "F(μ_t) − F(μ_final)",
    );
    gap_plot.x_log = true;
    gap_plot.y_log = true;
    for (s, f_end) in plot.series.iter().zip(&finals) {
        gap_plot.series.push(PlotSeries::new(s.label.clone(), s.x.clone(), s.y.iter().map(|f| f - f_end).collect()));
    }
    render(&gap_plot, &o.out.join("fig1_suboptimality"))?;
    let (fmean, fstd) = mean_std(&finals).unwrap_or((f64::NAN, f64::NAN));
    md += &format!(
        "![fig1](fig1_objective.png)\n![fig1 suboptimality](fig1_suboptimality.png)\n\nFinal F over the runs: {} ± {:.2e} \
         (relative spread {:.1e}); the runs differ in their landmarks, so their minima differ too.\n\n",
        fixed(fmean, 4),
        fstd,
        fstd / fmean
    );

    // Figure 2: ‖μ‖₀ against M for a few ν.
    let ms: Vec<usize> = if o.quick { vec![25, 100, 200] } else { vec![25, 50, 100, 200, 400, 700, 1000] };
    let nus_fig2: Vec<f64> = vec![1e-3, 1e-2, 1e-1, 1.0];
    let reps = if o.quick { 2 } else { 3 };
    let mut plot2 =
        LinePlot::new("sinc: ‖μ‖₀ against M (paper 004, Fig. 2)", "M (landmarks)", "‖μ‖₀ (active landmarks)");
    plot2.series.push(
        PlotSeries::new("‖μ‖₀ = M", ms.iter().map(|&m| m as f64).collect(), ms.iter().map(|&m| m as f64).collect())
            .style(LineStyle::Dashed)
            .color([150, 150, 150]),
    );
    let mut t2 =
        Table::new(std::iter::once("ν".to_owned()).chain(ms.iter().map(|m| format!("M = {m}")))).numeric_after(1);
    for &v in &nus_fig2 {
        let mut ys = Vec::new();
        for &m in &ms {
            let mut s = Vec::new();
            for rep in 0..reps {
                let mut solver =
                    Slkl::new(p.x.as_ref(), &p.y, &kernel, slkl_config(v, m), &mut rng(RNG_LANDMARKS, 200 + rep, m))?;
                s.push(
                    {
                        let stop = stolr_solvers::run(&mut solver, &mut rng(RNG_COORDINATES, 200 + rep, m), &mut ())?;
                        solver.model(stop)?
                    }
                    .sparsity() as f64,
                );
            }
            ys.push(mean_std(&s).map_or(f64::NAN, |x| x.0));
        }
        t2.push_row(std::iter::once(format!("{v:.0e}")).chain(ys.iter().map(|y| format!("{y:.1}"))))?;
        let xs: Vec<f64> = ms.iter().map(|&m| m as f64).collect();
        plot2.series.push(PlotSeries::new(format!("ν = {v:.0e}"), xs.clone(), ys.clone()));
        let mut r =
            RunRecord::new("sinc", "slkl-sparsity-vs-M").with_parameter("nu", v).with_parameter("repeats", reps);
        r.series.push(Series::new("sparsity", "M", "mean ‖μ‖₀", xs, ys)?);
        results.runs.push(r);
    }
    render(&plot2, &o.out.join("fig2_sparsity_vs_m"))?;

    // Figure 3: ‖μ‖₀ against ν for a few M.
    let grid = nu_grid(o.quick);
    let ms3: Vec<usize> = if o.quick { vec![100, 200] } else { vec![100, 200, 500, 1000] };
    let mut plot3 = LinePlot::new("sinc: ‖μ‖₀ against ν (paper 004, Fig. 3)", "ν", "‖μ‖₀ (active landmarks)");
    plot3.x_log = true;
    let mut t3 =
        Table::new(std::iter::once("M".to_owned()).chain(grid.iter().map(|v| format!("{v:.0e}")))).numeric_after(1);
    for &m in &ms3 {
        let mut ys = Vec::new();
        for &v in &grid {
            let mut s = Vec::new();
            for rep in 0..reps {
                let mut solver =
                    Slkl::new(p.x.as_ref(), &p.y, &kernel, slkl_config(v, m), &mut rng(RNG_LANDMARKS, 300 + rep, m))?;
                s.push(
                    {
                        let stop = stolr_solvers::run(&mut solver, &mut rng(RNG_COORDINATES, 300 + rep, m), &mut ())?;
                        solver.model(stop)?
                    }
                    .sparsity() as f64,
                );
            }
            ys.push(mean_std(&s).map_or(f64::NAN, |x| x.0));
        }
        t3.push_row(std::iter::once(m.to_string()).chain(ys.iter().map(|y| format!("{y:.1}"))))?;
        plot3.series.push(PlotSeries::new(format!("M = {m}"), grid.clone(), ys.clone()));
        let mut r =
            RunRecord::new("sinc", "slkl-sparsity-vs-nu").with_parameter("M", m).with_parameter("repeats", reps);
        r.series.push(Series::new("sparsity", "nu", "mean ‖μ‖₀", grid.clone(), ys)?);
        results.runs.push(r);
    }
    render(&plot3, &o.out.join("fig3_sparsity_vs_nu"))?;
    md += &format!(
        "## Figures 2–3: sparsity ‖μ‖₀ (sinc, n = 1000, mean over {reps} landmark draws)\n\n\
         ![fig2](fig2_sparsity_vs_m.png)\n\n{t2}\n![fig3](fig3_sparsity_vs_nu.png)\n\n{t3}\n\
         Paper: ‖μ‖₀ stays well below M, grows with M and shrinks as ν grows.\n\n"
    );
    Ok(md)
}

/// At most about `points` points of `values` (1-based iteration on x), log-spaced so that a
/// log-x plot keeps its shape; always keeps the last point.
fn thin(values: &[f64], points: usize) -> (Vec<f64>, Vec<f64>) {
    let n = values.len();
    let mut idx: Vec<usize> = (0..points)
        .map(|k| ((n as f64).powf(k as f64 / (points - 1) as f64).round() as usize).clamp(1, n.max(1)))
        .collect();
    idx.dedup();
    let idx: Vec<usize> = idx.into_iter().filter(|&t| t >= 1 && t <= n).collect();
    (idx.iter().map(|&t| t as f64).collect(), idx.iter().map(|&t| values[t - 1]).collect())
}

/// One `stolr krr` process: its report.json.
fn stolr_run(stolr: &Path, args: &[String], dir: &Path) -> Result<Value> {
    let out = Command::new(stolr)
        .arg("krr")
        .args(args)
        .arg("--out")
        .arg(dir)
        .output()
        .with_context(|| format!("cannot run {}", stolr.display()))?;
    if !out.status.success() {
        bail!("stolr krr {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = std::fs::read_to_string(dir.join("report.json")).context("report.json")?;
    Ok(serde_json::from_str(&text)?)
}

/// One row of the benchmark table.
struct BenchRow {
    data: String,
    method: String,
    n: usize,
    mse: f64,
    fit: f64,
    predict: f64,
    peak_mb: f64,
    note: String,
}

/// Adds the row of a `stolr krr` report to `rows` and its record to `results`.
fn push_row(
    rows: &mut Vec<BenchRow>,
    results: &mut ResultsFile,
    data: &str,
    method: &str,
    report: &Value,
    note: String,
) {
    let r = BenchRow {
        data: data.to_owned(),
        method: method.to_owned(),
        n: report["dataset"]["n_train"].as_u64().unwrap_or(0) as usize,
        mse: report["result"]["test_mse"].as_f64().unwrap_or(f64::NAN),
        fit: report["timings_s"]["fit"].as_f64().unwrap_or(f64::NAN),
        predict: report["timings_s"]["predict"].as_f64().unwrap_or(f64::NAN),
        peak_mb: report["peak_memory_bytes"].as_f64().map_or(f64::NAN, |b| b / 1e6),
        note,
    };
    let mut rec = RunRecord::new(data, format!("{method} (process)")).with_parameter("n_train", r.n);
    rec.set_scalar("test_mse", r.mse);
    rec.set_scalar("predict_seconds", r.predict);
    rec.time_seconds = r.fit;
    rec.peak_memory_bytes = report["peak_memory_bytes"].as_u64();
    results.runs.push(rec);
    rows.push(r);
}

/// Time and memory of SLKL against KRR_n (and KRR_M), each a separate process.
fn benchmark(
    o: &Options,
    stolr: &Path,
    abalone_nu: Option<f64>,
    sinc_nu: f64,
    results: &mut ResultsFile,
) -> Result<String> {
    let dir = o.out.join("bench");
    let mut rows: Vec<BenchRow> = Vec::new();
    let m = "200".to_string();
    // Abalone, split and σ of `stolr krr --seed 0`.
    let abalone = o.data.join("abalone/abalone.data");
    let mut sigma_abalone = None;
    if abalone.exists() {
        let base: Vec<String> =
            ["--input", &abalone.display().to_string(), "--format", "abalone", "--test-size", "1177", "--seed", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let nu = abalone_nu.map_or("auto".to_owned(), |v| format!("{v}"));
        for (method, extra) in [
            (
                "slkl",
                vec!["--solver".into(), "slkl".into(), "--landmarks".into(), m.clone(), "--nu".into(), nu.clone()],
            ),
            ("krr-subset (KRR_M)", vec!["--solver".into(), "krr-subset".into(), "--landmarks".into(), m.clone()]),
            ("krr (KRR_n)", vec!["--solver".into(), "krr".into()]),
        ] {
            eprintln!("  bench abalone {method}");
            let report = stolr_run(
                stolr,
                &[base.clone(), extra].concat(),
                &dir.join(format!("abalone-{}", method.split(' ').next().unwrap_or(method))),
            )?;
            sigma_abalone = report["kernel"]["sigma"].as_f64();
            let note = match method {
                "slkl" => format!(
                    "M = 200, ν = {} (validated), {} epochs, ‖μ‖₀ = {}",
                    abalone_nu.map_or("auto".to_owned(), |v| format!("{v:.1e}")),
                    report["result"]["epochs"],
                    report["result"]["sparsity"]
                ),
                "krr-subset (KRR_M)" => "M = 200, the same J as SLKL".to_owned(),
                _ => String::new(),
            };
            push_row(&mut rows, results, "abalone", &format!("stolr {method}"), &report, note);
        }
        if let (Some(script), Some(sigma)) = (&o.sklearn, sigma_abalone) {
            sklearn_runs(script, &abalone, &dir.join("abalone-split"), sigma, &mut rows, results)?;
        }
    }
    // Generated sinc of growing n: SLKL against KRR_n.
    let sizes = o.bench_n.clone().unwrap_or_else(|| if o.quick { vec![4000] } else { vec![5000, 10000, 20000] });
    for &n in &sizes {
        let base: Vec<String> = ["--generate", "sinc", "--n-train", &n.to_string(), "--n-test", "1000", "--seed", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for (method, extra) in [
            (
                "slkl",
                vec![
                    "--solver".into(),
                    "slkl".into(),
                    "--landmarks".into(),
                    m.clone(),
                    "--nu".into(),
                    format!("{sinc_nu}"),
                ],
            ),
            ("krr (KRR_n)", vec!["--solver".into(), "krr".into()]),
        ] {
            eprintln!("  bench sinc n = {n} {method}");
            let report = match stolr_run(
                stolr,
                &[base.clone(), extra].concat(),
                &dir.join(format!("sinc{n}-{}", method.split(' ').next().unwrap_or(method))),
            ) {
                Ok(report) => report,
                Err(e) => {
                    // Large n can exceed the memory of the machine: record it and go on.
                    let reason = e.to_string().lines().next().unwrap_or("").to_owned();
                    let reason = reason.split_once(" failed ").map_or(reason.clone(), |(_, r)| r.to_owned());
                    eprintln!("  failed: {e}");
                    rows.push(BenchRow {
                        data: "sinc".into(),
                        method: format!("stolr {method}"),
                        n,
                        mse: f64::NAN,
                        fit: f64::NAN,
                        predict: f64::NAN,
                        peak_mb: f64::NAN,
                        note: format!("failed: {reason}"),
                    });
                    continue;
                }
            };
            let note = if method == "slkl" {
                format!(
                    "M = 200, ν = {sinc_nu:.1e} (validated at n = 1000), {} epochs, ‖μ‖₀ = {}",
                    report["result"]["epochs"], report["result"]["sparsity"]
                )
            } else {
                String::new()
            };
            push_row(&mut rows, results, "sinc", &format!("stolr {method}"), &report, note);
        }
    }
    let mut table = Table::new([
        "data",
        "method",
        "n train",
        "test MSE",
        "fit (s)",
        "predict (s)",
        "peak memory (MB)",
        "fit time / KRR_n",
        "memory / KRR_n",
        "notes",
    ])
    .numeric_after(2);
    for r in &rows {
        let reference = rows.iter().find(|q| q.data == r.data && q.n == r.n && q.method == "stolr krr (KRR_n)");
        let ratio = |a: f64, b: Option<f64>| b.map_or("–".to_owned(), |b| format!("{:.3}", a / b));
        table.push_row([
            r.data.clone(),
            r.method.clone(),
            r.n.to_string(),
            if r.mse.abs() < 0.01 { format!("{:.3e}", r.mse) } else { fixed(r.mse, 4) },
            fixed(r.fit, 3),
            fixed(r.predict, 3),
            fixed(r.peak_mb, 0),
            ratio(r.fit, reference.map(|q| q.fit)),
            ratio(r.peak_mb, reference.map(|q| q.peak_mb)),
            r.note.clone(),
        ])?;
    }
    Ok(format!(
        "## Benchmark: fit time and peak memory\n\nEach row is a separate process (`stolr krr`, or Python for \
         scikit-learn), so peak memory (VmHWM / ru_maxrss) is that run's own, including reading the data. Fit time \
         excludes reading, the width rule and the selection of ν. KRR_n holds the n × n kernel matrix and its \
         Cholesky factor (about 16·n² bytes); SLKL holds the M landmark columns (8·n·M bytes) and its p × p \
         Woodbury state. Machine: {cores} cores shared with other jobs, so times are indicative.\n\n{table}\n",
        cores = results.machine.cores
    ))
}

/// scikit-learn's KernelRidge on the Abalone split of `stolr krr --seed 0` (the split and
/// standardization are recomputed here exactly as the CLI does them).
fn sklearn_runs(
    script: &Path,
    abalone: &Path,
    dir: &Path,
    sigma: f64,
    rows: &mut Vec<BenchRow>,
    results: &mut ResultsFile,
) -> Result<()> {
    let full = read_abalone(abalone)?;
    // The CLI's split stream: seed 0, one jump (crate `stolr-cli`, `rng::stream(seed, 1)`).
    let mut split_rng = Xoshiro256PlusPlus::seed_from_u64(0);
    split_rng.jump();
    let split = random_split(full.n(), 1177, &mut split_rng)?;
    let mut tt = split.apply(&full)?;
    tt.standardize()?;
    std::fs::create_dir_all(dir)?;
    write_npy_matrix(&dir.join("train_x.npy"), tt.train.x.as_ref())?;
    write_npy_vector(&dir.join("train_y.npy"), tt.train.targets().context("targets")?)?;
    write_npy_matrix(&dir.join("test_x.npy"), tt.test.x.as_ref())?;
    write_npy_vector(&dir.join("test_y.npy"), tt.test.targets().context("targets")?)?;
    // The CLI's landmark stream: seed 0, three jumps.
    let mut lm_rng = Xoshiro256PlusPlus::seed_from_u64(0);
    for _ in 0..3 {
        lm_rng.jump();
    }
    write_npy_indices(&dir.join("landmarks.npy"), &select_landmarks(tt.train.n(), 200, &mut lm_rng)?)?;
    for (subset, method) in [(false, "sklearn KernelRidge (KRR_n)"), (true, "sklearn KernelRidge (KRR_M)")] {
        eprintln!("  bench abalone {method}");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg("--dir").arg(dir).args(["--sigma", &sigma.to_string(), "--lambda", "1"]);
        if subset {
            cmd.arg("--subset");
        }
        let out = match cmd.output() {
            Ok(out) if out.status.success() => out,
            Ok(out) => {
                eprintln!("  scikit-learn run failed: {}", String::from_utf8_lossy(&out.stderr));
                return Ok(());
            }
            Err(e) => {
                eprintln!("  cannot run python3: {e}");
                return Ok(());
            }
        };
        let v: Value = serde_json::from_slice(&out.stdout).context("scikit-learn output")?;
        let row = BenchRow {
            data: "abalone".into(),
            method: method.into(),
            n: tt.train.n(),
            mse: v["test_mse"].as_f64().unwrap_or(f64::NAN),
            fit: v["fit_s"].as_f64().unwrap_or(f64::NAN),
            predict: v["predict_s"].as_f64().unwrap_or(f64::NAN),
            peak_mb: v["peak_memory_bytes"].as_f64().map_or(f64::NAN, |b| b / 1e6),
            note: if subset {
                "the 200 landmark rows of stolr's J; peak includes the Python interpreter".into()
            } else {
                "same split, σ and λ; peak includes the Python interpreter".into()
            },
        };
        let mut rec = RunRecord::new("abalone", method).with_parameter("n_train", row.n);
        rec.set_scalar("test_mse", row.mse);
        rec.time_seconds = row.fit;
        rec.peak_memory_bytes = v["peak_memory_bytes"].as_u64();
        results.runs.push(rec);
        rows.push(row);
    }
    Ok(())
}
