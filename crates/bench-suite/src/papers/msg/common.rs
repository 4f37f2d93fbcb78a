//! What the experiments of paper 003 share: the methods, their solvers and the score.

use faer::Mat;
use stolr_solvers::{IncrementalPca, Msg, MsgConfig, Oja, StepSize, StreamingPca};

use crate::BenchError;
use crate::runner::stream;

/// The methods compared, in plot order.
pub(super) const METHODS: [&str; 4] = ["msg", "capped-msg", "incremental", "oja"];

/// A solver by method name, with step `η_t = c/√t` (the data of every experiment here has
/// `E‖x‖² = 1`, the paper's setting), its random start drawn from stream 0 of `seed`.
pub(super) fn solver(method: &str, d: usize, k: usize, c: f64, seed: u64) -> Result<Box<dyn StreamingPca>, BenchError> {
    let mut rng = stream(seed, 0);
    let step = StepSize::InverseSqrt { c };
    Ok(match method {
        "msg" => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(d, k) }, &mut rng)?),
        "capped-msg" => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::capped(d, k) }, &mut rng)?),
        "incremental" => Box::new(IncrementalPca::new(d, k)?),
        "oja" => Box::new(Oja::new(d, k, step, &mut rng)?),
        other => return Err(BenchError::Invalid(format!("unknown method {other}"))),
    })
}

/// `Σ_{i≤k} λ_i(C) − tr(Uᵀ C U)` for the covariance `C` (d, d), its eigenvalues `top`
/// (nonincreasing) and an orthonormal `U` (d, k') with k' ≤ k.
pub(super) fn suboptimality(c: &Mat<f64>, top: &[f64], u: &Mat<f64>, k: usize) -> f64 {
    let cu = c * u;
    let captured: f64 = (0..u.ncols()).map(|j| (0..u.nrows()).map(|i| u[(i, j)] * cu[(i, j)]).sum::<f64>()).sum();
    top[..k].iter().sum::<f64>() - captured
}
