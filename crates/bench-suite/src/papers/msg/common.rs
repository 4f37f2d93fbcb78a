//! What the experiments of \[MSG\] share: the methods, their solvers and the score.

use std::convert::Infallible;

use faer::Mat;
use stolr_solvers::{
    IncrementalPca, Msg, MsgConfig, Named, Observer, Oja, PcaMethod, StepSize, Stop, StreamPass, StreamingPca,
    run_with_target,
};

use crate::BenchError;
use crate::observe::at_marks;
use crate::runner::stream;

/// The methods compared, in plot order (the registered streaming PCA solvers).
pub(super) const METHODS: [PcaMethod; 4] =
    [PcaMethod::Msg, PcaMethod::CappedMsg, PcaMethod::Incremental, PcaMethod::Oja];

/// The solver of `method`, with step `η_t = c/√t` (the data of every experiment here has
/// `E‖x‖² = 1`, the paper's setting), its random start drawn from stream 0 of `seed`.
pub(super) fn solver(
    method: PcaMethod,
    d: usize,
    k: usize,
    c: f64,
    seed: u64,
) -> Result<Box<dyn StreamingPca>, BenchError> {
    let mut rng = stream(seed, 0);
    let step = StepSize::InverseSqrt { c };
    Ok(match method {
        PcaMethod::Msg => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(d, k) }, &mut rng)?),
        PcaMethod::CappedMsg => Box::new(Msg::new(MsgConfig { step, ..MsgConfig::capped(d, k) }, &mut rng)?),
        PcaMethod::Incremental => Box::new(IncrementalPca::new(d, k)?),
        PcaMethod::Oja => Box::new(Oja::new(d, k, step, &mut rng)?),
        other => return Err(BenchError::Invalid(format!("{} is not a streaming PCA method", other.name()))),
    })
}

/// `Σ_{i≤k} λ_i(C) − tr(Uᵀ C U)` for the covariance `C` (d, d), its eigenvalues `top`
/// (nonincreasing) and an orthonormal `U` (d, k') with k' ≤ k.
pub(super) fn suboptimality(c: &Mat<f64>, top: &[f64], u: &Mat<f64>, k: usize) -> f64 {
    let cu = c * u;
    let captured: f64 = (0..u.ncols()).map(|j| (0..u.nrows()).map(|i| u[(i, j)] * cu[(i, j)]).sum::<f64>()).sum();
    top[..k].iter().sum::<f64>() - captured
}

/// One pass of `solver` over `rows` on the solver loop ([`StreamPass`], one sample per
/// iteration), with `score(solver)` as the distance to the target after the samples listed in
/// `marks` (sorted increasing), and `observer` told about every sample.
pub(super) fn pass(
    solver: &mut dyn StreamingPca,
    rows: impl Iterator<Item = Vec<f64>>,
    marks: &[usize],
    mut score: impl FnMut(&dyn StreamingPca) -> f64,
    observer: &mut dyn Observer,
) -> Result<Stop, BenchError> {
    let mut pass = StreamPass::new(solver, rows.map(Ok::<_, Infallible>));
    let target = at_marks(
        marks,
        |p: &StreamPass<'_, dyn StreamingPca, _, Infallible>| p.rows_read(),
        |p: &StreamPass<'_, dyn StreamingPca, _, Infallible>| Ok(score(p.solver())),
    );
    // A stream pass draws nothing: the randomness is in the rows.
    Ok(run_with_target(&mut pass, &mut stream(0, 0), target, observer)?)
}
