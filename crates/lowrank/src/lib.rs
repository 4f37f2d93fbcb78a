//! Matrices kept as low-rank factors, and their updates.
//!
//! The building blocks of Stolr's stochastic solvers: a symmetric PSD factorization
//! [`SymLowRank`] (`U diag(s) Uᵀ`), a general one [`LowRank`] (`U diag(s) Vᵀ`), the singular
//! value shrinkage step of SKPCA kept factored ([`shrink_psd`], [`shrink_general`]), block
//! Gram–Schmidt against an orthonormal basis ([`orthogonalize_against`]), eigen-recovery of the
//! symmetric part ([`LowRank::symmetric_eigenpairs`]) and Frobenius distances between factored
//! matrices that never form an `n × n` matrix ([`frobenius`]); the rank-one eigen-update of
//! MSG ([`rank_one_eigen_update`], with the `O(m²)` secular-equation solver
//! [`eigen_diagonal_plus_rank_one`]) and the projections of eigenvalues onto the capped simplex
//! ([`project_capped_simplex`], [`project_capped_rank`], [`mixture_decomposition`]); and the
//! Woodbury form of $(\lambda I + V D V^\top)^{-1}$ with bordered-inverse updates
//! ([`WoodburyInverse`], SLKL).
//!
//! Conventions: `f64` throughout; eigenvalues and singular values are in **nonincreasing**
//! order everywhere in the public API; eigenvectors are the columns of an `(n, r)` matrix.
//! Dense factorizations and products come from faer; products read faer's global parallelism
//! setting. Every result is the same, bit for bit, whatever the number of threads: reductions
//! run over row groups fixed by the shape and add their partials in a fixed order, and faer's
//! kernels whose order depends on the number of threads run on one thread (see [`matmul`] and
//! [`tall_inner`]).
//!
//! # The same bits on any number of threads
//! Every dense product and factorization gives the same bits whatever faer's global parallelism:
//! - faer's general matrix products compute each entry in a fixed order whatever the number of
//!   threads, except its matrix–vector products, which split the summation dimension among the
//!   threads; [`matmul`] runs those in fixed chunks of rows instead;
//! - reductions over the rows of tall matrices ([`tall_inner`], [`gram_apply`], and the Gram
//!   matrix of the SKPCA step) cut the rows into groups fixed by the shape alone, form each
//!   group's partial product sequentially and add the partials in group order;
//! - the dense factorizations ([`sym_eigen_desc`], [`sym_eigenvalues_desc`], [`thin_qr`],
//!   [`thin_svd`]) run sequentially (`Par::Seq`): faer's parallel tridiagonalization,
//!   bidiagonalization and Householder panels reduce in a thread-dependent order. They are
//!   applied to small matrices (`m × m` cores, `d × k` bases) or, when not, cost about as much
//!   sequentially on two cores (measured: 2000 × 2000 symmetric eigenvalues 1.0 s sequential,
//!   0.9 s on two threads; thin QR of 100 000 × 60, 0.27 s and 0.33 s);
//! - Cholesky factorizations and solves with several right-hand sides are products of blocks
//!   and keep faer's parallelism; a solve with one right-hand side runs sequentially.
//!
//! # References
//! \[SKPCA\] (Zhang et al., *Stochastic Optimization for Kernel PCA*,
//! AAAI 2016), section "Implementation Issues"; docs/derivations.md §1.4, §1.7,
//! §2.3, §2.4. \[SLKL\] (Machart et al.), (22)–(27); docs/derivations.md §6.8–§6.9.
#![deny(missing_docs)]

mod block_eigen;
mod capped_simplex;
mod eigenpairs;
mod error;
pub mod frobenius;
mod gram_schmidt;
mod low_rank;
mod products;
mod qr_svd;
mod rank_one_eigen;
mod secular;
mod spd;
mod svs;
mod sym_eigen;
mod sym_low_rank;
mod tall_products;
mod woodbury;

pub use block_eigen::{BlockEigenUpdate, block_eigen_update};
pub use capped_simplex::{
    Corner, SimplexProjection, mixture_decomposition, project_capped_rank, project_capped_simplex,
};
pub use eigenpairs::{Eigenpairs, signs_from_candidates};
pub use error::LowRankError;
pub use gram_schmidt::{Orthogonalization, OrthogonalizedBlock, orthogonalize_against};
pub use low_rank::LowRank;
pub use products::{clear_upper_vector_state, matmul, mul, squared_norm};
pub use qr_svd::{ThinSvd, thin_qr, thin_svd};
pub use rank_one_eigen::{RankOneEigenUpdate, rank_one_eigen_update};
pub use secular::{eigen_diagonal_plus_rank_one, eigen_of_grown_update};
pub use spd::{spd_inverse, spd_solve};
pub use svs::{
    shrink_dense, shrink_general, shrink_general_sharded, shrink_psd, shrink_psd_in_place, shrink_psd_in_place_sharded,
};
pub use sym_eigen::{sym_eigen_desc, sym_eigenvalues_desc, top_eigenpairs};
pub use sym_low_rank::SymLowRank;
pub use tall_products::{
    gram_and_sums_of_row_blocks, gram_apply, gram_blocks_bytes, gram_lanes, gram_of_row_blocks, tall_inner,
};
pub use woodbury::{ColumnQuadratics, Probe, WoodburyInverse, WoodburyParts};
