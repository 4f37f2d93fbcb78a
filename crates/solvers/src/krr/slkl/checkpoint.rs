//! SLKL's state at a checkpoint ([`IterativeSolver::save_state`](crate::IterativeSolver::save_state)
//! and `restore_state` of [`Slkl`]): everything its next coordinate updates read, bit for bit.

use super::Slkl;
use crate::{SolverError, SolverState};

impl Slkl<'_> {
    /// Saves ν, the weights μ (length `M`), the active landmarks in their Woodbury order, the
    /// Woodbury state's changing parts ([`WoodburyParts`](stolr_lowrank::WoodburyParts): the
    /// active kernel columns `(n, p)` (this rank's rows when sharded), Σ `(p, p)`, ...), the sweep orders, the cursor and the
    /// epoch and KKT bookkeeping. The landmarks and their kernel columns are rebuilt by
    /// [`Slkl::new`] from the same seed.
    pub(super) fn save_checkpoint(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_f64("slkl-nu", self.config.nu);
        state.put_bool("slkl-intercept", self.centring.is_some());
        state.put_vector("slkl-mu", &self.mu);
        state.put_usizes("slkl-active", &self.active);
        let parts = self.state.parts();
        state.put_matrix("slkl-v", parts.v.as_ref());
        state.put_vector("slkl-d", &parts.d);
        state.put_matrix("slkl-sigma", parts.sigma.as_ref());
        state.put_vector("slkl-vty", &parts.vty);
        state.put_vector("slkl-beta", &parts.beta);
        state.put_u64s("slkl-generation", &[parts.generation]);
        state.put_usize("slkl-updates_since_refresh", parts.updates_since_refresh);
        state.put_usizes("slkl-order", &self.order);
        state.put_usizes("slkl-active_order", &self.active_order);
        state.put_bool("slkl-sweep_full", self.sweep_full);
        state.put_usize("slkl-active_streak", self.active_streak);
        state.put_bool("slkl-has_last_sweep", self.last_sweep.is_some());
        let (last_full, last_violation) = self.last_sweep.unwrap_or((false, 0.0));
        state.put_bool("slkl-last_sweep_full", last_full);
        state.put_f64("slkl-last_sweep_violation", last_violation);
        state.put_usize("slkl-cursor", self.cursor);
        state.put_f64("slkl-epoch_violation", self.epoch_violation);
        state.put_opt_f64("slkl-last_epoch_violation", self.last_epoch_violation);
        state.put_usize("slkl-iterations", self.iterations);
        state.put_usize("slkl-epochs", self.epochs);
        state.put_usize("slkl-run_start_epoch", self.run_start_epoch);
        Ok(())
    }

    /// Puts back what [`Slkl::save_checkpoint`] wrote, after checking ν, the shapes, the
    /// active set and the cursor.
    pub(super) fn restore_checkpoint(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let m = self.mu.len();
        let nu = state.f64("slkl-nu")?;
        if nu.to_bits() != self.config.nu.to_bits() {
            return Err(SolverError::Checkpoint {
                reason: format!("it was written with nu = {nu}, this run has nu = {}", self.config.nu),
            });
        }
        // Checkpoints from before the intercept was a model term have no flag; their columns
        // were never centred.
        let saved_intercept = state.has("slkl-intercept") && state.bool("slkl-intercept")?;
        if saved_intercept != self.centring.is_some() {
            return Err(SolverError::Checkpoint {
                reason: format!(
                    "it was written {} an intercept (centred kernel columns), this run has {}",
                    if saved_intercept { "with" } else { "without" },
                    if self.centring.is_some() { "one" } else { "none" }
                ),
            });
        }
        let mu = state.vector("slkl-mu", Some(m))?;
        if mu.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(SolverError::Checkpoint { reason: "the saved weights are not finite and nonnegative".into() });
        }
        let active = state.usizes("slkl-active", None, Some(m))?;
        let mut position = vec![None; m];
        for (j, &l) in active.iter().enumerate() {
            if position[l].replace(j).is_some() {
                return Err(SolverError::Checkpoint { reason: format!("landmark {l} is active twice") });
            }
        }
        let p = active.len();
        let parts = stolr_lowrank::WoodburyParts {
            v: state.matrix("slkl-v", Some((self.shard.rows, p)))?,
            d: state.vector("slkl-d", Some(p))?,
            sigma: state.matrix("slkl-sigma", Some((p, p)))?,
            vty: state.vector("slkl-vty", Some(p))?,
            beta: state.vector("slkl-beta", Some(p))?,
            generation: state.u64s("slkl-generation", Some(1))?[0],
            updates_since_refresh: state.usize("slkl-updates_since_refresh")?,
        };
        let order = state.usizes("slkl-order", Some(m), Some(m))?;
        let active_order = state.usizes("slkl-active_order", None, Some(m))?;
        let cursor = state.usize("slkl-cursor")?;
        let sweep_full = state.bool("slkl-sweep_full")?;
        if cursor > if sweep_full { m } else { active_order.len() } {
            return Err(SolverError::Checkpoint { reason: format!("the saved cursor {cursor} is past its sweep") });
        }
        let last_sweep = if state.bool("slkl-has_last_sweep")? {
            Some((state.bool("slkl-last_sweep_full")?, state.f64("slkl-last_sweep_violation")?))
        } else {
            None
        };
        let (epochs, run_start_epoch) = (state.usize("slkl-epochs")?, state.usize("slkl-run_start_epoch")?);
        if run_start_epoch > epochs {
            return Err(SolverError::Checkpoint { reason: "the saved epoch counts are inconsistent".into() });
        }
        self.state
            .restore_parts(parts)
            .map_err(|e| SolverError::Checkpoint { reason: format!("the saved Woodbury state: {e}") })?;
        self.mu = mu;
        self.position = position;
        self.active = active;
        self.order = order;
        self.active_order = active_order;
        self.sweep_full = sweep_full;
        self.active_streak = state.usize("slkl-active_streak")?;
        self.last_sweep = last_sweep;
        self.cursor = cursor;
        self.epoch_violation = state.f64("slkl-epoch_violation")?;
        self.last_epoch_violation = state.opt_f64("slkl-last_epoch_violation")?;
        self.iterations = state.usize("slkl-iterations")?;
        self.epochs = epochs;
        self.run_start_epoch = run_start_epoch;
        Ok(())
    }
}
