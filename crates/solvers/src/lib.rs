//! Stolr's solvers, by family, their baselines, one solver loop and the fitted models.
//!
//! - [`kpca`]: kernel PCA — [`Skpca`] (\[SKPCA\], docs/papers.md), [`exact_kpca`],
//!   [`nystrom_kpca`], [`Kha`]; fitted through [`KernelPca`] into a [`KernelPcaModel`].
//! - [`pca`]: linear PCA — [`SvrgPca`] (\[SVRG-PCA\]), [`VrPca`],
//!   [`exact_pca`], [`rayleigh_ritz`]; fitted through [`Pca`] into a [`PcaModel`].
//! - [`streaming`]: streaming PCA — [`Msg`] plain and capped (\[MSG\]), [`IncrementalPca`],
//!   [`Oja`]; a pass over a stream of rows is a [`StreamPass`]; the result becomes a
//!   [`PcaModel`] through [`PcaModel::from_basis`].
//! - [`krr`](mod@krr): kernel regression — [`Slkl`] (\[SLKL\]), [`krr()`],
//!   [`krr_subset`], [`unif`]; fitted through [`KernelRidge`] into a [`KrrModel`].
//!
//! **One loop.** Every iterative solver is a state validated when built with a
//! [`step`](IterativeSolver::step); [`run`] calls it until a [`Stop`] reason and reports each
//! iteration to an [`Observer`] as an [`IterationReport`] (`t` from 1, objective, distance to a
//! target when the caller computes one, KKT violation, rank, samples seen, elapsed time), so the
//! CLI's progress bar, the benchmark's convergence curves and the tests all read the same loop.
//!
//! **Models.** [`Fit`] / [`FitRegression`] turn parameters and data into a model;
//! [`Transformer`] and [`Predictor`] apply it to new rows; [`Persist`] saves it to, and loads
//! it from, a versioned model file readable from NumPy.
//!
//! Eigenvalues are in **nonincreasing** order everywhere; eigenvectors are columns of `(n, r)`
//! matrices with fixed signs (largest absolute entry positive).
#![deny(missing_docs)]

mod checkpoint;
mod error;
mod interface;
/// The stop request of long loops (Ctrl-C from Python), shared with the kernel blocks.
pub use stolr_estimators::interrupt;
mod job;
mod kernel_spec;
pub mod kpca;
pub mod krr;
mod landmarks;
mod methods;
mod model_io;
mod model_rows;
pub mod pca;
mod run;
mod stoppable;
pub mod streaming;

pub use checkpoint::{CheckpointStore, SolverState};
pub use error::{GRAM_SYMMETRY_TOLERANCE, SolverError};
pub use interface::{Fit, FitRegression, Persist, Predictor, Transformer};
pub use job::{KpcaStream, KrrStream, PcaStream, Shard};
pub use kernel_spec::KernelSpec;
pub use kpca::streaming_rff_fit_with;
pub use kpca::{
    COST_RULE_ROWS, Certificate, CertifyConfig, CertifyMethod, CertifyRule, ConfidenceIntervals, DEFAULT_TAU_SUBSAMPLE,
    ExactKpcaConfig, ExactOperator, Iterate, KernelCentering, KernelPca, KernelPcaFit, KernelPcaJob, KernelPcaModel,
    KernelPcaOutcome, KernelProducts, Kha, KhaConfig, KhaRitz, KpcaJobTimings, KpcaSettings, KpcaSolver, KpcaWarning,
    MatrixFreeConfig, MatrixFreeFit, NystromConfig, NystromFit, OperatorChoice, RANK_TOLERANCE, SamplerKind, Skpca,
    SkpcaConfig, TauChoice, TauOutcome, TauRule, certify, certify_estimate_sharded, check_skpca_memory,
    estimated_costs, exact_fit_from_pairs, exact_kpca, kernel_matrix, matrix_free_bytes, matrix_free_bytes_sharded,
    matrix_free_kpca, matrix_free_kpca_products, matrix_free_kpca_sharded, matrix_free_products_bytes, nystrom_fit,
    nystrom_fit_landmarks, nystrom_fit_sharded, nystrom_kpca, shrunk_target, skpca_memory_estimate, tau_for_rank,
    tau_for_rank_sharded, truncate_to_numerical_rank,
};
pub use kpca::{
    DEFAULT_STREAM_BLOCK_ROWS, ReservoirSample, STREAMING_NYSTROM, StreamingNystromConfig, StreamingNystromFit,
    reservoir_sample, streaming_nystrom_bytes, streaming_nystrom_fit,
};
pub use kpca::{
    INCREMENTAL_NYSTROM, INCREMENTAL_RFF, IncrementalKpcaFit, IncrementalNystrom, IncrementalNystromConfig,
    IncrementalRff, IncrementalRffConfig, incremental_nystrom_bytes, incremental_rff_bytes,
};
pub use kpca::{
    KERNEL_PCA_PARTS_KIND, ModelPart, kernel_pca_part_path, load_kernel_pca_for_rank, load_kernel_pca_parts,
};
pub use kpca::{KeyedSample, STREAM_SHARE_BLOCK, StreamShare, keyed_sample, landmark_key, streaming_nystrom_fit_with};
pub use kpca::{NystromBasis, NystromGramPart, NystromSolution};
pub use kpca::{PREIMAGE_SOLVERS, PreImageMap, check_preimage, preimage_bytes};
pub use kpca::{PrecomputedKpcaModel, exact_kpca_precomputed};
pub use kpca::{RffKernelPcaModel, STREAMING_RFF, StreamingRffConfig, StreamingRffFit, streaming_rff_fit};
pub use krr::{
    ColumnMode, CoordinatePartials, CoordinateRule, KernelExpansion, KernelRidge, KernelRidgeJob, KernelRidgeOutcome,
    KrrChoice, KrrConfig, KrrFitSummary, KrrJobTimings, KrrModel, KrrSolver, LAMBDA_GRID, LambdaSelection, NU_GRID,
    NuCandidate, NuModel, NuPath, NuSelection, NystromKrrConfig, NystromKrrFit, NystromSolve, Slkl, SlklConfig,
    SlklModel, UnifConfig, UnifModel, UniformWeight, krr, krr_subset, log_grid, mean_squared_error, nystrom_krr,
    nystrom_krr_landmarks, nystrom_krr_sharded, random_folds, select_lambda_nystrom, select_landmarks, select_nu,
    select_nu_path, slkl, unif,
};
pub use krr::{NystromKrrBasis, NystromKrrPart};
pub use krr::{PrecomputedKrrModel, krr_precomputed};
pub use krr::{select_lambda_nystrom_sharded, select_nu_path_sharded};
pub use landmarks::{ChosenLandmarks, Landmarks};
pub use methods::{KpcaMethod, KrrMethod, Named, PcaMethod};
pub use model_io::kernel_parameters_json;
pub use model_rows::{ModelRows, csr_from_parts, csr_view_from_parts};
pub use pca::{
    EpochLength, Pca, PcaJob, PcaJobOutcome, PcaModel, PcaOutcome, PcaSolver, SvrgPca, SvrgPcaConfig, Tolerance, VrPca,
    VrPcaConfig, captured_norm, exact_pca, penalty_objective, rayleigh_ritz, rayleigh_ritz_sharded, svrg_pca,
    variance_reduced_direction, vr_pca,
};
pub use run::{
    CheckpointsOnly, IterationReport, IterativeSolver, Observer, StepReport, Stop, StopAt, TimeBudget, run,
    run_with_target,
};
pub use stolr_estimators::KernelFamily;
/// Eigenpairs, and the signs of eigenvectors held in blocks from each block's candidates (re-exported for the
/// front ends that combine blocks themselves: the Python package's Dask fits).
pub use stolr_lowrank::{Eigenpairs, signs_from_candidates};
pub use streaming::{
    IncrementalPca, LOOKAHEAD_ROWS, MatrixSource, Msg, MsgConfig, Oja, PassKind, RowPass, RowReadError, RowSource,
    StepSize, StreamPass, StreamTransform, StreamingOutcome, StreamingPca, StreamingPcaJob, StreamingSolver,
    matrix_rows,
};
