//! SKPCA: kernel PCA by stochastic proximal gradient descent with singular value shrinkage.

use std::time::Instant;

use rand::Rng;
use stolr_estimators::KernelSampler;
use stolr_lowrank::{Eigenpairs, LowRank, Orthogonalization, SymLowRank, frobenius, shrink_general, shrink_psd};

use crate::{IterationReport, Observer, SolverError, Stop};

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
    /// How the new factor block is orthogonalized (block Gram–Schmidt by default).
    pub orthogonalization: Orthogonalization,
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
/// with the iterate always factored (see [`stolr_lowrank::shrink_psd`] and
/// [`stolr_lowrank::shrink_general`]). Memory `O(n·(a + b_t))` with `a` the rank of a draw
/// and `b_t = rank(Z_t)`; time per step `O(n·(d·a + a·(a + b_t)) + (a + b_t)³)`.
/// The last iterate converges at rate `O(log log T / T)` (Theorem 1).
///
/// # References
/// Paper `000_64249a13de5bd3cc.txt`, Algorithm 1, Theorem 1; spec `math.md` §2.2–§2.4.
#[derive(Debug, Clone)]
pub struct Skpca {
    config: SkpcaConfig,
    iterate: Iterate,
    t: usize,
}

impl Skpca {
    /// A solver for an `n × n` kernel matrix, starting at `Z_1 = 0`. `symmetric_psd` selects the
    /// PSD fast path; it must match the sampler's [`KernelSampler::is_symmetric_psd`].
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if `tau` is not positive and finite, `iterations == 0`,
    /// `max_rank == Some(0)` or `n == 0`.
    pub fn new(config: SkpcaConfig, n: usize, symmetric_psd: bool) -> Result<Self, SolverError> {
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
        Ok(Self { config, iterate, t: 0 })
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

    fn check_sampler(&self, sampler: &dyn KernelSampler) -> Result<(), SolverError> {
        let n = match &self.iterate {
            Iterate::Psd(z) => z.n(),
            Iterate::General(z) => z.nrows(),
        };
        if sampler.n() != n {
            return Err(SolverError::SamplerMismatch {
                reason: format!("the sampler draws {} rows, the solver has n = {n}", sampler.n()),
            });
        }
        if matches!(self.iterate, Iterate::Psd(_)) && !sampler.is_symmetric_psd() {
            return Err(SolverError::SamplerMismatch {
                reason: format!(
                    "the '{}' sampler is not symmetric PSD; build the solver with symmetric_psd = false",
                    sampler.name()
                ),
            });
        }
        Ok(())
    }

    /// One SPGD step: `Z_{t+1} = D_{η_t τ}[(1 − η_t) Z_t + η_t ξ_t]` with `η_t = 2/t`
    /// (paper 000, Algorithm 1, lines 3–5).
    ///
    /// # Errors
    /// [`SolverError::SamplerMismatch`] if the sampler's size or symmetry does not fit;
    /// sampler errors; [`SolverError::LowRank`] if a small factorization fails. On error the
    /// iterate is unchanged.
    pub fn step(&mut self, sampler: &mut dyn KernelSampler, rng: &mut dyn Rng) -> Result<(), SolverError> {
        self.check_sampler(sampler)?;
        let t = self.t + 1;
        let eta = 2.0 / t as f64;
        let threshold = eta * self.config.tau;
        let how = self.config.orthogonalization;
        let draw = sampler.sample(rng)?;
        self.iterate = match (&self.iterate, draw.chi) {
            (Iterate::Psd(z), None) => Iterate::Psd(shrink_psd(z, draw.zeta, eta, threshold, how)?),
            (Iterate::Psd(_), Some(_)) => {
                return Err(SolverError::SamplerMismatch {
                    reason: "a PSD iterate received a non-symmetric draw".into(),
                });
            }
            (Iterate::General(z), chi) => {
                let chi = chi.unwrap_or_else(|| draw.zeta.clone());
                Iterate::General(shrink_general(z, draw.zeta, chi, eta, threshold, how)?)
            }
        };
        self.t = t;
        Ok(())
    }

    /// Runs the remaining iterations, reporting each to `observer`. When `target` (the exact
    /// `K̂ = D_τ[K]`, e.g. from [`shrunk_target`]) is given, each report carries
    /// `‖Z_{t+1} − K̂‖_F² / n²`. Stops at the iteration limit, when the rank exceeds
    /// `max_rank`, or when the observer breaks.
    ///
    /// # Errors
    /// As [`Skpca::step`]; [`SolverError::LowRank`] if `target` has the wrong size.
    pub fn run(
        &mut self,
        sampler: &mut dyn KernelSampler,
        rng: &mut dyn Rng,
        target: Option<&SymLowRank>,
        observer: &mut dyn Observer,
    ) -> Result<Stop, SolverError> {
        let start = Instant::now();
        let n = sampler.n() as f64;
        while self.t < self.config.iterations {
            self.step(sampler, rng)?;
            let rank = self.iterate.rank();
            let error = match target {
                Some(k) => Some(self.iterate.distance_sq(k)? / (n * n)),
                None => None,
            };
            let report = IterationReport {
                t: self.t,
                rank,
                elapsed: start.elapsed(),
                error,
                objective: None,
                gradient_norm: None,
            };
            if observer.on_iteration(&report).is_break() {
                return Ok(Stop::Interrupted);
            }
            if let Some(cap) = self.config.max_rank
                && rank > cap
            {
                return Ok(Stop::RankCapReached { rank, cap });
            }
        }
        Ok(Stop::MaxIterations)
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
    /// Paper `000_64249a13de5bd3cc.txt`, Algorithm 1, last lines; spec §2.4, Appendix B.3.
    pub fn eigenpairs(&self) -> Result<Eigenpairs, SolverError> {
        let mut pairs = match &self.iterate {
            Iterate::Psd(z) => z.eigenpairs(),
            Iterate::General(z) => z.symmetric_eigenpairs()?,
        };
        if pairs.rank() == 0 {
            return Err(SolverError::RankCollapsed { tau: self.config.tau, iterations: self.t });
        }
        for v in &mut pairs.values {
            *v += self.config.tau;
        }
        pairs.fix_signs();
        Ok(pairs)
    }
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
