//! SKPCA: kernel PCA by stochastic proximal gradient descent with singular value shrinkage.

use faer::Mat;
use rand::Rng;
use stolr_comm::{Communicator, SingleProcess};
use stolr_estimators::{Factors, KernelSampler};
use stolr_lowrank::{
    Eigenpairs, LowRank, Orthogonalization, SymLowRank, frobenius, shrink_general_sharded, shrink_psd,
    shrink_psd_in_place_sharded,
};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::{IterativeSolver, SolverError, SolverState, StepReport, Stop};

/// Configuration of [`Skpca`]; validated once by [`Skpca::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct SkpcaConfig {
    /// Shrinkage threshold τ > 0 (the paper's λ): the solver converges to
    /// `K̂ = Σ_{λ_i > τ} (λ_i − τ) u_i u_iᵀ`, so it recovers the eigenpairs of `K` whose
    /// eigenvalues exceed τ. Same units as the eigenvalues of the `n × n` kernel matrix.
    pub tau: f64,
    /// Number of iterations `T ≥ 1`.
    pub iterations: usize,
    /// Stop when `rank(Z_t)` exceeds this (memory is `O(n·(rank + a))`); `None`: no cap.
    pub max_rank: Option<usize>,
    /// How the step re-factors `[U, ζ]`: by default ([`Orthogonalization::RayleighRitz`]) a
    /// Rayleigh–Ritz step on the Gram matrix, in place (PSD iterates; a general iterate then
    /// uses block Gram–Schmidt); block Gram–Schmidt or a fresh QR on request.
    pub orthogonalization: Orthogonalization,
}

impl SkpcaConfig {
    /// The rank cap of a front end's SKPCA run (the CLI's `--max-rank`, Python's): 2000.
    pub const DEFAULT_MAX_RANK: usize = 2000;
}

impl Default for SkpcaConfig {
    fn default() -> Self {
        Self { tau: 10.0, iterations: 1000, max_rank: None, orthogonalization: Orthogonalization::default() }
    }
}

/// The iterate `Z_t`, kept factored: symmetric PSD when every draw is (RFF, random Maclaurin),
/// general otherwise (column sampling).
#[derive(Debug, Clone, PartialEq)]
pub enum Iterate {
    /// `Z_t = U diag(s) Uᵀ`.
    Psd(SymLowRank),
    /// `Z_t = U diag(s) Vᵀ`.
    General(LowRank),
}

impl Iterate {
    /// `rank(Z_t)`.
    pub fn rank(&self) -> usize {
        match self {
            Iterate::Psd(z) => z.rank(),
            Iterate::General(z) => z.rank(),
        }
    }

    /// `‖Z_t − K̂‖_F²` for a target `K̂` of the same size, in `O(n·rank·rank(K̂))`.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the sizes differ.
    pub fn distance_sq(&self, target: &SymLowRank) -> Result<f64, SolverError> {
        Ok(match self {
            Iterate::Psd(z) => frobenius::sym_distance_sq(z, target)?,
            Iterate::General(z) => frobenius::distance_sq(z, target)?,
        })
    }
}

/// Stochastic kernel PCA (SKPCA): stochastic proximal gradient descent on
/// `min_Z ½ E‖Z − ξ‖_F² + τ‖Z‖_*`, whose solution is the shrunk kernel matrix
/// `K̂ = D_τ[K]`, fed by unbiased low-rank estimators `ξ_t = ζ_t χ_tᵀ` of `K` (or of `HKH`).
///
/// Step `t` (1-based): `η_t = 2/t`, `Z_{t+1} = D_{η_t τ}[(1 − η_t) Z_t + η_t ξ_t]`, `Z_1 = 0`,
/// with the iterate always factored (see [`stolr_lowrank::shrink_psd_in_place`],
/// [`stolr_lowrank::shrink_psd`] and [`stolr_lowrank::shrink_general`]). Memory
/// `O(n·(a + b_t))` with `a` the rank of a draw and `b_t = rank(Z_t)`; time per step
/// `O(n·(d·a + (a + b_t)²) + (a + b_t)³)`. On the PSD path with the default
/// [`Orthogonalization::RayleighRitz`], the draw is written into one `(n, a)` buffer reused
/// from step to step and the factor `U` is updated in place, so a step allocates nothing of
/// size `n` (except when the rank outgrows the reserved columns of `U`); see
/// [`Skpca::check_memory`] for the estimate.
/// The last iterate converges at rate `O(log log T / T)` (Theorem 1).
///
/// The solver owns its sampler; each [`step`](IterativeSolver::step) draws one estimate, and
/// [`crate::run`] drives it (stopping at `iterations`, or with [`Stop::RankCapReached`]).
///
/// # References
/// \[SKPCA\], Algorithm 1, Theorem 1; docs/derivations.md §2.2–§2.4.
pub struct Skpca<'a> {
    config: SkpcaConfig,
    sampler: Box<dyn KernelSampler + 'a>,
    iterate: Iterate,
    /// The last draw; its storage is reused by the next one when the sampler allows.
    draw: Factors,
    t: usize,
    /// The ranks the rows are sharded across ([`SingleProcess`] unless [`Skpca::sharded`]),
    /// and the global index of this rank's first row.
    comm: &'a dyn Communicator,
    first_row: usize,
    /// The global number of rows `n` (this rank's `sampler.n()` unless sharded).
    total_rows: usize,
}

impl std::fmt::Debug for Skpca<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skpca")
            .field("config", &self.config)
            .field("sampler", &self.sampler.name())
            .field("t", &self.t)
            .field("rank", &self.iterate.rank())
            .finish()
    }
}

impl<'a> Skpca<'a> {
    /// A solver for the `n × n` kernel matrix that `sampler` estimates, starting at `Z_1 = 0`.
    /// The iterate is kept symmetric PSD (`U diag(s) Uᵀ`) when the sampler's draws are
    /// ([`KernelSampler::is_symmetric_psd`]), general (`U diag(s) Vᵀ`) otherwise.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if `tau` is not positive and finite, `iterations == 0`,
    /// `max_rank == Some(0)` or the sampler has `n == 0`.
    pub fn new(config: SkpcaConfig, sampler: Box<dyn KernelSampler + 'a>) -> Result<Self, SolverError> {
        let n = sampler.n();
        let symmetric_psd = sampler.is_symmetric_psd();
        if !(config.tau.is_finite() && config.tau > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "tau",
                reason: format!("the shrinkage threshold must be positive and finite, got {}", config.tau),
            });
        }
        if config.iterations == 0 {
            return Err(SolverError::InvalidConfig { name: "iterations", reason: "need at least 1 iteration".into() });
        }
        if config.max_rank == Some(0) {
            return Err(SolverError::InvalidConfig {
                name: "max_rank",
                reason: "the rank cap must be at least 1".into(),
            });
        }
        if n == 0 {
            return Err(SolverError::InvalidConfig { name: "n", reason: "the kernel matrix is empty".into() });
        }
        let iterate =
            if symmetric_psd { Iterate::Psd(SymLowRank::zeros(n)) } else { Iterate::General(LowRank::zeros(n, n)) };
        Ok(Self {
            config,
            sampler,
            iterate,
            draw: Factors { zeta: Mat::new(), chi: None },
            t: 0,
            comm: &SingleProcess,
            first_row: 0,
            total_rows: n,
        })
    }

    /// Runs the solver on rows sharded across the ranks of `comm`: the sampler holds this
    /// rank's rows, global rows `first_row..first_row + n_local`, and draws its random choices
    /// (the frequencies of random Fourier features, the vectors of random Maclaurin features,
    /// the sampled column indices) from the seed shared by every rank, so every rank draws the
    /// same ones. The sampler must be a sharded one: its factors this rank's rows of the draw
    /// one process makes (random features need nothing more; column sampling is
    /// [`stolr_estimators::ColumnSampling::sharded`], centring
    /// [`stolr_estimators::Centered::sharded`]).
    ///
    /// **Scheme, symmetric PSD draws** (random features). Each step draws `ζ_t`'s local rows
    /// `(n_local, a)`; the Gram matrix of `[U, ζ_t]` is the one product over the rows, formed
    /// per rank and added in rank order ([`stolr_lowrank::shrink_psd_in_place_sharded`]:
    /// `a·b + a(a+1)/2` doubles per step, all `m(m+1)/2` on one step in eight); the small
    /// eigendecomposition is replicated and `U⁺ = [U, ζ] Y` is formed locally.
    ///
    /// **Scheme, general draws** (column sampling, `U diag(s) Vᵀ`). The block Gram–Schmidt of
    /// `ζ_t` against `U` and of `χ_t` against `V` adds its products over the rows in rank order
    /// ([`stolr_lowrank::shrink_general_sharded`]: about `2·(2ab + a(a+1))` doubles per step,
    /// a TSQR's `≤ a²` per rank when the remainder is rank-deficient), the small SVD is
    /// replicated and the new factors are formed locally; the final eigenpairs of `(Z + Zᵀ)/2`
    /// likewise ([`stolr_lowrank::LowRank::symmetric_eigenpairs_sharded`]).
    ///
    /// The eigenvector signs are fixed over whole columns. With the same seed, every number of
    /// ranks gives the same iterate up to the order in which the per-rank products are added
    /// (see `docs/distributed.md` for the measured agreement); one rank gives the bits of the
    /// single-process solver. Collective (one sum of the row counts).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if the orthogonalization is not
    /// [`Orthogonalization::RayleighRitz`] on several ranks (the PSD QR paths orthogonalize
    /// `n`-sized blocks locally).
    pub fn sharded(mut self, comm: &'a dyn Communicator, first_row: usize) -> Result<Self, SolverError> {
        if comm.size() > 1 {
            if self.config.orthogonalization != Orthogonalization::RayleighRitz {
                return Err(SolverError::InvalidConfig {
                    name: "orthogonalization",
                    reason: "only the Rayleigh–Ritz step is distributed".into(),
                });
            }
            let mut total = [self.sampler.n() as f64];
            comm.all_reduce_sum(&mut total);
            self.total_rows = total[0] as usize;
        }
        self.comm = comm;
        self.first_row = first_row;
        Ok(self)
    }

    /// Estimated bytes held by the solver at its largest, besides its sampler's own buffers:
    /// [`skpca_memory_estimate`] for this solver's `n`, draw rank `a` (the sampler's
    /// [`draw_rank`](KernelSampler::draw_rank)), iterate symmetry and configuration.
    pub fn memory_estimate(&self) -> u64 {
        let psd = matches!(self.iterate, Iterate::Psd(_));
        skpca_memory_estimate(self.sampler.n(), self.total_rows, self.sampler.draw_rank(), psd, &self.config)
    }

    /// Checks [`Skpca::memory_estimate`] against `memory` before the run starts (the sampler
    /// already exists: [`check_skpca_memory`] checks before it is built).
    ///
    /// # Errors
    /// [`SolverError::Memory`] naming `max_rank` and the features per draw when the estimate
    /// exceeds the budget.
    pub fn check_memory(&self, memory: MemoryBudget) -> Result<(), SolverError> {
        let psd = matches!(self.iterate, Iterate::Psd(_));
        let (rows, n, a) = (self.sampler.n(), self.total_rows, self.sampler.draw_rank());
        check_skpca_memory(rows, n, a, psd, &self.config, 0, memory)
    }

    /// The configuration.
    pub fn config(&self) -> &SkpcaConfig {
        &self.config
    }

    /// Iterations done so far.
    pub fn iterations_done(&self) -> usize {
        self.t
    }

    /// The current iterate `Z_{t+1}`.
    pub fn iterate(&self) -> &Iterate {
        &self.iterate
    }

    /// One SPGD step: `Z_{t+1} = D_{η_t τ}[(1 − η_t) Z_t + η_t ξ_t]` with `η_t = 2/t`
    /// (\[SKPCA\], Algorithm 1, lines 3–5).
    ///
    /// # Errors
    /// [`SolverError::SamplerMismatch`] if a PSD iterate receives a non-symmetric draw; sampler
    /// errors; [`SolverError::LowRank`] if a small factorization fails. On error the iterate is
    /// unchanged.
    fn advance(&mut self, rng: &mut dyn Rng) -> Result<(), SolverError> {
        let t = self.t + 1;
        let eta = 2.0 / t as f64;
        let threshold = eta * self.config.tau;
        let how = self.config.orthogonalization;
        self.sampler.sample_into(rng, &mut self.draw)?;
        let draw = &mut self.draw;
        match (&mut self.iterate, draw.chi.is_some()) {
            (Iterate::Psd(_), true) => {
                return Err(SolverError::SamplerMismatch {
                    reason: "a PSD iterate received a non-symmetric draw".into(),
                });
            }
            (Iterate::Psd(z), false) if how == Orthogonalization::RayleighRitz => {
                shrink_psd_in_place_sharded(z, draw.zeta.as_ref(), eta, threshold, self.comm)?;
            }
            (Iterate::Psd(z), false) => {
                *z = shrink_psd(z, std::mem::replace(&mut draw.zeta, Mat::new()), eta, threshold, how)?;
            }
            (Iterate::General(z), _) => {
                let zeta = std::mem::replace(&mut draw.zeta, Mat::new());
                let chi = draw.chi.take().unwrap_or_else(|| zeta.clone());
                *z = shrink_general_sharded(z, zeta, chi, eta, threshold, how, self.comm, self.total_rows)?;
            }
        }
        self.t = t;
        Ok(())
    }

    /// The sampler's name (`rff`, `columns`, ...).
    pub fn sampler_name(&self) -> &'static str {
        self.sampler.name()
    }

    /// The recovered eigenpairs of the kernel matrix: the positive eigenpairs `(σ_i, u_i)` of
    /// `(Z + Zᵀ)/2`, returned as `(σ_i + τ, u_i)`; eigenvalues nonincreasing, eigenvectors
    /// `(n, r)` orthonormal with fixed signs, `r = rank(Z)` for a PSD iterate.
    ///
    /// # Errors
    /// [`SolverError::RankCollapsed`] if the iterate has rank 0 (τ is above every eigenvalue);
    /// [`SolverError::LowRank`] if the small eigendecomposition fails.
    ///
    /// # References
    /// \[SKPCA\], Algorithm 1, last lines; docs/derivations.md §2.4 (positive eigenvalues only).
    pub fn eigenpairs(&self) -> Result<Eigenpairs, SolverError> {
        let mut pairs = match &self.iterate {
            Iterate::Psd(z) => z.eigenpairs(),
            Iterate::General(z) if self.comm.size() == 1 => z.symmetric_eigenpairs()?,
            Iterate::General(z) => z.symmetric_eigenpairs_sharded(self.comm, self.total_rows)?,
        };
        if pairs.rank() == 0 {
            return Err(SolverError::RankCollapsed { tau: self.config.tau, iterations: self.t });
        }
        for v in &mut pairs.values {
            *v += self.config.tau;
        }
        if self.comm.size() == 1 {
            pairs.fix_signs();
        } else {
            pairs.fix_signs_sharded(self.comm, self.first_row);
        }
        Ok(pairs)
    }
}

impl IterativeSolver for Skpca<'_> {
    /// One SPGD step (\[SKPCA\], Algorithm 1, lines 3–5); reports `rank(Z_{t+1})` and stops at
    /// `iterations` or when the rank exceeds `max_rank`. Each step reads every row once
    /// (`samples_seen` grows by `n`).
    fn step(&mut self, rng: &mut dyn Rng) -> Result<StepReport, SolverError> {
        self.advance(rng)?;
        let rank = self.iterate.rank();
        let stop = match self.config.max_rank {
            Some(cap) if rank > cap => Some(Stop::RankCapReached { rank, cap }),
            _ => (self.t >= self.config.iterations).then_some(Stop::MaxIterations),
        };
        Ok(StepReport { t: self.t, rank, samples_seen: self.t * self.sampler.n(), stop, ..Default::default() })
    }

    fn finished(&self) -> Option<Stop> {
        (self.t >= self.config.iterations).then_some(Stop::MaxIterations)
    }

    /// Saves `t` and the iterate's factors: `U` `(n, b)` and `s` for a PSD iterate, with the
    /// carried `UᵀU` `(b, b)` and its carry count when known (the next steps' bits depend on
    /// it); `U`, `s`, `V` for a general one.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_usize("skpca-t", self.t);
        match &self.iterate {
            Iterate::Psd(z) => {
                state.put_bool("skpca-psd", true);
                state.put_matrix("skpca-u", z.u());
                state.put_vector("skpca-s", z.s());
                if let Some((gram, carried)) = z.carried_gram() {
                    state.put_matrix("skpca-gram", gram);
                    state.put_usize("skpca-gram_carried", carried as usize);
                }
            }
            Iterate::General(z) => {
                state.put_bool("skpca-psd", false);
                state.put_matrix("skpca-u", z.u());
                state.put_vector("skpca-s", z.s());
                state.put_matrix("skpca-v", z.v());
            }
        }
        Ok(())
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let n = self.sampler.n();
        let psd = state.bool("skpca-psd")?;
        if psd != matches!(self.iterate, Iterate::Psd(_)) {
            return Err(SolverError::Checkpoint {
                reason: "the saved iterate and this sampler differ in symmetry (another --sampler)".into(),
            });
        }
        let t = state.usize("skpca-t")?;
        let s = state.vector("skpca-s", None)?;
        let b = s.len();
        let u = state.matrix("skpca-u", Some((n, b)))?;
        let bad =
            |e: stolr_lowrank::LowRankError| SolverError::Checkpoint { reason: format!("the saved iterate: {e}") };
        self.iterate = if psd {
            let mut z = SymLowRank::new(u, s).map_err(bad)?;
            if state.has("skpca-gram") {
                let carried = u32::try_from(state.usize("skpca-gram_carried")?)
                    .map_err(|_| SolverError::Checkpoint { reason: "the carried Gram count is too large".into() })?;
                z.set_carried_gram(Some((state.matrix("skpca-gram", Some((b, b)))?, carried))).map_err(bad)?;
            }
            Iterate::Psd(z)
        } else {
            let v = state.matrix("skpca-v", Some((n, b)))?;
            Iterate::General(LowRank::new(u, s, v).map_err(bad)?)
        };
        self.t = t;
        Ok(())
    }
}

/// Rows per partial Gram matrix in `stolr_lowrank`'s Gram product of `[U, ζ]` (its
/// `GRAM_GROUP_ROWS`), and the most partials it holds at once (`GRAM_MAX_GROUPS`): the
/// partials are formed for every group of rows, then added.
const GRAM_GROUP_ROWS: usize = 4096;
const GRAM_MAX_GROUPS: usize = 32;

/// Estimated bytes SKPCA holds at its largest for `n` rows and draws of `a` columns (`psd`:
/// the draws are symmetric PSD, as random Fourier and Maclaurin features; column sampling is
/// not), besides the sampler's own buffers. With `r` the rank cap `max_rank` (without one,
/// `iterations · a`), at most `n`, and `m = r + a` the columns of `[U, ζ]`:
///
/// - `n`-sized blocks: on the PSD Rayleigh–Ritz path the factor `U` with up to `r + a`
///   reserved columns and the draw buffer, `8n·(r + 2a)`; on the other paths about three
///   (PSD) or six (general) `n × (r + a)` blocks besides the draw (and `χ`), `8n·(3m + 2a)` or
///   `8n·(6m + 2a)`;
/// - `m × m` matrices: on the Rayleigh–Ritz path the Gram matrix of `[U, ζ]` as one partial
///   per group of 4096 rows (at most 32) held at once, the scaled core, its eigenvectors
///   (faer's and the reordered copy), faer's workspace (about `m²`), `Y` and the carried Gram
///   matrix (a symmetric copy and `GY`): `(groups + 7)·8m²`; on the QR paths the
///   coefficients, their scaled copy, the product and its SVD or eigendecomposition with
///   workspace: `10·8m²`.
///
/// The sizes saturate at `u64::MAX` instead of wrapping (an absurd `features` must fail the
/// check, not pass it). At `n = 200`, `features = 10 000` (RFF: `a = 20 000`) the Gram
/// matrices alone are `8·20 200² ≈ 3.3 GB` each.
///
/// On rows split across processes, `rows` is this process's share (the `n`-sized blocks are
/// its rows) and `n` the rows of every process (the rank, hence every `m × m` matrix, is capped
/// by it); on one process `rows = n`.
pub fn skpca_memory_estimate(rows: usize, n: usize, a: usize, psd: bool, config: &SkpcaConfig) -> u64 {
    let r = config.max_rank.unwrap_or(config.iterations.saturating_mul(a)).min(n);
    let m = r.saturating_add(a);
    let rayleigh_ritz = psd && config.orthogonalization == Orthogonalization::RayleighRitz;
    let cols = match (psd, rayleigh_ritz) {
        (true, true) => r.saturating_add(a.saturating_mul(2)),
        (true, false) => m.saturating_mul(3).saturating_add(a.saturating_mul(2)),
        (false, _) => m.saturating_mul(6).saturating_add(a.saturating_mul(2)),
    };
    let small = if rayleigh_ritz { rows.div_ceil(GRAM_GROUP_ROWS).clamp(1, GRAM_MAX_GROUPS) + 7 } else { 10 };
    f64_bytes(&[rows, cols]).saturating_add(f64_bytes(&[small, m, m]))
}

/// Checks SKPCA's memory before anything of its size is allocated (before the sampler is
/// built, since a sampler allocates its own buffers at construction): [`skpca_memory_estimate`]
/// for `rows` rows here of the `n` of every process (`rows = n` on one process) and draws of
/// `a` columns, plus `sampler_bytes` (the sampler's own buffers, e.g. the `d × features`
/// frequencies of random Fourier features), against `memory`.
///
/// # Errors
/// [`SolverError::Memory`] naming `n`, the rank cap, the columns per draw and the size of the
/// `(rank + a)²` Gram matrix when the estimate exceeds the budget.
#[allow(clippy::too_many_arguments)]
pub fn check_skpca_memory(
    rows: usize,
    n: usize,
    a: usize,
    psd: bool,
    config: &SkpcaConfig,
    sampler_bytes: u64,
    memory: MemoryBudget,
) -> Result<(), SolverError> {
    let cap = match config.max_rank {
        Some(r) => format!("max_rank = {r}, so rank ≤ {}", r.min(n)),
        None => {
            format!("no max_rank, so rank ≤ min(n, iterations × a) = {}", config.iterations.saturating_mul(a).min(n))
        }
    };
    let r = config.max_rank.unwrap_or(config.iterations.saturating_mul(a)).min(n);
    let m = r.saturating_add(a);
    let needed = skpca_memory_estimate(rows, n, a, psd, config).saturating_add(sampler_bytes);
    Ok(memory.check(
        format!(
            "SKPCA with a = {a} columns per draw (from the features) and n = {n} rows ({cap}): its n × (rank + a) \
             factor and draws, the sampler's buffers and the (rank + a)² = {m}² Gram matrix of [U, ζ] with its \
             eigendecomposition ({} each; fewer features per draw or a lower max_rank need less)",
            stolr_memory::format_bytes(f64_bytes(&[m, m]))
        ),
        needed,
    )?)
}

/// The SKPCA target `K̂ = D_τ[K] = Σ_{λ_i > τ} (λ_i − τ) u_i u_iᵀ` from exact eigenpairs of `K`
/// (nonincreasing). The pairs must include every eigenvalue above τ; pairs at or below τ are
/// dropped.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `tau` is not positive and finite, or if the smallest given
/// eigenvalue is still above τ (then `K̂` may be missing components).
pub fn shrunk_target(pairs: &Eigenpairs, tau: f64) -> Result<SymLowRank, SolverError> {
    if !(tau.is_finite() && tau > 0.0) {
        return Err(SolverError::InvalidConfig {
            name: "tau",
            reason: format!("must be positive and finite, got {tau}"),
        });
    }
    let keep = pairs.values.iter().take_while(|&&v| v > tau).count();
    if keep == pairs.rank() && keep < pairs.dim() {
        return Err(SolverError::InvalidConfig {
            name: "tau",
            reason: format!(
                "all {keep} given eigenvalues exceed tau = {tau}; compute more eigenpairs to build the target"
            ),
        });
    }
    let values = pairs.values[..keep].iter().map(|v| v - tau).collect();
    Ok(SymLowRank::new(pairs.vectors.subcols(0, keep).to_owned(), values)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KernelPca, KpcaSolver, SamplerKind};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_estimators::Kernel;

    fn rows(n: usize, d: usize) -> Mat<f64> {
        Mat::from_fn(n, d, |i, j| ((i * d + j) as f64 * 0.37).sin())
    }

    fn fit(
        x: &Mat<f64>,
        config: SkpcaConfig,
        sampler: SamplerKind,
        features: usize,
        memory: MemoryBudget,
    ) -> Result<(), SolverError> {
        let kernel = match sampler {
            SamplerKind::Maclaurin => Kernel::polynomial(1.0, 1.0, 2),
            _ => Kernel::gaussian(1.0),
        };
        let params = KernelPca {
            rank: None,
            memory,
            ..KernelPca::new(1, kernel, KpcaSolver::Skpca { config, sampler, features })
        };
        params.fit_prepared(x.as_ref(), None, &mut Xoshiro256PlusPlus::seed_from_u64(1), &mut ()).map(drop)
    }

    /// The Gram matrix of [U, ζ], (rank + a)² doubles, is in the estimate: at n = 200 and
    /// 10⁵ random Fourier features (a = 2·10⁵) it is 320 GB, which the n-sized buffers alone
    /// (320 MB) did not show; the fit is refused before the sampler allocates anything, for
    /// every sampler, instead of panicking or exhausting the memory.
    #[test]
    fn the_gram_matrix_of_a_huge_draw_is_refused_before_any_allocation() {
        let x = rows(200, 5);
        let config = SkpcaConfig { tau: 1.0, iterations: 1, max_rank: Some(2000), ..Default::default() };
        let a = 200_000;
        let estimate = skpca_memory_estimate(200, 200, a, true, &config);
        assert!(estimate >= f64_bytes(&[200 + a, 200 + a]), "{estimate}");
        // A process holding 200 of 10⁶ rows: the rank (and every m × m matrix) is capped by
        // all the rows, not by this process's 200.
        let config = SkpcaConfig { tau: 1.0, iterations: 100, max_rank: None, ..Default::default() };
        let shard = skpca_memory_estimate(200, 1_000_000, 20, true, &config);
        assert!(shard >= f64_bytes(&[2020, 2020]), "{shard}");
        assert!(shard > 10 * skpca_memory_estimate(200, 200, 20, true, &config));
        for sampler in SamplerKind::ALL {
            for features in [100_000, 1 << 40, usize::MAX] {
                match fit(&x, config.clone(), sampler, features, MemoryBudget::bytes(1 << 30)) {
                    Err(SolverError::Memory(e)) => {
                        let text = e.to_string();
                        assert!(text.contains("Gram matrix") && text.contains("features"), "{text}");
                    }
                    other => panic!("{sampler:?} with {features} features: expected a memory error, got {other:?}"),
                }
            }
        }
        // Within the budget it runs.
        fit(&x, config, SamplerKind::Rff, 10, MemoryBudget::bytes(1 << 30)).unwrap();
    }

    /// An iteration count no run can record (nor finish) is refused up front, by the library
    /// (so Python's `n_iter` gets the command line's bound): 10⁸ iterations need 12.8 GB of
    /// per-iteration record against a 1 GiB budget.
    #[test]
    fn an_absurd_iteration_count_is_refused_up_front() {
        let x = rows(3, 2);
        let config = SkpcaConfig { tau: 1.0, iterations: 100_000_000, ..Default::default() };
        match fit(&x, config, SamplerKind::Rff, 1, MemoryBudget::bytes(1 << 30)) {
            Err(SolverError::Memory(e)) => assert!(e.to_string().contains("iterations = 100000000"), "{e}"),
            other => panic!("expected a memory error, got {other:?}"),
        }
        let params = KernelPca {
            memory: MemoryBudget::bytes(1 << 30),
            ..KernelPca::new(
                1,
                Kernel::gaussian(1.0),
                KpcaSolver::Kha { eta: 0.05, iterations: 100_000_000, init_scale: 0.01 },
            )
        };
        let result = params.fit_prepared(x.as_ref(), None, &mut Xoshiro256PlusPlus::seed_from_u64(1), &mut ());
        assert!(matches!(result, Err(SolverError::Memory(_))), "{:?}", result.err());
    }
}
