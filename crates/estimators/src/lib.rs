//! Kernels and unbiased low-rank estimators of the kernel matrix.
//!
//! Stochastic kernel PCA (SKPCA) never forms the `n × n` kernel matrix $K$: each iteration
//! draws a random low-rank matrix $\xi = \zeta\chi^\top$ with $\mathbb{E}[\xi] = K$, kept as
//! its factors ([`Factors`]). This crate provides
//! - the kernels ([`Kernel`]: [`Gaussian`], [`Laplacian`] (ℓ1), [`Polynomial`], one file each
//!   behind [`KernelFunction`], registered once in `kernels/mod.rs`), dense kernel matrices for
//!   tests and exact baselines, and the width rule [`bandwidth_rule`];
//! - the estimators behind the [`KernelSampler`] trait: [`RandomFourierFeatures`] (Rahimi &
//!   Recht 2007), [`ColumnSampling`] (asymmetric and symmetric), [`RandomMaclaurin`] (Kar &
//!   Karnick 2012), and [`Centered`], which turns any of them into an estimator of the
//!   centred matrix $HKH$ (see also [`centered_kernel_matrix`]);
//! - [`KernelOperator`]: $K V$ (or $HKH\,V$) for a block of vectors, tile by tile, without
//!   holding $K$ (exact kernel PCA at large `n`).
//!
//! Conventions: `f64` throughout; the data `X` has shape `(n, d)`, one sample per row;
//! factors have shape `(n, a)`. Randomness is injected (`rng: &mut dyn rand::Rng` or
//! `R: Rng + ?Sized`). Products use faer with `faer::get_global_parallelism()`, and the
//! element-wise passes use the same number of threads.
//!
//! # References
//! \[SKPCA\] (Zhang et al., *Stochastic Optimization for Kernel PCA*,
//! AAAI 2016), "Unbiased Estimators" list and centring; docs/derivations.md §1.1–§1.3.
#![deny(missing_docs)]

mod bandwidth;
mod centered;
mod columns;
mod data;
mod error;
mod factors;
pub mod interrupt;
mod kernel_blocks;
mod kernels;
mod maclaurin;
mod operator;
mod parallel;
mod rff;
mod row_groups;
mod sincos;
mod sparse;
mod vexp;
mod weighted;

pub use bandwidth::{
    BANDWIDTH_BLOCK_ROWS, Bandwidth, DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, DUPLICATE_WARNING_SHARE,
    bandwidth_estimate, bandwidth_estimate_sharded, bandwidth_rule,
};
pub use centered::{Centered, centered_kernel_matrix};
pub use columns::ColumnSampling;
pub use data::{
    check_data, check_data_f32, column_means, column_means_of, column_means_reduced, column_sums_of, to_owned,
};
pub use error::EstimatorError;
pub use factors::{Factors, KernelSampler};
pub use kernel_blocks::{CrossKernelPanels, PANEL_ROWS, Panel};
pub use kernels::{
    Cosine, Evaluator, Gaussian, Kernel, KernelEvaluation, KernelFamily, KernelForm, KernelFunction, Laplacian, Linear,
    Parameter, ParameterDefault, Polynomial, kernel_row_means, kernel_row_means_range,
};
pub use maclaurin::{MaclaurinMap, RandomMaclaurin};
pub use operator::{DEFAULT_TILE, KernelOperator, OperatorCentering, center_kernel_product};
pub use rff::{RandomFourierFeatures, coordinate_rng};
pub use row_groups::RowGroups;
pub use sincos::{FAST_LIMIT, scaled_cos_sin};
pub use sparse::{DataRef, DenseBlock, f32_to_f64};
pub use weighted::Weighted;
