//! The progress observer of every iterative solver: a bar on a terminal, nothing otherwise; it
//! keeps the per-iteration figures for the report and the convergence plot either way.

use std::io::IsTerminal;
use std::ops::ControlFlow;

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stolr_solvers::{CheckpointStore, IterationReport, Observer, SolverError, SolverState};

use crate::common::checkpoint::FileStore;

/// Draws a progress bar for `what` (`skpca`, `svrg-bb`, a stream pass, ...) and records the
/// rank, objective and KKT violation of every `every`-th iteration (and the last).
pub struct Progress {
    bar: Option<ProgressBar>,
    every: usize,
    /// `(t, rank, objective, kkt_violation)` of the recorded iterations.
    pub trace: Vec<(usize, usize, Option<f64>, Option<f64>)>,
    /// Time from the start of the solver loop to the end of its last iteration (the
    /// iterations alone: not τ's choice before the loop nor the eigenpairs after it).
    pub loop_time: Option<Duration>,
    last: Option<IterationReport>,
    /// Where the run's checkpoints go (`--checkpoint`); they carry the trace and loop time too.
    checkpoint: Option<FileStore>,
    /// Loop time of the runs before a resume (from the checkpoint).
    earlier_time: Duration,
}

/// Bytes the trace of one recorded iteration takes: the tuple in memory and its line in
/// report.json (about 100 characters).
const TRACE_BYTES_PER_ITERATION: u64 = 128;

impl Progress {
    /// Checks that the trace of `iterations` recorded iterations (`parameter` names them, e.g.
    /// `--iterations`) fits the run's memory budget.
    ///
    /// # Errors
    /// The budget's error naming `parameter` and the estimate.
    pub fn check_trace(
        parameter: &str,
        iterations: usize,
        every: usize,
        memory: stolr_memory::MemoryBudget,
    ) -> anyhow::Result<()> {
        let recorded = (iterations / every.max(1)) as u64;
        memory.check(
            format!("the convergence trace of {parameter} {iterations}"),
            recorded.saturating_mul(TRACE_BYTES_PER_ITERATION),
        )?;
        Ok(())
    }

    /// A bar over `total` iterations (`None`: unknown, a spinner), recording every `every`-th.
    pub fn new(what: &str, total: Option<usize>, every: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(total.map(|t| t as u64), ProgressDrawTarget::stderr());
            let template = if total.is_some() {
                format!("{{spinner}} {what} [{{bar:40}}] {{pos}}/{{len}}  {{msg}}  ({{elapsed}} < {{eta}})")
            } else {
                format!("{{spinner}} {what} {{pos}}  {{msg}}  ({{per_sec}}, {{elapsed}})")
            };
            bar.set_style(ProgressStyle::with_template(&template).expect("static template").progress_chars("=> "));
            bar
        });
        Self {
            bar,
            every: every.max(1),
            trace: Vec::new(),
            loop_time: None,
            last: None,
            checkpoint: None,
            earlier_time: Duration::ZERO,
        }
    }

    /// Saves checkpoints to `store` (no-op for `None`).
    pub fn with_checkpoint(mut self, store: Option<FileStore>) -> Self {
        self.checkpoint = store;
        self
    }

    /// Clears the bar and records the last iteration if it was skipped.
    pub fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(r) = self.last.take()
            && self.trace.last().is_none_or(|l| l.0 != r.t)
        {
            self.trace.push((r.t, r.rank, r.objective, r.kkt_violation));
        }
    }
}

impl Observer for Progress {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        if report.t == 1 || report.t.is_multiple_of(self.every) {
            self.trace.push((report.t, report.rank, report.objective, report.kkt_violation));
            if let Some(bar) = &self.bar {
                bar.set_position(report.t as u64);
                let mut msg = format!("rank {}", report.rank);
                if let Some(k) = report.kkt_violation {
                    msg += &format!("  kkt {k:.2e}");
                }
                bar.set_message(msg);
            }
        }
        self.loop_time = Some(self.earlier_time + report.elapsed);
        self.last = Some(report.clone());
        ControlFlow::Continue(())
    }

    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        if self.checkpoint.is_some() { Some(self) } else { None }
    }
}

/// The file store, with the recorded trace and loop time saved beside the solver's state so
/// that a resumed run's report covers every iteration.
impl CheckpointStore for Progress {
    fn every(&self) -> usize {
        self.checkpoint.as_ref().map_or(usize::MAX, CheckpointStore::every)
    }

    fn load(&mut self) -> Result<Option<SolverState>, SolverError> {
        let Some(store) = &mut self.checkpoint else { return Ok(None) };
        let Some(state) = store.load()? else { return Ok(None) };
        let t = state.usizes("progress-t", None, None)?;
        let rank = state.usizes("progress-rank", Some(t.len()), None)?;
        let objective = state.vector("progress-objective", Some(t.len()))?;
        let kkt = state.vector("progress-kkt", Some(t.len()))?;
        let some = |v: f64| (!v.is_nan()).then_some(v);
        self.trace = (0..t.len()).map(|i| (t[i], rank[i], some(objective[i]), some(kkt[i]))).collect();
        let seconds = state.f64("progress-seconds")?;
        self.earlier_time = Duration::try_from_secs_f64(seconds).unwrap_or_default();
        Ok(Some(state))
    }

    fn save(&mut self, t: usize, mut state: SolverState) -> Result<(), SolverError> {
        state.put_usizes("progress-t", &self.trace.iter().map(|r| r.0).collect::<Vec<_>>());
        state.put_usizes("progress-rank", &self.trace.iter().map(|r| r.1).collect::<Vec<_>>());
        state.put_vector("progress-objective", &self.trace.iter().map(|r| r.2.unwrap_or(f64::NAN)).collect::<Vec<_>>());
        state.put_vector("progress-kkt", &self.trace.iter().map(|r| r.3.unwrap_or(f64::NAN)).collect::<Vec<_>>());
        state.put_f64("progress-seconds", self.loop_time.unwrap_or(self.earlier_time).as_secs_f64());
        match &mut self.checkpoint {
            Some(store) => store.save(t, state),
            None => Ok(()),
        }
    }

    fn stop_requested(&self) -> bool {
        self.checkpoint.as_ref().is_some_and(CheckpointStore::stop_requested)
    }
}
