//! The iterative solve of Nyström kernel ridge regression: Falkon-preconditioned conjugate
//! gradients on the normal equations, with the `n × M` kernel block streamed in row panels
//! once per iteration ([`super::nystrom_krr`] calls it for `NystromSolve::ConjugateGradient`).

use super::nystrom::{BLOCK_ROWS, NystromKrrConfig, centre_panel, scale_panel};
use crate::SolverError;
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::{solve_lower_triangular_in_place, solve_upper_triangular_in_place};
use faer::{Accum, Mat, MatRef, Par, Side};
use stolr_comm::Communicator;
use stolr_estimators::CrossKernelPanels;

/// `K_Mn K_nM v` (length `M`) in one pass over the kernel panels, or with `centre` = $\bar k$
/// the centred $\tilde K_{Mn}\tilde K_{nM} v$ (each panel centred first); each panel's
/// contribution is formed on its own thread and the contributions are summed in row order.
/// With `scale` = $\sqrt w$ (length `n`), each kernel row is scaled by its entry after the
/// centring: $\tilde K_{Mn} W \tilde K_{nM} v$.
fn normal_product(
    panels: &CrossKernelPanels<'_>,
    v: &[f64],
    centre: Option<&[f64]>,
    scale: Option<&[f64]>,
) -> Result<Vec<f64>, SolverError> {
    let m = v.len();
    let vm = MatRef::from_column_major_slice(v, m, 1);
    let mut out = Mat::<f64>::zeros(m, 1);
    panels.for_each_block(
        BLOCK_ROWS,
        |panel| {
            centre_panel(panel, centre);
            scale_panel(panel, scale);
            let c = panel.kernel.as_ref();
            let mut u = Mat::<f64>::zeros(c.ncols(), 1);
            matmul(u.as_mut(), Accum::Replace, c.transpose(), vm, 1.0, Par::Seq);
            if panel.scratch.shape() != (m, 1) {
                panel.scratch = Mat::zeros(m, 1);
            }
            matmul(panel.scratch.as_mut(), Accum::Replace, c, u.as_ref(), 1.0, Par::Seq);
        },
        |block| {
            for panel in block.iter() {
                out += &panel.scratch;
            }
            Ok::<(), SolverError>(())
        },
    )?;
    Ok((0..m).map(|i| out[(i, 0)]).collect())
}

fn lower_solve(l: MatRef<'_, f64>, v: &mut [f64]) {
    let n = v.len();
    solve_lower_triangular_in_place(l, faer::MatMut::from_column_major_slice_mut(v, n, 1), Par::Seq);
}

fn upper_solve(u: MatRef<'_, f64>, v: &mut [f64]) {
    let n = v.len();
    solve_upper_triangular_in_place(u, faer::MatMut::from_column_major_slice_mut(v, n, 1), Par::Seq);
}

pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Falkon-preconditioned conjugate gradients on the right-hand side `rhs` `(M, 1)`
/// ($K_{Mn}y$, or $\tilde K_{Mn}\tilde y$ with `centre` = $\bar k$, which centres every pass);
/// returns α, the iterations and the final relative residual. With `scale` = $\sqrt w$ every
/// pass weights the rows (the weighted normal equations, `rhs` then $\tilde K_{Mn} W \tilde y$).
///
/// Sharded: `panels` holds this rank's rows of the `n` training rows (`n` is the global count,
/// which scales the preconditioner), `rhs` and `centre` are already summed over every rank,
/// and each iteration's product $K_{Mn}K_{nM}v$ is this rank's part added across ranks in rank
/// order ([`Communicator::all_reduce_sum`], `M` doubles), so every rank runs the same
/// iterations on the same `M`-vectors. The stop is decided on rank 0's figures (two one-double
/// broadcasts per iteration), so the ranks stop together even if their replicated `M × M`
/// arithmetic were to differ. With [`stolr_comm::SingleProcess`] and `n = panels.n()` nothing is sent.
#[allow(clippy::too_many_arguments)]
pub(super) fn solve_cg(
    panels: &CrossKernelPanels<'_>,
    rhs: &Mat<f64>,
    centre: Option<&[f64]>,
    scale: Option<&[f64]>,
    l: MatRef<'_, f64>,
    config: &NystromKrrConfig,
    comm: &dyn Communicator,
    n: usize,
) -> Result<(Vec<f64>, usize, f64), SolverError> {
    let m = l.nrows();
    let lambda = config.lambda;
    // R Rᵀ = (n/M) LᵀL + λI.
    let mut ltl = Mat::<f64>::zeros(m, m);
    triangular::matmul(
        ltl.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        l.transpose(),
        BlockStructure::TriangularUpper,
        l,
        BlockStructure::TriangularLower,
        n as f64 / m as f64,
        faer::get_global_parallelism(),
    );
    for i in 0..m {
        ltl[(i, i)] += lambda;
    }
    let r = ltl.llt(Side::Lower).map_err(|_| {
        SolverError::LowRank(stolr_lowrank::LowRankError::NotPositiveDefinite { what: "(n/M) LᵀL + λI" })
    })?;
    let r = r.L().to_owned();
    drop(ltl);
    // P = L⁻ᵀ R⁻ᵀ, Pᵀ = R⁻¹ L⁻¹.
    let apply_p = |v: &mut [f64]| {
        upper_solve(r.transpose(), v);
        upper_solve(l.transpose(), v);
    };
    let apply_pt = |v: &mut [f64]| {
        lower_solve(l, v);
        lower_solve(r.as_ref(), v);
    };
    // A β = Pᵀ K_Mn K_nM P β + λ R⁻¹ R⁻ᵀ β.
    let operator = |beta: &[f64]| -> Result<Vec<f64>, SolverError> {
        let mut v = beta.to_vec();
        apply_p(&mut v);
        let mut out = normal_product(panels, &v, centre, scale)?;
        comm.all_reduce_sum(&mut out);
        apply_pt(&mut out);
        let mut reg = beta.to_vec();
        upper_solve(r.transpose(), &mut reg);
        lower_solve(r.as_ref(), &mut reg);
        for (o, g) in out.iter_mut().zip(&reg) {
            *o += lambda * g;
        }
        Ok(out)
    };
    let mut b: Vec<f64> = (0..m).map(|i| rhs[(i, 0)]).collect();
    apply_pt(&mut b);
    let b_norm = dot(&b, &b).sqrt();
    let mut beta = vec![0.0; m];
    let mut residual = b.clone();
    let mut direction = b.clone();
    let mut rr = dot(&residual, &residual);
    let mut iterations = 0;
    let mut relative = if b_norm > 0.0 { rr.sqrt() / b_norm } else { 0.0 };
    // Rank 0's residual decides for every rank (a no-op on one process).
    let agreed = |value: f64| {
        let mut v = [value];
        comm.broadcast(&mut v, 0);
        v[0]
    };
    relative = agreed(relative);
    while relative > config.tolerance && iterations < config.max_iterations {
        let ad = operator(&direction)?;
        let step = rr / dot(&direction, &ad);
        let proceed = agreed(if step.is_finite() && step > 0.0 { 1.0 } else { 0.0 });
        if proceed == 0.0 {
            break;
        }
        for i in 0..m {
            beta[i] += step * direction[i];
            residual[i] -= step * ad[i];
        }
        let rr_next = dot(&residual, &residual);
        let ratio = rr_next / rr;
        rr = rr_next;
        for i in 0..m {
            direction[i] = residual[i] + ratio * direction[i];
        }
        iterations += 1;
        relative = agreed(rr.sqrt() / b_norm);
    }
    apply_p(&mut beta);
    Ok((beta, iterations, relative))
}
