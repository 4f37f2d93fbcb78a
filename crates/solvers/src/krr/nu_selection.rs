//! Choosing SLKL's sparsity penalty ν by cross-validation.
//!
//! \[SLKL\] fixes λ = 1 and tunes ν (Proposition 3: only λν matters), but its values are lost
//! (docs/derivations.md §6.14). [`select_nu`] fits the model for every ν of a grid on all folds but
//! one, scores it on the held-out fold, and keeps the ν with the smallest pooled validation error.

use faer::{Mat, MatRef};
use rand::Rng;
use stolr_estimators::Kernel;

use stolr_comm::{Communicator, RowShard, SingleProcess};

use crate::krr::unif::UnifSystem;
use crate::{Slkl, SlklConfig, SolverError, UnifConfig, UniformWeight, run, slkl};

/// The model whose ν is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NuModel {
    /// SLKL ([`crate::slkl`]) with the rest of the [`SlklConfig`] as given.
    Slkl,
    /// Unif ([`crate::unif`]) with the optimal common weight for (14) at that ν, on the same
    /// landmarks SLKL would draw.
    Unif,
}

/// One point of the ν grid.
#[derive(Debug, Clone, PartialEq)]
pub struct NuCandidate {
    /// The penalty ν.
    pub nu: f64,
    /// Pooled cross-validation mean squared error: every sample's squared error when its fold
    /// was held out, averaged over the samples (units of the squared targets).
    pub validation_mse: f64,
    /// `‖μ‖₀` of the fitted models, mean over the folds (Unif: landmarks with a positive weight).
    pub sparsity: f64,
    /// SLKL epochs run, mean over the folds (0 for Unif).
    pub epochs: f64,
}

/// The outcome of [`select_nu`].
#[derive(Debug, Clone, PartialEq)]
pub struct NuSelection {
    /// Every grid point, in the order of the grid.
    pub candidates: Vec<NuCandidate>,
    /// The chosen ν: smallest validation MSE; among ties (within a relative 10⁻¹²), the largest
    /// ν, i.e. the sparsest model.
    pub nu: f64,
    /// [`select_nu_path`]: `ν_max`, the smallest ν at which every weight is 0 (on the first
    /// fold), from which the grid descends; `None` for [`select_nu`].
    pub nu_max: Option<f64>,
    /// [`select_nu_path`]: whether the path stopped before the end of the grid because the
    /// validation error had turned.
    pub stopped_early: bool,
}

/// Options of [`select_nu_path`].
#[derive(Debug, Clone, PartialEq)]
pub struct NuPath {
    /// Fit each fold with an unpenalized intercept ([`Slkl::with_intercept`]: centred targets and
    /// kernel columns; the [`crate::KernelRidge::intercept`] of the final fit).
    pub intercept: bool,
    /// Grid points per decade below `ν_max` (default 1).
    pub per_decade: usize,
    /// Decades the grid spans below `ν_max` (default 12: down to `10⁻¹² ν_max`; the early stop
    /// usually ends the path well before).
    pub decades: usize,
    /// SLKL's KKT tolerance ε on the path (default `1e-2`): a validation score needs less
    /// precision than the final fit, which uses the configuration's own ε.
    pub epsilon: f64,
    /// Epoch cap per ν on the path (default 10): from a warm start the validation error has
    /// settled long before the KKT test passes at small ν.
    pub max_epochs: usize,
    /// Stop the path once the pooled validation error has been above `(1 + turn) ×` its best
    /// for two consecutive ν, or above twice its best once (default 0.01); `None` walks the
    /// whole grid.
    pub turn: Option<f64>,
}

impl Default for NuPath {
    fn default() -> Self {
        Self { intercept: true, per_decade: 1, decades: 12, epsilon: 1e-2, max_epochs: 10, turn: Some(0.01) }
    }
}

/// `10^e` for `e` from `lo` to `hi` in steps of `1/per_decade` (both ends included), e.g.
/// `log_grid(-4, 1, 2)` = 10⁻⁴, 10⁻³·⁵, …, 10¹ (11 values), docs/derivations.md §6.14's grid for ν.
/// Empty if `per_decade == 0` or `hi < lo`.
pub fn log_grid(lo: i32, hi: i32, per_decade: usize) -> Vec<f64> {
    if per_decade == 0 || hi < lo {
        return Vec::new();
    }
    let steps = (hi - lo) as usize * per_decade;
    (0..=steps).map(|k| 10f64.powf(lo as f64 + k as f64 / per_decade as f64)).collect()
}

/// Mean squared error $\frac1m\sum_i (p_i - y_i)^2$ of predictions `p` against targets `y`
/// (same length `m`); NaN for `m = 0`.
pub fn mean_squared_error(p: &[f64], y: &[f64]) -> f64 {
    p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / y.len() as f64
}

/// Chooses ν for `model` by cross-validation on (`x` `(n, d)`, `y`): `folds[i]` is the fold of
/// sample `i` (e.g. from `stolr_datasets::random_folds`). For every ν of `grid` and every fold
/// `k`, fits on the samples outside fold `k` with `config` (its `nu` replaced; `M` capped at the
/// number of fitting samples) and predicts fold `k`; the score of ν is the pooled mean squared
/// error over all samples. Every fit starts from a clone of `rng`, so all the grid points of a
/// fold use the same landmarks and (for SLKL) the same coordinate order: they differ only in ν.
/// `rng` itself is not advanced. Cost: `grid.len() × K` fits.
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`nu grid`) if `grid` is empty or holds a value that is not
/// positive and finite, (`folds`) unless there are at least two folds, each with a sample, and
/// every sample outside a fold can be fitted; [`SolverError::ShapeMismatch`] if `y` or `folds`
/// does not have length `n`; every error of [`slkl`] / [`crate::unif`].
///
/// # References
/// \[SLKL\], Section 5 (λ = 1, "various ν"), Proposition 3;
/// docs/derivations.md §6.10, §6.14.
#[allow(clippy::too_many_arguments)]
pub fn select_nu<R: Rng + Clone>(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    config: &SlklConfig,
    model: NuModel,
    grid: &[f64],
    rng: &R,
) -> Result<NuSelection, SolverError> {
    check_grid(grid)?;
    let n = x.nrows();
    let (members, k) = fold_members(n, y, folds)?;
    if model == NuModel::Unif {
        let (memory, whole) = (stolr_memory::MemoryBudget::default(), RowShard::whole(n));
        let (lambda, m) = (config.lambda, config.landmarks);
        return select_nu_unif_sharded(x, y, folds, kernel, lambda, m, grid, rng, memory, &SingleProcess, whole);
    }
    let rows = |idx: &[usize]| Mat::from_fn(idx.len(), x.ncols(), |i, j| x[(idx[i], j)]);
    let mut squared = vec![0.0; grid.len()];
    let mut sparsity = vec![0.0; grid.len()];
    let mut epochs = vec![0.0; grid.len()];
    for held in &members {
        let fit_idx: Vec<usize> = (0..n).filter(|&i| folds[i] != folds[held[0]]).collect();
        let (x_fit, x_val) = (rows(&fit_idx), rows(held));
        let y_fit: Vec<f64> = fit_idx.iter().map(|&i| y[i]).collect();
        let y_val: Vec<f64> = held.iter().map(|&i| y[i]).collect();
        let m = config.landmarks.min(fit_idx.len());
        for (g, &nu) in grid.iter().enumerate() {
            let mut r = rng.clone();
            let c = SlklConfig { nu, landmarks: m, ..config.clone() };
            let fitted = slkl(x_fit.as_ref(), &y_fit, kernel, c, &mut r, &mut ())?;
            let (p, e) = (fitted.sparsity(), fitted.epochs);
            let pred = fitted.expansion.predict(x_val.as_ref())?;
            squared[g] += pred.iter().zip(&y_val).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
            sparsity[g] += p as f64 / k as f64;
            epochs[g] += e as f64 / k as f64;
        }
    }
    let candidates: Vec<NuCandidate> = (0..grid.len())
        .map(|g| NuCandidate {
            nu: grid[g],
            validation_mse: squared[g] / n as f64,
            sparsity: sparsity[g],
            epochs: epochs[g],
        })
        .collect();
    Ok(NuSelection { nu: best_nu(&candidates), candidates, nu_max: None, stopped_early: false })
}

/// [`select_nu`] for Unif ([`NuModel::Unif`]) on training rows sharded across the ranks of
/// `comm`: `x` `(shard.rows, d)` and `y` are this rank's rows
/// `shard.first..shard.first + shard.rows` of the `n = shard.total` training rows; `folds`
/// (length `n`, over the global row indices, the same on every rank: the folds one process
/// draws) and the `rng` state are the same on every rank. Every rank returns the same
/// selection; with one rank (the [`SingleProcess`] communicator) it is [`select_nu`]'s.
///
/// **Scheme.** For each fold, each rank's fitting rows are its own rows outside the fold, in
/// order (in rank order, the fold's fitting rows of one process); the fold's `min(M, n_fit)`
/// landmarks are drawn over its global fitting rows from a clone of `rng` (one process's draw,
/// the same for every ν), and one [`UnifSystem`] is built on them without the intercept (the
/// kernel columns' `M × M` sums added across ranks once per fold). Every ν of `grid` is then
/// a replicated solve of that system ([`UnifConfig`] with λ `lambda` and the optimal weight);
/// each rank scores its own held-out rows, and the squared errors of every ν are added across
/// ranks once, at the end (one buffer of `grid.len()` doubles). Memory: one fold's system at a
/// time, checked against `memory` ([`UnifSystem::new`]).
///
/// # Errors
/// As [`select_nu`] (`folds` of length `n = shard.total`), those of [`UnifSystem::new`] (every
/// one collective), and [`SolverError::InvalidConfig`] (`shard`) if `x` or `y` do not have
/// `shard.rows` rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn select_nu_unif_sharded<R: Rng + Clone>(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    lambda: f64,
    landmarks: usize,
    grid: &[f64],
    rng: &R,
    memory: stolr_memory::MemoryBudget,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<NuSelection, SolverError> {
    check_grid(grid)?;
    crate::error::check_shard(x.nrows(), y.len(), shard)?;
    let n = shard.total;
    let (members, k) = fold_sets(n, folds)?;
    let local_folds = &folds[shard.first..shard.first + shard.rows];
    let rows = |idx: &[usize]| Mat::from_fn(idx.len(), x.ncols(), |i, j| x[(idx[i], j)]);
    let configs: Vec<UnifConfig> =
        grid.iter().map(|&nu| UnifConfig { lambda, nu, weight: UniformWeight::Optimal }).collect();
    for c in &configs {
        c.validate()?;
    }
    let mut squared = vec![0.0; grid.len()];
    let mut sparsity = vec![0.0; grid.len()];
    for held in &members {
        let f = folds[held[0]];
        let fit_idx: Vec<usize> = (0..shard.rows).filter(|&i| local_folds[i] != f).collect();
        let held_idx: Vec<usize> = (0..shard.rows).filter(|&i| local_folds[i] == f).collect();
        let before = folds[..shard.first].iter().filter(|&&g| g != f).count();
        let place = RowShard { first: before, rows: fit_idx.len(), total: n - held.len() };
        let (x_fit, x_val) = (rows(&fit_idx), rows(&held_idx));
        let y_fit: Vec<f64> = fit_idx.iter().map(|&i| y[i]).collect();
        let y_val: Vec<f64> = held_idx.iter().map(|&i| y[i]).collect();
        let j = crate::select_landmarks(place.total, landmarks.min(place.total), &mut rng.clone())?;
        let system = UnifSystem::new(x_fit.as_ref().into(), &y_fit, None, kernel, &j, false, memory, comm, place)?;
        for (g, config) in configs.iter().enumerate() {
            let fitted = system.solve(kernel, config)?;
            let pred = fitted.expansion.predict(x_val.as_ref())?;
            squared[g] += pred.iter().zip(&y_val).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
            sparsity[g] += fitted.expansion.len() as f64 / k as f64;
        }
    }
    comm.all_reduce_sum(&mut squared);
    let candidates: Vec<NuCandidate> = (0..grid.len())
        .map(|g| NuCandidate { nu: grid[g], validation_mse: squared[g] / n as f64, sparsity: sparsity[g], epochs: 0.0 })
        .collect();
    Ok(NuSelection { nu: best_nu(&candidates), candidates, nu_max: None, stopped_early: false })
}

/// The ν of the smallest validation error, among ties (relative 10⁻¹²) the largest.
fn best_nu(candidates: &[NuCandidate]) -> f64 {
    let best = candidates.iter().map(|c| c.validation_mse).fold(f64::INFINITY, f64::min);
    candidates
        .iter()
        .filter(|c| c.validation_mse <= best * (1.0 + 1e-12))
        .map(|c| c.nu)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// Chooses SLKL's ν by `K`-fold cross-validation along a regularization path with warm starts.
///
/// One SLKL solver per fold is built on the samples outside the fold (landmarks drawn from a
/// clone of `rng`, `M` capped at the fitting samples; with an intercept if `path.intercept`).
/// `ν_max = max_i a_i(0)` — the largest derivative term of (14) at μ = 0, the smallest ν at
/// which μ = 0 is optimal (Proposition 2: ∂_iF(0) = ν − a_i(0)) — is computed on the first
/// fold, and the grid descends from it: `ν_max·10^{-j/per_decade}`, `j = 1 … decades·per_decade`.
/// At each ν every fold's solver is warm-started from its solution at the previous ν
/// ([`Slkl::set_nu`]) and run to the path's looser tolerance `path.epsilon` (or
/// `path.max_epochs` epochs), then scored on its held-out
/// fold; the pooled mean squared error over all samples is the score of ν. The active set and
/// the Woodbury state carry over from one ν to the next, so each step of the path costs a few
/// epochs. With `path.turn`, the path stops once the score has exceeded `(1 + turn)` times the
/// best so far at two consecutive ν, or twice the best at one: the error has clearly turned and smaller ν only cost more
/// (they activate more landmarks and take more epochs).
///
/// Memory: `K` solvers at once (precomputed columns: `8·n·M` bytes each; use
/// [`crate::ColumnMode::OnTheFly`] on large data). Cost: about `K` fits at the smallest ν
/// visited, instead of `K × grid` cold fits.
///
/// # Errors
/// [`SolverError::InvalidConfig`] (`folds`) unless there are at least two folds, each with a
/// sample, leaving two to fit; (`nu grid`) if `per_decade` or `decades` is 0;
/// [`SolverError::ShapeMismatch`] if `y` or `folds` does not have length `n`; every error of
/// [`Slkl::new`] and [`Slkl::update`].
///
/// # References
/// \[SLKL\], (14), Proposition 2 (20) and Section 5 ("various ν");
/// Friedman, Hastie & Tibshirani (2010) for pathwise coordinate descent with warm starts; the
/// kernel ridge regression issue (Deliver 3).
pub fn select_nu_path<R: Rng + Clone>(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    config: &SlklConfig,
    path: &NuPath,
    rng: &R,
) -> Result<NuSelection, SolverError> {
    check_path(path)?;
    fold_members(x.nrows(), y, folds)?;
    let whole = RowShard::whole(x.nrows());
    select_nu_path_sharded(x, y, folds, kernel, config, path, rng, &SingleProcess, whole)
}

/// [`select_nu_path`] on training rows sharded across the ranks of `comm`: `x`
/// `(shard.rows, d)` and `y` are this rank's rows `shard.first..shard.first + shard.rows` of
/// the `n = shard.total` training rows; `folds` (length `n`) is over the global row indices
/// and the same on every rank (the folds one process draws), and every rank passes the same
/// `rng` state. Every rank returns the same selection.
///
/// **Scheme.** Each fold's fitting rows are, on each rank, its own rows outside the fold, in
/// order, so that in rank order they are the fold's fitting rows of one process; each fold runs
/// one sharded SLKL on them ([`Slkl::with_intercept`] with that fold's [`RowShard`], landmarks
/// drawn over the fold's global fitting rows: the landmarks of one process), whose every sum
/// over the rows is added across ranks in rank order (see [`Slkl::new_sharded`] for the bytes).
/// `ν_max` is the first fold's collective derivatives. At each ν every rank scores its own
/// held-out rows and the sum of squared errors is added across ranks (one double per ν), so
/// the score, the early stop and the chosen ν are the same bits on every rank. With one rank
/// this is [`select_nu_path`], bit for bit; with `P` ranks the scores differ by the rounding of
/// the rank-ordered sums. Memory: `K` sharded solvers (precomputed columns `8·(rows)·M` bytes
/// each on a rank).
///
/// # Errors
/// As [`select_nu_path`] (`folds` of length `n = shard.total`), and
/// [`SolverError::InvalidConfig`] (`shard`) if `x` or `y` do not have `shard.rows` rows. Bad
/// data is only seen by the rank holding it, and the caller must then stop every rank.
#[allow(clippy::too_many_arguments)]
pub fn select_nu_path_sharded<R: Rng + Clone>(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    config: &SlklConfig,
    path: &NuPath,
    rng: &R,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<NuSelection, SolverError> {
    check_path(path)?;
    crate::error::check_shard(x.nrows(), y.len(), shard)?;
    let n = shard.total;
    let (members, k) = fold_sets(n, folds)?;
    let local_folds = &folds[shard.first..shard.first + shard.rows];
    let rows = |idx: &[usize]| Mat::from_fn(idx.len(), x.ncols(), |i, j| x[(idx[i], j)]);
    struct FoldState<'c> {
        solver: Slkl<'c>,
        x_val: Mat<f64>,
        y_val: Vec<f64>,
        order_rng: rand::rngs::StdRng,
    }
    let mut states = Vec::with_capacity(k);
    for held in &members {
        let f = folds[held[0]];
        // This rank's fitting and held-out rows (local indices), and its place among the fold's
        // fitting rows of every rank.
        let fit_idx: Vec<usize> = (0..shard.rows).filter(|&i| local_folds[i] != f).collect();
        let held_idx: Vec<usize> = (0..shard.rows).filter(|&i| local_folds[i] == f).collect();
        let before = folds[..shard.first].iter().filter(|&&g| g != f).count();
        let place = RowShard { first: before, rows: fit_idx.len(), total: n - held.len() };
        let x_fit = rows(&fit_idx);
        let y_fit: Vec<f64> = fit_idx.iter().map(|&i| y[i]).collect();
        let mut r = rng.clone();
        let c = SlklConfig {
            landmarks: config.landmarks.min(place.total),
            epsilon: path.epsilon,
            max_epochs: path.max_epochs,
            active_set: true,
            ..config.clone()
        };
        let solver = Slkl::with_intercept(x_fit.as_ref(), &y_fit, kernel, c, path.intercept, &mut r, comm, place)?;
        let order_rng = <rand::rngs::StdRng as rand::SeedableRng>::from_rng(&mut r);
        let y_val = held_idx.iter().map(|&i| y[i]).collect();
        states.push(FoldState { solver, x_val: rows(&held_idx), y_val, order_rng });
    }
    let first = &states[0].solver;
    let mut nu_max = 0.0_f64;
    for l in 0..first.selected().len() {
        nu_max = nu_max.max(first.partials(l)?.a);
    }
    if !(nu_max.is_finite() && nu_max > 0.0) {
        // The targets are orthogonal to every landmark column: any ν gives μ = 0.
        nu_max = config.nu;
    }
    let grid: Vec<f64> = (1..=path.decades * path.per_decade)
        .map(|j| nu_max * 10f64.powf(-(j as f64) / path.per_decade as f64))
        .collect();
    let mut candidates: Vec<NuCandidate> = Vec::new();
    let mut above = 0;
    let mut stopped_early = false;
    for &nu in &grid {
        let (mut squared, mut sparsity, mut epochs) = (0.0, 0.0, 0.0);
        for st in &mut states {
            let before = st.solver.epochs();
            st.solver.set_nu(nu)?;
            let stop = run(&mut st.solver, &mut st.order_rng, &mut ())?;
            let model = st.solver.model(stop)?;
            if !st.y_val.is_empty() || comm.size() == 1 {
                let pred = model.predict(st.x_val.as_ref())?;
                squared += pred.iter().zip(&st.y_val).map(|(p, t)| (p - t).powi(2)).sum::<f64>();
            }
            sparsity += model.sparsity() as f64 / k as f64;
            epochs += (st.solver.epochs() - before) as f64 / k as f64;
        }
        let mut total = [squared];
        comm.all_reduce_sum(&mut total);
        let squared = total[0];
        candidates.push(NuCandidate { nu, validation_mse: squared / n as f64, sparsity, epochs });
        if let Some(turn) = path.turn {
            let best = candidates.iter().map(|c| c.validation_mse).fold(f64::INFINITY, f64::min);
            let score = squared / n as f64;
            above = if score > (1.0 + turn) * best { above + 1 } else { 0 };
            // Clearly turned: twice above the best, or once far above it (or not finite).
            if above >= 2 || (above == 1 && (score.is_nan() || score > 2.0 * best)) {
                stopped_early = nu != *grid.last().expect("non-empty grid");
                break;
            }
        }
    }
    Ok(NuSelection { nu: best_nu(&candidates), candidates, nu_max: Some(nu_max), stopped_early })
}

/// Checks a ν grid: not empty, every value positive and finite.
fn check_grid(grid: &[f64]) -> Result<(), SolverError> {
    if grid.is_empty() {
        return Err(SolverError::InvalidConfig { name: "nu grid", reason: "the grid is empty".into() });
    }
    if let Some(bad) = grid.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(SolverError::InvalidConfig {
            name: "nu grid",
            reason: format!("every nu must be positive and finite, got {bad}"),
        });
    }
    Ok(())
}

/// Checks the options of [`select_nu_path`].
fn check_path(path: &NuPath) -> Result<(), SolverError> {
    if path.per_decade == 0 || path.decades == 0 || path.max_epochs == 0 || path.epsilon.is_nan() || path.epsilon < 0.0
    {
        return Err(SolverError::InvalidConfig {
            name: "nu grid",
            reason: "the path needs at least one decade, one point per decade, one epoch per point and epsilon >= 0"
                .into(),
        });
    }
    Ok(())
}

/// The members of each fold, after checking the shapes and that every fold is non-empty and
/// leaves two samples to fit.
fn fold_members(n: usize, y: &[f64], folds: &[usize]) -> Result<(Vec<Vec<usize>>, usize), SolverError> {
    if y.len() != n {
        return Err(SolverError::ShapeMismatch {
            what: "number of targets (one per sample)",
            expected: n,
            found: y.len(),
        });
    }
    fold_sets(n, folds)
}

/// [`fold_members`] without the targets: the members (global indices) of each fold of `n` rows.
fn fold_sets(n: usize, folds: &[usize]) -> Result<(Vec<Vec<usize>>, usize), SolverError> {
    if folds.len() != n {
        return Err(SolverError::ShapeMismatch {
            what: "number of fold indices (one per sample)",
            expected: n,
            found: folds.len(),
        });
    }
    let k = folds.iter().max().map_or(0, |&f| f + 1);
    let members: Vec<Vec<usize>> = (0..k).map(|f| (0..n).filter(|&i| folds[i] == f).collect()).collect();
    if k < 2 || members.iter().any(|m| m.is_empty() || n - m.len() < 2) {
        return Err(SolverError::InvalidConfig {
            name: "folds",
            reason: format!(
                "need at least 2 non-empty folds numbered 0..K, each leaving 2 samples to fit; got K = {k}"
            ),
        });
    }
    Ok((members, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_grid_hits_the_decades() {
        let g = log_grid(-4, 1, 2);
        assert_eq!(g.len(), 11);
        assert!((g[0] - 1e-4).abs() < 1e-19 && (g[10] - 10.0).abs() < 1e-14);
        assert!((g[1] - 10f64.powf(-3.5)).abs() < 1e-18);
        assert!(log_grid(1, 0, 2).is_empty() && log_grid(0, 1, 0).is_empty());
        assert_eq!(log_grid(0, 0, 3), vec![1.0]);
    }

    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// `y = sin(2x)` on 60 points of [−2, 2] and folds `i mod 3`.
    fn data() -> (Mat<f64>, Vec<f64>, Vec<usize>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let x = Mat::from_fn(60, 1, |_, _| rng.random_range(-2.0_f64..2.0));
        let y = (0..60).map(|i| (2.0 * x[(i, 0)]).sin()).collect();
        (x, y, (0..60).map(|i| i % 3).collect())
    }

    #[test]
    fn picks_a_fitting_nu_over_one_that_zeroes_the_model() {
        let (x, y, folds) = data();
        let kernel = Kernel::gaussian(0.5);
        let config = SlklConfig { landmarks: 20, ..SlklConfig::default() };
        let rng = Xoshiro256PlusPlus::seed_from_u64(2);
        // ν = 10⁶ exceeds every a_i at μ = 0, so μ = 0 and the predictor is 0.
        let grid = [1e-3, 1e6];
        for model in [NuModel::Slkl, NuModel::Unif] {
            let sel = select_nu(x.as_ref(), &y, &folds, &kernel, &config, model, &grid, &rng).expect("valid");
            assert_eq!(sel.nu, 1e-3, "{model:?}");
            let zero = y.iter().map(|v| v * v).sum::<f64>() / 60.0;
            assert!((sel.candidates[1].validation_mse - zero).abs() < 1e-12 * zero);
            assert_eq!(sel.candidates[1].sparsity, 0.0);
            // A fitted model explains most of the variance of a smooth target.
            assert!(sel.candidates[0].validation_mse < 0.1 * zero, "{:?}", sel.candidates[0]);
            assert!(sel.candidates[0].sparsity > 0.0);
        }
        // The same rng state gives the same selection.
        let a = select_nu(x.as_ref(), &y, &folds, &kernel, &config, NuModel::Slkl, &grid, &rng).expect("valid");
        let b = select_nu(x.as_ref(), &y, &folds, &kernel, &config, NuModel::Slkl, &grid, &rng).expect("valid");
        assert_eq!(a, b);
    }

    #[test]
    fn bad_grids_and_folds_are_errors() {
        let (x, y, folds) = data();
        let kernel = Kernel::gaussian(0.5);
        let config = SlklConfig { landmarks: 10, ..SlklConfig::default() };
        let rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let run = |folds: &[usize], grid: &[f64]| {
            select_nu(x.as_ref(), &y, folds, &kernel, &config, NuModel::Slkl, grid, &rng).unwrap_err()
        };
        assert!(matches!(run(&folds, &[]), SolverError::InvalidConfig { name: "nu grid", .. }));
        assert!(matches!(run(&folds, &[0.1, 0.0]), SolverError::InvalidConfig { name: "nu grid", .. }));
        assert!(matches!(run(&folds, &[f64::NAN]), SolverError::InvalidConfig { name: "nu grid", .. }));
        assert!(matches!(run(&vec![0; 60], &[0.1]), SolverError::InvalidConfig { name: "folds", .. }));
        let gap: Vec<usize> = (0..60).map(|i| 2 * (i % 2)).collect(); // folds 0 and 2, none is 1
        assert!(matches!(run(&gap, &[0.1]), SolverError::InvalidConfig { name: "folds", .. }));
        assert!(matches!(run(&folds[..59], &[0.1]), SolverError::ShapeMismatch { .. }));
    }

    #[test]
    fn mse_is_the_mean_of_squares() {
        assert_eq!(mean_squared_error(&[1.0, 2.0], &[0.0, 4.0]), 2.5);
        assert!(mean_squared_error(&[], &[]).is_nan());
    }
}
