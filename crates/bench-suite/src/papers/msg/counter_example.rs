//! Section 5.2: the 2-D counter-example. `x = √3 e₁` with probability 1/3, `√2 e₂` with
//! probability 2/3 (the top eigenvector is `e₂`), rescaled by `1/√(7/3)` so that `E‖x‖² = 1`,
//! which changes no method's direction. How often does each method end on the wrong axis?

use std::time::Instant;

use rand::RngExt;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_solvers::{IncrementalPca, Msg, MsgConfig, Named, PcaMethod, StreamingPca};

use super::common::pass;
use crate::runner::stream;
use crate::{BenchError, ResultsFile, RunRecord};

/// One method's rate of ending on the wrong axis.
pub(super) struct CounterRow {
    pub(super) label: &'static str,
    pub(super) runs: usize,
    pub(super) samples: usize,
    pub(super) wrong_rate: f64,
    /// What the paper says.
    pub(super) paper: &'static str,
}

/// One case of the counter-example: the solver, its label, the runs, the steps per run, the cap
/// of capped MSG and the paper's value.
type Case = (PcaMethod, &'static str, usize, usize, Option<usize>, &'static str);

/// Runs every method `runs` times (run `s` draws from stream 0 of seed `s`, the solver's start
/// included) and records the rates in `results`.
pub(super) fn run(quick: bool, results: &mut ResultsFile) -> Result<Vec<CounterRow>, BenchError> {
    let runs_incremental = if quick { 2000 } else { 20_000 };
    let runs_msg = if quick { 300 } else { 2000 };
    let (t_incremental, t_msg) = (200, 5000);
    let scale = (3.0_f64 / 7.0).sqrt();
    let draw = |rng: &mut Xoshiro256PlusPlus| -> [f64; 2] {
        if rng.random::<f64>() < 1.0 / 3.0 { [3f64.sqrt() * scale, 0.0] } else { [0.0, 2f64.sqrt() * scale] }
    };
    let incremental = PcaMethod::Incremental;
    // (solver, label, runs, steps, cap, the paper's value)
    let cases: [Case; 4] = [
        (incremental, incremental.name(), runs_incremental, t_incremental, None, "5/9 = 0.556"),
        (PcaMethod::CappedMsg, "capped MSG, K = k = 1", runs_msg, t_msg, Some(1), "(like incremental)"),
        (PcaMethod::CappedMsg, "capped MSG, K = k + 1 = 2", runs_msg, t_msg, Some(2), "never stuck"),
        (PcaMethod::Msg, "MSG", runs_msg, t_msg, None, "never stuck"),
    ];
    let mut rows = Vec::new();
    for (method, label, runs, t_max, cap, paper) in cases {
        let started = Instant::now();
        let mut wrong = 0;
        for seed in 0..runs as u64 {
            let mut rng = stream(seed, 0);
            let mut s: Box<dyn StreamingPca> = match (method, cap) {
                (PcaMethod::Incremental, _) => Box::new(IncrementalPca::new(2, 1)?),
                (_, Some(cap)) => Box::new(Msg::new(MsgConfig { cap: Some(cap), ..MsgConfig::msg(2, 1) }, &mut rng)?),
                _ => Box::new(Msg::new(MsgConfig::msg(2, 1), &mut rng)?),
            };
            let samples = (0..t_max).map(|_| draw(&mut rng).to_vec());
            pass(s.as_mut(), samples, &[], |_| f64::NAN, &mut ())?;
            let u = s.subspace();
            if u[(0, 0)].abs() > u[(1, 0)].abs() {
                wrong += 1;
            }
        }
        let rate = wrong as f64 / runs as f64;
        let mut run = RunRecord::new("2-D counter-example", label)
            .with_parameter("runs", runs)
            .with_parameter("samples_per_run", t_max);
        run.set_scalar("wrong_axis_rate", rate);
        run.time_seconds = started.elapsed().as_secs_f64();
        results.runs.push(run);
        rows.push(CounterRow { label, runs, samples: t_max, wrong_rate: rate, paper });
    }
    Ok(rows)
}
