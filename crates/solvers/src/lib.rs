//! Stolr's stochastic solvers and the baselines they are compared with.
//!
//! Linear PCA: [`svrg_pca`] (SVRG with Barzilai–Borwein steps on an exact-penalty objective,
//! paper `002_32bc6583f0d9e789.txt`), its baseline [`vr_pca`] (Shamir's block VR-PCA), the
//! [`rayleigh_ritz`] post-processing and the [`exact_pca`] baseline.
//!
//! Streaming PCA (paper `003_9ee5fcabdf9f0742.txt`): [`Msg`] (matrix stochastic gradient,
//! plain or capped), and its baselines [`IncrementalPca`] and [`Oja`], all behind the
//! [`StreamingPca`] trait (one sample or a mini-batch at a time).
//!
//! Kernel PCA: [`Skpca`] (stochastic proximal gradient descent on the
//! nuclear-norm formulation, paper `000_64249a13de5bd3cc.txt`, Algorithm 1), and the three
//! baselines of that paper, [`exact_kpca`] (dense kernel matrix and a symmetric eigensolver),
//! [`nystrom_kpca`] (exact orthonormal eigenpairs of the Nyström approximation) and [`Kha`] (the
//! Kernel Hebbian Algorithm, a stochastic generalized Hebbian rule in dual coordinates).
//!
//! Kernel regression: [`Slkl`] (stochastic low-rank kernel learning, coordinate descent on a
//! conical combination of rank-1 Nyström kernels, paper `004_cadb4dc86f44be57.txt`) and its
//! baselines [`krr`] (KRR_n), [`krr_subset`] (KRR_M) and [`unif`] (Unif); all predict through a
//! [`KernelExpansion`]. [`select_nu`] chooses SLKL's (or Unif's) ν by hold-out validation.
//!
//! Every iterative solver is config (validated once) + state + `step`; a `run` loop calls
//! `step` until a [`Stop`] reason and reports each iteration to an [`Observer`], so the CLI's
//! progress bar, the benchmark's convergence curves and the tests all read the same loop.
//!
//! Eigenvalues are in **nonincreasing** order everywhere; eigenvectors are columns of `(n, r)`
//! matrices with fixed signs (largest absolute entry positive).
#![deny(missing_docs)]

mod error;
mod exact;
mod expansion;
mod incremental_pca;
mod kha;
mod krr;
mod msg;
mod nu_selection;
mod nystrom;
mod observer;
mod oja;
mod pca_common;
mod rayleigh_ritz;
mod skpca;
mod slkl;
mod streaming;
mod svrg_pca;
mod tau;
mod vr_pca;

pub use error::SolverError;
pub use exact::{ExactKpcaConfig, exact_kpca, kernel_matrix};
pub use expansion::KernelExpansion;
pub use incremental_pca::IncrementalPca;
pub use kha::{Kha, KhaConfig};
pub use krr::{KrrConfig, UnifConfig, UnifModel, UniformWeight, krr, krr_subset, unif};
pub use msg::{Msg, MsgConfig};
pub use nu_selection::{NuCandidate, NuModel, NuSelection, log_grid, mean_squared_error, select_nu};
pub use nystrom::{NystromConfig, nystrom_kpca};
pub use observer::{IterationReport, Observer, Stop};
pub use oja::Oja;
pub use pca_common::PcaOutcome;
pub use rayleigh_ritz::{captured_norm, exact_pca, rayleigh_ritz};
pub use skpca::{Iterate, Skpca, SkpcaConfig, shrunk_target};
pub use slkl::{ColumnMode, CoordinatePartials, CoordinateRule, Slkl, SlklConfig, SlklModel, select_landmarks, slkl};
pub use streaming::{StepSize, StreamingPca};
pub use svrg_pca::{EpochLength, SvrgPcaConfig, Tolerance, penalty_objective, svrg_pca, variance_reduced_direction};
pub use tau::{TauChoice, tau_for_rank};
pub use vr_pca::{VrPcaConfig, vr_pca};
