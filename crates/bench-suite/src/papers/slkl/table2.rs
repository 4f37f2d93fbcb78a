//! Table 2: test MSE of KRR_n, KRR_M, Unif and SLKL over runs, for four values of M, with ν
//! chosen by cross-validation.

use std::time::Instant;

use faer::Mat;
use stolr_solvers::{
    KrrConfig, NuModel, Slkl, UnifConfig, UniformWeight, krr, krr_subset, select_landmarks, select_nu, unif,
};

use super::problem::{
    Data, FOLDS, LAMBDA, Problem, RNG_COORDINATES, RNG_LANDMARKS, RNG_NU, fit_slkl, folds, nu_grid, predict_mse,
    problem, read_full, rng, slkl_config,
};
use crate::runner::DataDir;
use crate::stats::{finite_mean, mean_std};
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// The methods of Table 2, in row order.
pub(super) const METHODS: [&str; 6] =
    ["KRR_n", "KRR_n, λ validated", "KRR_M", "Unif, μ_i = 1", "Unif, best common μ", "SLKL"];

/// Per-(dataset, method, M) results over the runs.
#[derive(Default, Clone)]
pub(super) struct Cell {
    pub(super) mse: Vec<f64>,
    pub(super) sparsity: Vec<f64>,
    pub(super) epochs: Vec<f64>,
    pub(super) seconds: Vec<f64>,
}

impl Cell {
    fn push(&mut self, mse: f64, seconds: f64) {
        self.mse.push(mse);
        self.seconds.push(seconds);
    }
}

/// ν of SLKL and Unif at one M, and SLKL's validation curve.
pub(super) struct NuChoice {
    pub(super) m: usize,
    pub(super) slkl: f64,
    pub(super) unif: f64,
    /// The ν grid and SLKL's mean validation MSE on it.
    pub(super) grid: Vec<f64>,
    pub(super) slkl_mse: Vec<f64>,
}

/// Table 2 on one dataset.
pub(super) struct DatasetTable {
    pub(super) data: Data,
    /// Training and test rows, and σ, of run 0.
    pub(super) n: usize,
    pub(super) n_test: usize,
    pub(super) sigma: f64,
    /// The M of the columns, and ν chosen for each.
    pub(super) ms: Vec<usize>,
    pub(super) nus: Vec<NuChoice>,
    /// λ of KRR_n chosen by cross-validation.
    pub(super) lambda_validated: f64,
    /// `cells[k][method]` for `ms[k]` and `METHODS[method]` (the KRR_n cells repeat over M).
    pub(super) cells: Vec<Vec<Cell>>,
    /// SLKL's test MSE over KRR_n's, per run, for each M.
    pub(super) ratio: Vec<Vec<f64>>,
}

/// Table 2 on one dataset, or why it was skipped.
pub(super) enum Table2Entry {
    Done(Box<DatasetTable>),
    Skipped(Data, String),
}

/// ν for SLKL and for Unif at `m` landmarks by cross-validation on `p`'s training set; records
/// the validation curves.
fn choose_nu(
    data: Data,
    p: &Problem,
    folds: &[usize],
    m: usize,
    quick: bool,
    results: &mut ResultsFile,
) -> Result<NuChoice, BenchError> {
    let grid = nu_grid(quick);
    let config = slkl_config(grid[0], m);
    let fit_rng = rng(RNG_NU, 1, m);
    let started = Instant::now();
    let mut record = RunRecord::new(data.name(), "nu-validation").with_parameter("M", m).with_parameter("folds", FOLDS);
    let mut chosen = [0.0; 2];
    let mut slkl_mse = Vec::new();
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
            slkl_mse = mse;
        }
    }
    record.time_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "  {} M = {m}: nu SLKL {:.1e}, Unif {:.1e} ({:.1} s)",
        data.name(),
        chosen[0],
        chosen[1],
        record.time_seconds
    );
    results.runs.push(record);
    Ok(NuChoice { m, slkl: chosen[0], unif: chosen[1], grid, slkl_mse })
}

/// λ of KRR_n by cross-validation on the same folds and the ν grid (the paper fixes λ = 1 for
/// every method; this is the tuned reference); records the validation curve.
fn choose_lambda(
    data: Data,
    p: &Problem,
    folds: &[usize],
    quick: bool,
    results: &mut ResultsFile,
) -> Result<f64, BenchError> {
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
    results.runs.push(record);
    Ok(grid[best])
}

/// Table 2 on sinc, Boston and Abalone with `runs` runs per cell. A dataset whose file is
/// missing or unreadable is skipped. Records the validations and every cell in `results`.
pub(super) fn run(
    data_dir: &DataDir,
    quick: bool,
    runs: usize,
    results: &mut ResultsFile,
) -> Result<Vec<Table2Entry>, BenchError> {
    let mut out = Vec::new();
    for data in [Data::Sinc, Data::Boston, Data::Abalone] {
        let full = match read_full(data, data_dir) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{}: skipped ({e})", data.name());
                out.push(Table2Entry::Skipped(data, e.to_string()));
                continue;
            }
        };
        let ms = data.landmarks(quick);
        let p0 = problem(data, full.as_ref(), 0)?;
        let folds = folds(&p0)?;
        let mut nus = Vec::new();
        for &m in &ms {
            nus.push(choose_nu(data, &p0, &folds, m, quick, results)?);
        }
        let lambda_val = choose_lambda(data, &p0, &folds, quick, results)?;
        // cells[k][method]; the KRR_n cells do not depend on M and are repeated.
        let mut cells = vec![vec![Cell::default(); METHODS.len()]; ms.len()];
        let mut ratio = vec![Vec::new(); ms.len()];
        for run in 0..runs {
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
                let (nu_s, nu_u) = (nus[k].slkl, nus[k].unif);
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
                    return Err(BenchError::Invalid("SLKL drew other landmarks than KRR_M and Unif".into()));
                }
                let model = fit_slkl(&mut solver, &mut rng(RNG_COORDINATES, run, m), &mut ())?;
                let mse = predict_mse(&model.expansion, p)?;
                c[5].push(mse, t.elapsed().as_secs_f64());
                c[5].sparsity.push(model.sparsity() as f64);
                c[5].epochs.push(model.epochs as f64);
                ratio[k].push(mse / full_cells[0].0);
            }
        }
        eprintln!("  {}: {} runs done", data.name(), runs);
        for (k, &m) in ms.iter().enumerate() {
            for (row, method) in METHODS.iter().enumerate().skip(2) {
                let nu = match row {
                    4 => Some(nus[k].unif),
                    5 => Some(nus[k].slkl),
                    _ => None,
                };
                results.runs.push(cell_record(data, method, Some(m), &cells[k][row], nu)?);
            }
        }
        results.runs.push(cell_record(data, METHODS[0], None, &cells[0][0], None)?);
        results
            .runs
            .push(cell_record(data, METHODS[1], None, &cells[0][1], None)?.with_parameter("lambda", lambda_val));
        out.push(Table2Entry::Done(Box::new(DatasetTable {
            data,
            n: p0.x.nrows(),
            n_test: p0.xt.nrows(),
            sigma: p0.sigma,
            ms,
            nus,
            lambda_validated: lambda_val,
            cells,
            ratio,
        })));
    }
    Ok(out)
}

fn cell_record(
    data: Data,
    method: &str,
    m: Option<usize>,
    cell: &Cell,
    nu: Option<f64>,
) -> Result<RunRecord, BenchError> {
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
        r.set_scalar("sparsity_mean", finite_mean(&cell.sparsity));
    }
    if !cell.epochs.is_empty() {
        r.set_scalar("epochs_mean", finite_mean(&cell.epochs));
    }
    r.set_scalar("fit_seconds_mean", finite_mean(&cell.seconds));
    r.time_seconds = cell.seconds.iter().sum();
    Ok(r)
}
