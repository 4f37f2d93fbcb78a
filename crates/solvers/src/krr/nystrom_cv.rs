//! Choosing Nyström KRR's ridge λ by K-fold cross-validation, in two passes over the kernel
//! panels whatever the grid.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::{solve_lower_triangular_in_place, solve_upper_triangular_in_place};
use faer::{Accum, Mat, MatRef, Par};
use stolr_comm::{Communicator, RowShard, SingleProcess, all_reduce_lower, rows_by_index};
use stolr_estimators::{CrossKernelPanels, Kernel};
use stolr_memory::f64_bytes;

use super::nystrom::{BLOCK_ROWS, NystromKrrConfig, jittered_cholesky, whiten};
use crate::SolverError;
use crate::error::{check_landmarks, check_regression, check_shard};

/// The outcome of [`select_lambda_nystrom`].
#[derive(Debug, Clone, PartialEq)]
pub struct LambdaSelection {
    /// The λ grid, increasing.
    pub grid: Vec<f64>,
    /// Pooled cross-validation mean squared error of each λ (units of the squared targets).
    pub validation_mse: Vec<f64>,
    /// The chosen λ: smallest validation error; among ties (relative 10⁻¹²) the largest.
    pub lambda: f64,
}

/// Chooses Nyström KRR's λ by `K`-fold cross-validation over `grid`, on the landmarks
/// `landmarks` (drawn once from the whole training set; only their positions are used, never
/// their targets, so no target leaks into a fold), with `intercept` handled per fold as
/// [`crate::nystrom_krr`] does: the centred system on the fold's fitting rows (their targets and the
/// columns of their kernel block centred on their own means, $\bar y_f$ and $\bar k_f$) and
/// the intercept $b = \bar y_f - \bar k_f^\top\alpha_\lambda$ for every λ.
///
/// Two passes over the kernel panels, whatever the grid: the first accumulates, per fold `f`,
/// $G_f = K_{Mf}K_{fM}$, $z_f = K_{Mf} y_f$ and $s_f = K_{Mf}\mathbf 1$; for each held-out
/// fold, $H = L^{-1}(\sum_{g \ne f} G_g - n_f\bar k_f\bar k_f^\top)L^{-\top} = Q\Lambda Q^\top$
/// (without the intercept, no rank-1 term) is decomposed once and every
/// λ solved as $\alpha_\lambda = L^{-\top} Q(\Lambda + \lambda I)^{-1}Q^\top L^{-1} z$ in
/// `O(M²)`; the second pass predicts every held-out row for every λ. Cost
/// `O(n M² + K M³ + n M K |grid|)`; memory `(K + 3) M²` doubles, checked against `config.memory`.
///
/// # Errors
/// As [`crate::nystrom_krr`]; [`SolverError::InvalidConfig`] (`lambda grid`) for an empty grid or a
/// value that is not positive and finite, (`folds`) unless `folds` has length `n`, at least two
/// folds, each non-empty and leaving two samples to fit.
///
/// # References
/// The kernel ridge regression issue (Deliver 3, `--lambda auto`); the estimator of
/// [`crate::nystrom_krr`].
#[allow(clippy::too_many_arguments)]
pub fn select_lambda_nystrom(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &[usize],
    intercept: bool,
    grid: &[f64],
) -> Result<LambdaSelection, SolverError> {
    let whole = RowShard::whole(x.nrows());
    select_lambda_nystrom_sharded(x, y, folds, kernel, config, landmarks, intercept, grid, &SingleProcess, whole)
}

/// [`select_lambda_nystrom`] on training rows sharded across the ranks of `comm`: `x`
/// `(shard.rows, d)` and `y` are this rank's rows `shard.first..shard.first + shard.rows` of
/// the `n = shard.total` training rows; `folds` (length `n`) and `landmarks` are over the
/// global row indices and the same on every rank (the folds one process draws). Every rank
/// returns the same selection.
///
/// **Scheme.** The landmark rows are assembled on every rank ([`rows_by_index`], `M·d`
/// doubles). Pass 1 accumulates each fold's $G_f$, $z_f$, $s_f$ and $\sum_{i\in f} y_i$ over
/// this rank's rows, then adds them across ranks in rank order: `K` lower triangles
/// (`K·M(M+1)/2` doubles) and `2KM + K` doubles. The per-fold eigendecompositions and the
/// coefficients of every (fold, λ) are replicated. Pass 2 scores this rank's rows and adds the
/// `|grid|` sums of squared errors across ranks, so every rank picks the same λ. With one rank
/// this is [`select_lambda_nystrom`], bit for bit; with `P` ranks the validation errors differ
/// by the rounding of the rank-ordered sums. Memory as [`select_lambda_nystrom`] with the local
/// rows, plus one `M × M` matrix for the reductions on more than one rank.
///
/// # Errors
/// As [`select_lambda_nystrom`] (`folds` of length `n = shard.total`), and
/// [`SolverError::InvalidConfig`] (`shard`) if `x` or `y` do not have `shard.rows` rows.
#[allow(clippy::too_many_arguments)]
pub fn select_lambda_nystrom_sharded(
    x: MatRef<'_, f64>,
    y: &[f64],
    folds: &[usize],
    kernel: &Kernel,
    config: &NystromKrrConfig,
    landmarks: &[usize],
    intercept: bool,
    grid: &[f64],
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<LambdaSelection, SolverError> {
    check_shard(x.nrows(), y.len(), shard)?;
    if shard.rows > 0 || comm.size() == 1 {
        check_regression(x, y)?;
    }
    kernel.validate()?;
    check_landmarks(landmarks, shard.total)?;
    if grid.is_empty() || grid.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(SolverError::InvalidConfig {
            name: "lambda grid",
            reason: "need at least one λ, each positive and finite".into(),
        });
    }
    let n = shard.total;
    let k = folds.iter().max().map_or(0, |&f| f + 1);
    let counts: Vec<usize> = (0..k).map(|f| folds.iter().filter(|&&g| g == f).count()).collect();
    if folds.len() != n || k < 2 || counts.iter().any(|&c| c == 0 || n - c < 2) {
        return Err(SolverError::InvalidConfig {
            name: "folds",
            reason: format!(
                "need one fold index per sample, at least 2 non-empty folds each leaving 2 to fit; got K = {k}"
            ),
        });
    }
    // This rank's rows' folds.
    let folds = &folds[shard.first..shard.first + shard.rows];
    let m = landmarks.len();
    let matrices = if comm.size() > 1 { k + 4 } else { k + 3 };
    config.memory.check(
        format!("λ selection's {matrices} {m} × {m} matrices (K = {k} folds, M = {m})"),
        f64_bytes(&[matrices, m, m]) + f64_bytes(&[m, BLOCK_ROWS + 2 * x.ncols()]),
    )?;
    let xm = rows_by_index(comm, x, shard, landmarks);
    let panels = CrossKernelPanels::new(kernel, x, xm.as_ref())?;
    let (l, _) = jittered_cholesky(kernel.cross(xm.as_ref(), xm.as_ref()).as_ref())?;
    // Pass 1: per-fold G_f (lower), z_f and s_f.
    let mut grams: Vec<Mat<f64>> = (0..k).map(|_| Mat::zeros(m, m)).collect();
    let mut zs = Mat::<f64>::zeros(m, k);
    let mut ss = Mat::<f64>::zeros(m, k);
    let mut ysum = vec![0.0; k];
    panels.for_each_block(
        BLOCK_ROWS,
        |_| {},
        |block| {
            for panel in block.iter() {
                let c = panel.kernel.as_ref();
                for (i, col) in c.col_iter().enumerate() {
                    let row = panel.first_row + i;
                    let f = folds[row];
                    ysum[f] += y[row];
                    for (j, v) in col.iter().enumerate() {
                        zs[(j, f)] += v * y[row];
                        ss[(j, f)] += v;
                    }
                }
                // Rows of one fold at a time: the panel's columns grouped by fold.
                for (f, gram) in grams.iter_mut().enumerate() {
                    let cols: Vec<usize> = (0..c.ncols()).filter(|&i| folds[panel.first_row + i] == f).collect();
                    if cols.is_empty() {
                        continue;
                    }
                    let cf = Mat::from_fn(m, cols.len(), |r, q| c[(r, cols[q])]);
                    triangular::matmul(
                        gram.as_mut(),
                        BlockStructure::TriangularLower,
                        Accum::Add,
                        cf.as_ref(),
                        BlockStructure::Rectangular,
                        cf.transpose(),
                        BlockStructure::Rectangular,
                        1.0,
                        faer::get_global_parallelism(),
                    );
                }
            }
            Ok::<(), SolverError>(())
        },
    )?;
    if comm.size() > 1 {
        for gram in &mut grams {
            all_reduce_lower(comm, gram);
        }
        // z_f, s_f and Σ_f y in one buffer: (2M + 1) × K.
        let mut buf: Vec<f64> = (0..k)
            .flat_map(|f| (0..m).map(move |j| (j, f)))
            .map(|(j, f)| zs[(j, f)])
            .chain((0..k).flat_map(|f| (0..m).map(move |j| (j, f))).map(|(j, f)| ss[(j, f)]))
            .chain(ysum.iter().copied())
            .collect();
        comm.all_reduce_sum(&mut buf);
        zs = Mat::from_fn(m, k, |j, f| buf[f * m + j]);
        ss = Mat::from_fn(m, k, |j, f| buf[k * m + f * m + j]);
        ysum.copy_from_slice(&buf[2 * k * m..]);
    }
    let par = faer::get_global_parallelism();
    let (ytotal, stotal) =
        (ysum.iter().sum::<f64>(), (0..m).map(|j| (0..k).map(|f| ss[(j, f)]).sum::<f64>()).collect::<Vec<_>>());
    // Coefficients α for every (fold, λ): (M, K·|grid|).
    let mut alphas = Mat::<f64>::zeros(m, k * grid.len());
    let mut offsets = vec![0.0; k * grid.len()];
    for f in 0..k {
        let mut g = Mat::<f64>::zeros(m, m);
        for (h, gram) in grams.iter().enumerate() {
            if h != f {
                g += gram;
            }
        }
        let nf = (n - counts[f]) as f64;
        let mean = if intercept { (ytotal - ysum[f]) / nf } else { 0.0 };
        // The fitting rows' column means k̄_f; centred Gram G − n_f k̄_f k̄_fᵀ (lower triangle).
        let kbar: Vec<f64> = (0..m).map(|j| if intercept { (stotal[j] - ss[(j, f)]) / nf } else { 0.0 }).collect();
        if intercept {
            for j in 0..m {
                for i in j..m {
                    g[(i, j)] -= nf * kbar[i] * kbar[j];
                }
            }
        }
        let h = whiten(l.as_ref(), g);
        let (values, q) = stolr_lowrank::sym_eigen_desc(h.as_ref())?;
        // z = K_M,fit (y − mean) = Σ_{g≠f} z_g − mean Σ_{g≠f} s_g, then L⁻¹ z and Qᵀ.
        let mut z = Mat::from_fn(m, 1, |j, _| {
            let zsum: f64 = (0..k).filter(|&h| h != f).map(|h| zs[(j, h)]).sum();
            zsum - mean * (stotal[j] - ss[(j, f)])
        });
        solve_lower_triangular_in_place(l.as_ref(), z.as_mut(), par);
        let qz = q.transpose() * &z;
        for (gi, &lambda) in grid.iter().enumerate() {
            let scaled = Mat::from_fn(m, 1, |j, _| qz[(j, 0)] / (values[j].max(0.0) + lambda));
            let mut a = &q * scaled;
            solve_upper_triangular_in_place(l.transpose(), a.as_mut(), par);
            offsets[f * grid.len() + gi] = mean - (0..m).map(|j| kbar[j] * a[(j, 0)]).sum::<f64>();
            alphas.col_mut(f * grid.len() + gi).copy_from(a.col(0));
        }
    }
    drop(grams);
    // Pass 2: held-out predictions for every λ.
    let mut squared = vec![0.0; grid.len()];
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| {
            let c = panel.kernel.as_ref();
            let mut p = Mat::<f64>::zeros(c.ncols(), alphas.ncols());
            matmul(p.as_mut(), Accum::Replace, c.transpose(), alphas.as_ref(), 1.0, Par::Seq);
            panel.scratch = p;
        },
        |block| {
            for panel in block.iter() {
                for i in 0..panel.scratch.nrows() {
                    let row = panel.first_row + i;
                    let f = folds[row];
                    for (gi, sq) in squared.iter_mut().enumerate() {
                        let e = panel.scratch[(i, f * grid.len() + gi)] + offsets[f * grid.len() + gi] - y[row];
                        *sq += e * e;
                    }
                }
            }
            Ok::<(), SolverError>(())
        },
    )?;
    comm.all_reduce_sum(&mut squared);
    let validation_mse: Vec<f64> = squared.iter().map(|s| s / n as f64).collect();
    let best = validation_mse.iter().copied().fold(f64::INFINITY, f64::min);
    let lambda = grid
        .iter()
        .zip(&validation_mse)
        .filter(|(_, v)| **v <= best * (1.0 + 1e-12))
        .map(|(g, _)| *g)
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(LambdaSelection { grid: grid.to_vec(), validation_mse, lambda })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::krr::nystrom::tests::data;
    use faer::linalg::solvers::Solve;

    /// Every λ's validation error equals a fit on the other folds (same landmarks) scored on
    /// the held-out fold, and the chosen λ is the grid's best.
    #[test]
    fn lambda_selection_equals_refits_fold_by_fold() {
        let (x, y) = data(300, 2, 7);
        let y: Vec<f64> = y.iter().map(|v| v + 4.0).collect();
        let kernel = Kernel::gaussian(0.6);
        let j: Vec<usize> = (0..300).step_by(10).collect();
        let folds: Vec<usize> = (0..300).map(|i| (i * 7) % 3).collect();
        let grid = [1e-3, 1e-1, 10.0, 1e3];
        for intercept in [true, false] {
            let config = NystromKrrConfig::default();
            let sel = select_lambda_nystrom(x.as_ref(), &y, &folds, &kernel, &config, &j, intercept, &grid).unwrap();
            for (g, &lambda) in grid.iter().enumerate() {
                let mut sq = 0.0;
                for f in 0..3 {
                    let fit_rows: Vec<usize> = (0..300).filter(|&i| folds[i] != f).collect();
                    let xf = Mat::from_fn(fit_rows.len(), 2, |r, c| x[(fit_rows[r], c)]);
                    let yf: Vec<f64> = fit_rows.iter().map(|&i| y[i]).collect();
                    let nf = yf.len() as f64;
                    let mean = if intercept { yf.iter().sum::<f64>() / nf } else { 0.0 };
                    let yc: Vec<f64> = yf.iter().map(|v| v - mean).collect();
                    // The same landmark rows, as indices into the fitting rows... landmarks may sit
                    // in the held-out fold, so fit the (centred) closed form on explicit centres.
                    let xm = Mat::from_fn(j.len(), 2, |r, c| x[(j[r], c)]);
                    let knm = kernel.cross(xf.as_ref(), xm.as_ref());
                    let kbar: Vec<f64> = (0..j.len())
                        .map(|c| if intercept { knm.col(c).iter().sum::<f64>() / nf } else { 0.0 })
                        .collect();
                    let knm = Mat::from_fn(knm.nrows(), j.len(), |r, c| knm[(r, c)] - kbar[c]);
                    let kmm = kernel.cross(xm.as_ref(), xm.as_ref());
                    let a = knm.transpose() * &knm + kmm * lambda;
                    let b = knm.transpose() * MatRef::from_column_major_slice(&yc, yc.len(), 1);
                    let alpha = a.partial_piv_lu().solve(b);
                    let offset = mean - (0..j.len()).map(|c| kbar[c] * alpha[(c, 0)]).sum::<f64>();
                    for i in (0..300).filter(|&i| folds[i] == f) {
                        let xi = Mat::from_fn(1, 2, |_, c| x[(i, c)]);
                        let p = (kernel.cross(xi.as_ref(), xm.as_ref()) * &alpha)[(0, 0)] + offset;
                        sq += (p - y[i]).powi(2);
                    }
                }
                let expected = sq / 300.0;
                let got = sel.validation_mse[g];
                assert!((got - expected).abs() < 1e-6 * expected, "λ = {lambda}: {got} vs {expected}");
            }
            let best = sel.validation_mse.iter().copied().fold(f64::INFINITY, f64::min);
            assert_eq!(sel.validation_mse[grid.iter().position(|&g| g == sel.lambda).unwrap()], best);
        }
        let config = NystromKrrConfig::default();
        let bad = select_lambda_nystrom(x.as_ref(), &y, &folds, &kernel, &config, &j, true, &[]);
        assert!(matches!(bad, Err(SolverError::InvalidConfig { name: "lambda grid", .. })));
        let bad = select_lambda_nystrom(x.as_ref(), &y, &vec![0; 300], &kernel, &config, &j, true, &grid);
        assert!(matches!(bad, Err(SolverError::InvalidConfig { name: "folds", .. })));
    }
}
