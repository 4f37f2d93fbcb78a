//! The schema of `pca.json`: \[SVRG-PCA\]'s tables as measured, and the speed comparison.

use serde::{Deserialize, Serialize};

/// Everything `pca.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaResults {
    /// Seeds asked for (MNIST in a quick run uses one).
    pub seeds: usize,
    /// Whether this was a quick run.
    pub quick: bool,
    /// One row per paper row reproduced.
    pub tables: Vec<TableRow>,
    /// The speed cases.
    pub speed: Vec<SpeedRow>,
}

/// Mean over seeds of one method: solver time, captured norm ‖AᵀX‖_F and epochs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MethodMean {
    /// Mean wall-clock time in seconds.
    pub time_s: f64,
    /// Mean ‖AᵀX‖_F after Rayleigh–Ritz (sslev for the exact solver).
    pub value: f64,
    /// Mean number of epochs (0 for the exact solver).
    pub epochs: f64,
}

/// The paper's printed values of a row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PaperValues {
    /// SVRG-PCA's ‖AᵀX‖_F.
    pub svrg: f64,
    /// VR-PCA's ‖AᵀX‖_F.
    pub vr: f64,
    /// sslev.
    pub sslev: f64,
}

/// One reproduced row of Tables 1 and 3–8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// The paper's table (`"1"`, `"3"`…`"8"`).
    pub table: String,
    /// The eigengap of Tables 3–7.
    pub gap: Option<f64>,
    /// Samples.
    pub n: usize,
    /// Dimension.
    pub d: usize,
    /// Rank.
    pub r: usize,
    /// Seeds averaged over.
    pub seeds: usize,
    /// Mean sslev of the exact solver.
    pub sslev: f64,
    /// The exact solver.
    pub exact: MethodMean,
    /// SVRG-PCA in the paper's mode.
    pub svrg_paper: MethodMean,
    /// SVRG-PCA in the consistent mode.
    pub svrg_consistent: MethodMean,
    /// Block VR-PCA with SVRG-PCA's (paper mode) epochs.
    pub vr_pca: MethodMean,
    /// What the paper printed.
    pub paper: PaperValues,
}

/// Time of the exact solver in a speed case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExactTime {
    /// Wall-clock time in seconds.
    pub time_s: f64,
}

/// One stochastic solver's run to the target in a speed case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedRun {
    /// Wall-clock time in seconds.
    pub time_s: f64,
    /// Epochs run.
    pub epochs: usize,
    /// ‖AᵀX‖_F reached.
    pub value: f64,
    /// Why it stopped.
    pub stop: String,
}

/// One speed case: time to `0.9999·sslev`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedRow {
    /// The data and rank.
    pub case: String,
    /// sslev of the exact solver.
    pub sslev: f64,
    /// `0.9999·sslev`.
    pub target: f64,
    /// The exact solver.
    pub exact: ExactTime,
    /// SVRG-PCA, consistent mode, stopped at the target.
    pub svrg_consistent: SpeedRun,
    /// VR-PCA stopped at the target.
    pub vr_pca: SpeedRun,
    /// SVRG-PCA's time over the exact solver's.
    pub svrg_vs_exact_time: f64,
    /// VR-PCA's time over the exact solver's.
    pub vr_vs_exact_time: f64,
}
