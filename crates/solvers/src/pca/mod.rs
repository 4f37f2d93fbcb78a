//! Linear PCA: [`SvrgPca`] (SVRG with Barzilai–Borwein steps on an exact-penalty objective,
//! \[SVRG-PCA\]), its baseline [`VrPca`] (Shamir's block VR-PCA), the
//! [`rayleigh_ritz`] post-processing and the [`exact_pca`] baseline. [`Pca`] fits any of them
//! (and the streaming solvers, through [`PcaModel::from_basis`]) into a [`PcaModel`] with
//! `transform` and `inverse_transform`.

mod common;
mod fit;
mod model;
mod rayleigh_ritz;
mod svrg_pca;
mod vr_pca;

pub use common::PcaOutcome;
pub use fit::{Pca, PcaJob, PcaJobOutcome, PcaSolver, Prepared};
pub use model::PcaModel;
pub use rayleigh_ritz::{captured_norm, exact_pca, rayleigh_ritz, rayleigh_ritz_sharded};
pub use svrg_pca::{
    EpochLength, SvrgPca, SvrgPcaConfig, Tolerance, penalty_objective, svrg_pca, variance_reduced_direction,
};
pub use vr_pca::{VrPca, VrPcaConfig, vr_pca};
