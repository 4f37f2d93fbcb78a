//! Kernel regression: [`Slkl`] (stochastic low-rank kernel learning, coordinate descent on a
//! conical combination of rank-1 Nyström kernels, \[SLKL\]) and its
//! baselines [`krr`] (KRR_n), [`krr_subset`] (KRR_M) and [`unif`] (Unif), and Nyström kernel
//! ridge regression [`nystrom_krr`] (direct or Falkon-preconditioned CG); all predict through a
//! [`KernelExpansion`]. [`select_nu`] chooses SLKL's (or Unif's) ν by cross-validation.
//! [`KernelRidge`] fits any of them into a [`KrrModel`] that predicts new rows.

mod baselines;
mod expansion;
mod fit;
mod job;
mod landmarks;
mod model;
mod nu_selection;
mod nystrom;
mod nystrom_cg;
mod nystrom_cv;
mod precomputed;
mod slkl;
mod unif;

pub use baselines::{KrrConfig, krr, krr_subset};
pub use expansion::KernelExpansion;
pub use fit::{KernelRidge, KrrFitSummary, KrrSolver};
pub use job::{KernelRidgeJob, KernelRidgeOutcome, KrrChoice, KrrJobTimings, LAMBDA_GRID, NU_GRID, random_folds};
pub use landmarks::select_landmarks;
pub use model::KrrModel;
pub use nu_selection::{
    NuCandidate, NuModel, NuPath, NuSelection, log_grid, mean_squared_error, select_nu, select_nu_path,
    select_nu_path_sharded,
};
pub use nystrom::{
    NystromKrrBasis, NystromKrrConfig, NystromKrrFit, NystromKrrPart, NystromSolve, nystrom_krr, nystrom_krr_landmarks,
    nystrom_krr_sharded,
};
pub use nystrom_cv::{LambdaSelection, select_lambda_nystrom, select_lambda_nystrom_sharded};
pub use precomputed::{PrecomputedKrrModel, krr_precomputed};
pub use slkl::{ColumnMode, CoordinatePartials, CoordinateRule, Slkl, SlklConfig, SlklModel, slkl};
pub use unif::{UnifConfig, UnifModel, UniformWeight, unif};
