//! Figures 1–3 on sinc: SLKL's objective against coordinate updates, and the sparsity `‖μ‖₀`
//! against M and against ν.

use std::time::Instant;

use stolr_solvers::{IterationReport, KrrMethod, Named, Slkl};

use super::problem::{Data, Problem, RNG_COORDINATES, RNG_LANDMARKS, fit_slkl, nu_grid, problem, rng, slkl_config};
use crate::curve::log_spaced;
use crate::stats::finite_mean;
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// Landmarks of Figure 1.
pub(super) const M_FIG1: usize = 200;

/// One run of Figure 1: `F(μ)` at log-spaced iterations, and its final value.
pub(super) struct ObjectiveRun {
    pub(super) t: Vec<f64>,
    pub(super) objective: Vec<f64>,
    pub(super) final_objective: f64,
}

/// Mean `‖μ‖₀` over the repeats, one curve per value of the other parameter.
pub(super) struct SparsityCurves {
    /// The abscissae: M (Figure 2) or ν (Figure 3).
    pub(super) x: Vec<f64>,
    /// `(the other parameter, mean ‖μ‖₀ at each x)`.
    pub(super) curves: Vec<(f64, Vec<f64>)>,
}

/// Figures 1–3.
pub(super) struct Figures {
    pub(super) nu: f64,
    pub(super) repeats: usize,
    pub(super) fig1: Vec<ObjectiveRun>,
    pub(super) fig2: SparsityCurves,
    pub(super) fig3: SparsityCurves,
}

/// `‖μ‖₀` of SLKL on `p` at ν = `nu` and `m` landmarks, mean over `reps` landmark draws (run
/// `base + rep` of the landmark and coordinate streams).
fn mean_sparsity(p: &Problem, nu: f64, m: usize, reps: usize, base: usize) -> Result<f64, BenchError> {
    let mut s = Vec::new();
    for rep in 0..reps {
        let mut solver =
            Slkl::new(p.x.as_ref(), &p.y, &p.kernel(), slkl_config(nu, m), &mut rng(RNG_LANDMARKS, base + rep, m))?;
        s.push(fit_slkl(&mut solver, &mut rng(RNG_COORDINATES, base + rep, m), &mut ())?.sparsity() as f64);
    }
    Ok(finite_mean(&s))
}

/// Figures 1–3 on run 0's sinc data with `nu` (the validated ν) for Figure 1; records every
/// curve in `results`.
pub(super) fn run(quick: bool, nu: f64, results: &mut ResultsFile) -> Result<Figures, BenchError> {
    let p = problem(Data::Sinc, None, 0)?;
    let kernel = p.kernel();
    let fig_runs = if quick { 3 } else { 10 };
    let mut fig1 = Vec::new();
    for run in 0..fig_runs {
        let started = Instant::now();
        let mut solver =
            Slkl::new(p.x.as_ref(), &p.y, &kernel, slkl_config(nu, M_FIG1), &mut rng(RNG_LANDMARKS, 100 + run, 0))?;
        // F(μ) after every coordinate update, as the loop reports it.
        let mut seen = Vec::<IterationReport>::new();
        let model = fit_slkl(&mut solver, &mut rng(RNG_COORDINATES, 100 + run, 0), &mut seen)?;
        let idx = log_spaced(seen.len(), 400);
        let xs: Vec<f64> = idx.iter().map(|&t| t as f64).collect();
        let ys: Vec<f64> = idx.iter().map(|&t| seen[t - 1].objective.unwrap_or(f64::NAN)).collect();
        let mut r = RunRecord::new("sinc", KrrMethod::Slkl.name())
            .with_parameter("M", M_FIG1)
            .with_parameter("nu", nu)
            .with_seed(run as u64);
        r.series.push(Series::new("objective", "iteration", "F(mu)", xs.clone(), ys.clone())?);
        r.set_scalar("final_objective", model.objective);
        r.set_scalar("iterations", model.iterations as f64);
        r.set_scalar("sparsity", model.sparsity() as f64);
        r.time_seconds = started.elapsed().as_secs_f64();
        results.runs.push(r);
        fig1.push(ObjectiveRun { t: xs, objective: ys, final_objective: model.objective });
    }

    // Figure 2: ‖μ‖₀ against M for a few ν.
    let ms: Vec<usize> = if quick { vec![25, 100, 200] } else { vec![25, 50, 100, 200, 400, 700, 1000] };
    let reps = if quick { 2 } else { 3 };
    let xs: Vec<f64> = ms.iter().map(|&m| m as f64).collect();
    let mut fig2 = SparsityCurves { x: xs.clone(), curves: Vec::new() };
    for v in [1e-3, 1e-2, 1e-1, 1.0] {
        let ys = ms.iter().map(|&m| mean_sparsity(&p, v, m, reps, 200)).collect::<Result<Vec<_>, _>>()?;
        let mut r =
            RunRecord::new("sinc", "slkl-sparsity-vs-M").with_parameter("nu", v).with_parameter("repeats", reps);
        r.series.push(Series::new("sparsity", "M", "mean ‖μ‖₀", xs.clone(), ys.clone())?);
        results.runs.push(r);
        fig2.curves.push((v, ys));
    }

    // Figure 3: ‖μ‖₀ against ν for a few M.
    let grid = nu_grid(quick);
    let ms3: Vec<usize> = if quick { vec![100, 200] } else { vec![100, 200, 500, 1000] };
    let mut fig3 = SparsityCurves { x: grid.clone(), curves: Vec::new() };
    for &m in &ms3 {
        let ys = grid.iter().map(|&v| mean_sparsity(&p, v, m, reps, 300)).collect::<Result<Vec<_>, _>>()?;
        let mut r =
            RunRecord::new("sinc", "slkl-sparsity-vs-nu").with_parameter("M", m).with_parameter("repeats", reps);
        r.series.push(Series::new("sparsity", "nu", "mean ‖μ‖₀", grid.clone(), ys.clone())?);
        results.runs.push(r);
        fig3.curves.push((m as f64, ys));
    }
    Ok(Figures { nu, repeats: reps, fig1, fig2, fig3 })
}
