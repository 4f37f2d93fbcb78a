//! Kernel PCA: [`Skpca`] (stochastic proximal gradient descent on the nuclear-norm
//! formulation, \[SKPCA\], Algorithm 1) and the three baselines of that
//! paper, [`exact_kpca`] (dense kernel matrix and a symmetric eigensolver, or without the kernel
//! matrix: [`matrix_free_kpca`]), [`nystrom_kpca`]
//! (exact orthonormal eigenpairs of the Nyström approximation) and [`Kha`] (the Kernel Hebbian
//! Algorithm); [`tau_for_rank`] picks SKPCA's τ for a wanted rank. [`KernelPca`] fits any of
//! them into a [`KernelPcaModel`] that transforms new rows (and maps points of the embedding back
//! by [`PreImageMap`]), and [`certify`] measures any result
//! against the true kernel matrix.

mod certificate;
mod distinct;
mod exact;
mod fit;
mod incremental;
mod job;
mod kha;
mod krylov_schur;
mod matrix_free;
mod model;
mod nystrom;
mod parts;
mod precomputed;
mod preimage;
mod rank;
mod skpca;
mod streaming_nystrom;
mod streaming_rff;
mod tau;

pub use certificate::{
    Certificate, CertifyConfig, CertifyMethod, ConfidenceIntervals, certify, certify_estimate_sharded,
};
pub use exact::{
    COST_RULE_ROWS, ExactKpcaConfig, ExactOperator, OperatorChoice, estimated_costs, exact_fit_from_pairs, exact_kpca,
    kernel_matrix,
};
pub use fit::{KernelPca, KernelPcaFit, KpcaSettings, KpcaSolver, KpcaWarning, SamplerKind};
pub use incremental::{
    INCREMENTAL_NYSTROM, INCREMENTAL_RFF, IncrementalKpcaFit, IncrementalNystrom, IncrementalNystromConfig,
    IncrementalRff, IncrementalRffConfig, incremental_nystrom_bytes, incremental_rff_bytes,
};
pub use job::{
    CertifyRule, DEFAULT_TAU_SUBSAMPLE, KernelPcaJob, KernelPcaOutcome, KpcaJobTimings, TauOutcome, TauRule,
};
pub use kha::{Kha, KhaConfig, KhaRitz, SPAN_TOLERANCE};
pub use matrix_free::{
    KernelProducts, MatrixFreeConfig, MatrixFreeFit, matrix_free_bytes, matrix_free_bytes_sharded, matrix_free_kpca,
    matrix_free_kpca_products, matrix_free_kpca_sharded, matrix_free_products_bytes,
};
pub use model::{KernelCentering, KernelPcaModel};
pub use nystrom::{
    DEFAULT_BLOCK_ROWS, NystromBasis, NystromConfig, NystromFit, NystromGramPart, NystromSolution, nystrom_fit,
    nystrom_fit_landmarks, nystrom_fit_sharded, nystrom_kpca,
};
pub(crate) use parts::kernel_row_means_sharded;
pub use parts::{
    KERNEL_PCA_PARTS_KIND, ModelPart, kernel_pca_part_path, load_kernel_pca_for_rank, load_kernel_pca_parts,
};
pub use precomputed::{PrecomputedKpcaModel, exact_kpca_precomputed};
pub use preimage::{PREIMAGE_SOLVERS, PreImageMap, check_preimage, preimage_bytes};
pub use rank::{RANK_TOLERANCE, truncate_to_numerical_rank};
pub use skpca::{Iterate, Skpca, SkpcaConfig, check_skpca_memory, shrunk_target, skpca_memory_estimate};
pub use streaming_nystrom::{
    DEFAULT_STREAM_BLOCK_ROWS, ReservoirSample, STREAMING_NYSTROM, StreamingNystromConfig, StreamingNystromFit,
    reservoir_sample, streaming_nystrom_bytes, streaming_nystrom_fit,
};
pub use streaming_nystrom::{
    KeyedSample, STREAM_SHARE_BLOCK, StreamShare, keyed_sample, landmark_key, streaming_nystrom_fit_with,
};
pub use streaming_rff::streaming_rff_fit_with;
pub use streaming_rff::{RffKernelPcaModel, STREAMING_RFF, StreamingRffConfig, StreamingRffFit, streaming_rff_fit};
pub use tau::{TauChoice, tau_for_rank, tau_for_rank_sharded};
