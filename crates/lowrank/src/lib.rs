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
//! # References
//! Paper `000_64249a13de5bd3cc.txt` (Zhang et al., *Stochastic Optimization for Kernel PCA*,
//! AAAI 2016), section "Implementation Issues"; implementation notes `spec/math.md` §1.4, §1.7,
//! §2.3, §2.4. Paper `004_cadb4dc86f44be57.txt` (Machart et al., SLKL), (22)–(27); spec §6.8–§6.9.
#![deny(missing_docs)]

mod block_eigen;
mod capped_simplex;
mod dense;
mod eigenpairs;
mod error;
pub mod frobenius;
mod gram_schmidt;
mod low_rank;
mod rank_one_eigen;
mod secular;
mod svs;
mod sym_low_rank;
mod woodbury;

pub use block_eigen::{BlockEigenUpdate, block_eigen_update};
pub use capped_simplex::{
    Corner, SimplexProjection, mixture_decomposition, project_capped_rank, project_capped_simplex,
};
pub use dense::{
    ThinSvd, gram_apply, matmul, mul, spd_inverse, spd_solve, squared_norm, sym_eigen_desc, sym_eigenvalues_desc,
    tall_inner, thin_qr, thin_svd, top_eigenpairs,
};
pub use eigenpairs::Eigenpairs;
pub use error::LowRankError;
pub use gram_schmidt::{Orthogonalization, OrthogonalizedBlock, orthogonalize_against};
pub use low_rank::LowRank;
pub use rank_one_eigen::{RankOneEigenUpdate, rank_one_eigen_update};
pub use secular::eigen_diagonal_plus_rank_one;
pub use svs::{shrink_dense, shrink_general, shrink_psd, shrink_psd_in_place, shrink_psd_in_place_sharded};
pub use sym_low_rank::SymLowRank;
pub use woodbury::{ColumnQuadratics, Probe, WoodburyInverse, WoodburyParts};
