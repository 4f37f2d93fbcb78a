//! The `report.json` that `stolr kpca` and `stolr krr` write with `--out DIR`, as types: the CLI
//! serializes these structs and the benchmarks deserialize them, so the two cannot drift apart.
//!
//! Names are spelled as the CLI's flags spell them (`svrg-bb`, `columns-sym`, `krr-subset`).
//! Eigenvalues are in nonincreasing order. Times are in seconds, memory in bytes. A number that
//! is not finite is written as `null` by `serde_json` and reads back as `None` where the field is
//! optional.
#![deny(missing_docs)]

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Reads and parses `dir/report.json`.
///
/// # Errors
/// The I/O error if the file cannot be read, or the JSON error (as `std::io::Error` of kind
/// `InvalidData`) if a field of `T` is missing or of the wrong kind.
pub fn read_report<T: DeserializeOwned>(dir: &Path) -> std::io::Result<T> {
    let text = std::fs::read_to_string(dir.join("report.json"))?;
    serde_json::from_str(&text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Writes `report` to `dir/report.json`, pretty-printed, creating `dir`. The file appears
/// whole or not at all ([`stolr_model::write_atomic`]): a run killed while writing leaves
/// the previous report, or none.
///
/// # Errors
/// The I/O error if the folder or the file cannot be written.
pub fn write_report<T: Serialize>(dir: &Path, report: &T) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)? + "\n";
    stolr_model::write_atomic(&dir.join("report.json"), |out| out.write_all(text.as_bytes())).map_err(|e| match e {
        stolr_model::ModelError::Io { source, .. } => source,
        other => std::io::Error::other(other),
    })
}

/// The kernel of a run: its family's name and its parameters by name, as the model file
/// writes them (`{"type": "gaussian", "sigma": 1.5, "sigma_source": "given"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportKernel {
    /// The family: `gaussian`, `laplacian`, `polynomial`.
    #[serde(rename = "type")]
    pub name: String,
    /// Its parameters by name (`sigma`; `scale`, `offset`, `degree`), whole-number parameters
    /// as JSON integers.
    #[serde(flatten)]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// How σ was chosen (kernels with a bandwidth only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_source: Option<String>,
}

impl ReportKernel {
    /// The value of the parameter `name`, if the kernel has it.
    pub fn parameter(&self, name: &str) -> Option<f64> {
        self.parameters.get(name).and_then(serde_json::Value::as_f64)
    }

    /// The bandwidth σ, for the kernels that have one.
    pub fn sigma(&self) -> Option<f64> {
        self.parameter("sigma")
    }
}

/// The data set of a `stolr kpca` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KpcaDataset {
    /// The file read, or the generator's description.
    pub source: String,
    /// `"file"` or `"built-in"`.
    pub origin: String,
    /// The `--format` (`libsvm`, `csv`, ...) or `"generated"`.
    pub format: String,
    /// Samples `n`.
    pub n: usize,
    /// Features `d`.
    pub d: usize,
    /// Whether the features were standardized.
    #[serde(default)]
    pub standardized: bool,
    /// `--label-column`: the 1-based column kept as labels, not features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_column: Option<usize>,
    /// `--categorical`: every one-hot encoded column with its categories, in feature order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categorical: Vec<ReportCategorical>,
}

/// One one-hot encoded column of a CSV input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportCategorical {
    /// The 1-based column number in the file.
    pub column: usize,
    /// Its categories, sorted by their bytes; one feature each, in this order.
    pub categories: Vec<String>,
}

/// What the bandwidth rule (`--sigma auto`) measured: σ is the percentile of the pairwise
/// distances between distinct rows, duplicates counted once (a departure from \[SKPCA\]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthReport {
    /// The percentile taken (20).
    pub percentile: f64,
    /// Which rows were searched for duplicates: `"all rows"` (the whole data, not a sample).
    pub scope: String,
    /// Rows searched, `n`.
    pub rows: usize,
    /// Distinct rows among them.
    pub distinct_rows: usize,
    /// `1 − distinct_rows / rows`.
    pub duplicate_share: f64,
    /// Pairwise distances between distinct rows the percentile was taken over.
    pub pairs: usize,
    /// Whether every pair of distinct rows was used (otherwise `pairs` were sampled).
    pub exact: bool,
    /// Set when duplicates exceed 10 % of the rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The parameters of a `stolr kpca` run, as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KpcaParameters {
    /// `--rank`.
    pub rank: Option<usize>,
    /// `--tau`.
    pub tau: Option<f64>,
    /// `--sampler` (`rff`, `columns`, `columns-sym`, `maclaurin`).
    pub sampler: String,
    /// `--features`.
    pub features: usize,
    /// `--iterations`.
    pub iterations: usize,
    /// `--landmarks`.
    pub landmarks: usize,
    /// `--max-rank`.
    pub max_rank: usize,
    /// `--tau-subsample`.
    pub tau_subsample: usize,
    /// `--seed`.
    pub seed: u64,
}

/// How SKPCA's τ was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TauReport {
    /// τ.
    pub value: f64,
    /// `"given"` or how it was chosen.
    pub source: String,
    /// The subsample size `m` of the choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsample: Option<usize>,
    /// The estimated eigenvalues the choice saw (scaled by `n/m`), nonincreasing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_eigenvalues: Option<Vec<f64>>,
}

/// The result of a `stolr kpca` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KpcaResult {
    /// Number of eigenpairs returned.
    pub rank: usize,
    /// Eigenvalues of the (centred) kernel matrix, nonincreasing.
    pub eigenvalues: Vec<f64>,
    /// Always `"nonincreasing"`.
    pub eigenvalue_order: String,
    /// Iterations of an iterative solver (`None` for exact and Nyström).
    pub iterations_run: Option<usize>,
    /// Why an iterative solver stopped.
    pub stop_reason: Option<String>,
    /// The iterate's rank after every iteration (empty for exact and Nyström).
    #[serde(default)]
    pub rank_trajectory: Vec<usize>,
    /// The rank asked for (`--rank`), when given; `rank` is smaller when the kernel matrix has
    /// fewer numerically nonzero eigenpairs (see `warnings`).
    #[serde(default)]
    pub requested_rank: Option<usize>,
    /// For KHA, whether its Ritz pairs passed the convergence test (largest relative residual
    /// at most the tolerance); `None` for the solvers without one.
    #[serde(default)]
    pub converged: Option<bool>,
    /// For KHA, the largest relative residual `||K~ u_j - lambda_j u_j|| / lambda_1` of the
    /// returned pairs.
    #[serde(default)]
    pub max_residual: Option<f64>,
    /// What the fit warned about (fewer pairs than requested, not converged), as printed.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// The timings of a `stolr kpca` run, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KpcaTimings {
    /// Reading the data.
    pub read: f64,
    /// The bandwidth rule.
    pub bandwidth: f64,
    /// The solver, including τ's choice and the model.
    pub solve: f64,
    /// Writing the outputs.
    pub write: f64,
    /// The whole run.
    pub total: f64,
    /// Time of the iterations alone (the solver loop, without the one-time choice of τ before
    /// it and the eigenpairs and model after it) / iterations, in milliseconds, for the
    /// iterative solvers.
    #[serde(default)]
    pub per_iteration_ms: Option<f64>,
}

/// The `report.json` of `stolr kpca --out DIR`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KpcaReport {
    /// The version of Stolr that wrote it.
    pub stolr_version: String,
    /// `"kpca"`.
    pub command: String,
    /// The data set.
    pub dataset: KpcaDataset,
    /// The kernel.
    pub kernel: ReportKernel,
    /// Whether the kernel matrix was centred in feature space.
    #[serde(default)]
    pub centered: bool,
    /// The solver (`exact`, `nystrom`, `skpca`, `kha`).
    pub solver: String,
    /// For the exact solver, which operator ran: `dense` (the `n × n` kernel matrix) or
    /// `matrix-free` (the tiled kernel operator and a block Krylov–Schur eigensolver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_operator: Option<String>,
    /// Why that operator ran: the memory budget's verdict on the dense kernel matrix, a forced
    /// operator, or several processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_operator_reason: Option<String>,
    /// The parameters as given.
    pub parameters: KpcaParameters,
    /// SKPCA's τ.
    #[serde(default)]
    pub tau: Option<TauReport>,
    /// The bandwidth rule's counts, when σ was chosen by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthReport>,
    /// The eigenvalues and the rank trajectory.
    pub result: KpcaResult,
    /// The accuracy certificate of the eigenpairs against the true kernel matrix (`None` with
    /// `--certify off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<CertificateReport>,
    /// Timings.
    pub timings_s: KpcaTimings,
    /// Peak resident memory of the run in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The files written.
    #[serde(default)]
    pub outputs: Vec<String>,
}

/// The data of a `stolr krr` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrrDataset {
    /// `"file, random split"`, `"files"` or `"generated"`.
    pub origin: String,
    /// The `--format`, or `"sinc"`.
    pub format: String,
    /// The training rows' source.
    pub train_source: String,
    /// The test rows' source.
    pub test_source: String,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Features.
    pub d: usize,
    /// Whether the features were standardized with the training statistics.
    pub standardized: bool,
    /// `--test-size`.
    pub test_size: Option<usize>,
}

/// The parameters of a `stolr krr` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrrParameters {
    /// Landmarks `M` (not for `krr`).
    pub landmarks: Option<usize>,
    /// λ.
    pub lambda: f64,
    /// How λ was obtained (`given`, or `auto: ...`).
    #[serde(default)]
    pub lambda_source: Option<String>,
    /// Whether an intercept was fitted: an unpenalized term `b` of `f(x) = Σ α_j k(x, z_j) + b`.
    #[serde(default)]
    pub intercept: bool,
    /// Nyström KRR's `--nystrom-solver` (`auto`, `direct`, `cg`).
    #[serde(default)]
    pub nystrom_solver: Option<String>,
    /// ν (SLKL and Unif).
    pub nu: Option<f64>,
    /// How ν was obtained.
    pub nu_source: Option<String>,
    /// SLKL's coordinate rule.
    pub rule: String,
    /// SLKL's KKT tolerance ε.
    pub epsilon: f64,
    /// SLKL's epoch cap.
    pub max_epochs: usize,
    /// Where SLKL's kernel columns come from.
    pub columns: String,
    /// `--seed`.
    pub seed: u64,
}

/// λ chosen by cross-validation (Nyström KRR's `--lambda auto`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaValidation {
    /// Number of folds.
    pub folds: usize,
    /// The λ grid, increasing.
    pub grid: Vec<f64>,
    /// Pooled validation MSE of each λ.
    pub validation_mse: Vec<f64>,
    /// The chosen λ.
    pub chosen: f64,
}

/// ν chosen by cross-validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NuValidation {
    /// Number of folds.
    pub folds: usize,
    /// The ν grid.
    pub grid: Vec<f64>,
    /// Mean validation MSE of each ν.
    pub validation_mse: Vec<f64>,
    /// `‖μ‖₀` of each ν.
    pub sparsity: Vec<f64>,
    /// Mean epochs per fold spent at each ν (SLKL's path: warm-started from the previous ν).
    #[serde(default)]
    pub epochs: Vec<f64>,
    /// SLKL's path: ν_max, the smallest ν with all weights 0, from which the grid descends.
    #[serde(default)]
    pub nu_max: Option<f64>,
    /// SLKL's path: stopped before the end of the grid because the validation error turned.
    #[serde(default)]
    pub stopped_early: bool,
    /// The chosen ν.
    pub chosen: f64,
}

/// The result of a `stolr krr` run; the fields of one solver are `None` for the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrrResult {
    /// The objective at the fit (see `objective_definition`).
    pub objective: f64,
    /// What `objective` is.
    pub objective_definition: String,
    /// Centres of the predictor.
    pub centres: usize,
    /// SLKL and Unif: landmarks with a non-zero weight, `‖μ‖₀`.
    #[serde(default)]
    pub sparsity: Option<usize>,
    /// SLKL: coordinate updates.
    #[serde(default)]
    pub iterations: Option<usize>,
    /// SLKL: epochs run.
    #[serde(default)]
    pub epochs: Option<usize>,
    /// SLKL: why it stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// SLKL: the last epoch's largest KKT violation.
    #[serde(default)]
    pub kkt_violation: Option<f64>,
    /// SLKL: the KKT threshold εν.
    #[serde(default)]
    pub kkt_threshold: Option<f64>,
    /// Unif: the common weight.
    #[serde(default)]
    pub uniform_weight: Option<f64>,
    /// The intercept `b` of `f(x) = Σ α_j k(x, z_j) + b`, in the units of the targets (0 with
    /// `--no-intercept`).
    #[serde(default)]
    pub intercept: f64,
    /// Nyström KRR: the solve used (`direct` or `cg`).
    #[serde(default)]
    pub nystrom_solve: Option<String>,
    /// Nyström KRR by conjugate gradients: iterations run.
    #[serde(default)]
    pub cg_iterations: Option<usize>,
    /// Nyström KRR by conjugate gradients: final relative preconditioned residual.
    #[serde(default)]
    pub cg_residual: Option<f64>,
    /// Mean squared error on the test set.
    #[serde(default)]
    pub test_mse: Option<f64>,
    /// Mean squared error on the training set.
    #[serde(default)]
    pub train_mse: Option<f64>,
}

/// The timings of a `stolr krr` run, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrrTimings {
    /// Reading (or generating) the data.
    pub read: f64,
    /// The bandwidth rule.
    pub bandwidth: f64,
    /// Choosing ν.
    pub nu_selection: f64,
    /// Fitting.
    pub fit: f64,
    /// Predicting the test set.
    pub predict: f64,
    /// The whole run.
    pub total: f64,
}

/// The `report.json` of `stolr krr --out DIR`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrrReport {
    /// The version of Stolr that wrote it.
    pub stolr_version: String,
    /// `"krr"`.
    pub command: String,
    /// The data.
    pub dataset: KrrDataset,
    /// The kernel.
    pub kernel: ReportKernel,
    /// The solver (`slkl`, `krr`, `krr-subset`, `uniform`).
    pub solver: String,
    /// The parameters.
    pub parameters: KrrParameters,
    /// ν's cross-validation, when ν was chosen.
    #[serde(default)]
    pub nu_validation: Option<NuValidation>,
    /// λ's cross-validation, when λ was chosen (`--lambda auto`).
    #[serde(default)]
    pub lambda_validation: Option<LambdaValidation>,
    /// Test error, objective, sparsity.
    pub result: KrrResult,
    /// Timings.
    pub timings_s: KrrTimings,
    /// Peak resident memory of the run in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The files written.
    #[serde(default)]
    pub outputs: Vec<String>,
}

/// The data of a `stolr pca` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaDataset {
    /// The file read, or the generator's description.
    pub source: String,
    /// Samples `n`.
    pub n: usize,
    /// Features `d`.
    pub d: usize,
    /// `--center`.
    pub centered: bool,
    /// `--scale`.
    pub scaled: bool,
    /// `--label-column`: the 1-based column kept as labels, not features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_column: Option<usize>,
    /// `--categorical`: every one-hot encoded column with its categories, in feature order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categorical: Vec<ReportCategorical>,
}

/// The parameters of a `stolr pca` run; each solver fills its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaParameters {
    /// Number of components `r`.
    pub rank: usize,
    /// `--epochs` (SVRG-PCA, VR-PCA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<usize>,
    /// Capped MSG's rank cap `K`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<usize>,
    /// The streaming step scale `c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_scale: Option<f64>,
    /// The streaming step schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_schedule: Option<String>,
    /// MSG's samples per update `--batch` (1: one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// The number of MPI processes when more than one ran the fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// `--seed`.
    pub seed: u64,
}

/// The result of a `stolr pca` run; the fields of the batch (`epochs`, `stop_reason`, `sslev`)
/// and the streaming solvers (`passes`, `samples`, ...) are `None` for the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaResult {
    /// Ritz values of `XᵀX` on the components, nonincreasing.
    pub ritz_values: Vec<f64>,
    /// Always `"nonincreasing"`.
    pub eigenvalue_order: String,
    /// `ritz_values / (n − 1)`.
    pub explained_variance: Vec<f64>,
    /// `explained_variance` over the total variance of the prepared data (the batch solvers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_variance_ratio: Option<Vec<f64>>,
    /// `‖X V‖_F` (\[SVRG-PCA\]'s metric).
    pub captured_norm: f64,
    /// What `captured_norm` is.
    pub captured_norm_meaning: String,
    /// The optimum `‖X V*‖_F` when known in closed form (generated data).
    #[serde(default)]
    pub sslev: Option<f64>,
    /// Epochs run (SVRG-PCA, VR-PCA).
    #[serde(default)]
    pub epochs: Option<usize>,
    /// Why an iterative solver stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Passes over the stream (streaming solvers).
    #[serde(default)]
    pub passes: Option<usize>,
    /// Samples streamed.
    #[serde(default)]
    pub samples: Option<usize>,
    /// Samples per second of the solver's pass.
    #[serde(default)]
    pub samples_per_second: Option<f64>,
    /// Rank of the final iterate (MSG can exceed `r`).
    #[serde(default)]
    pub final_iterate_rank: Option<usize>,
    /// Largest rank of the iterate during the pass.
    #[serde(default)]
    pub max_iterate_rank: Option<usize>,
}

/// The timings of a `stolr pca` run, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaTimings {
    /// Reading the data (batch solvers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<f64>,
    /// The means pass (streaming solvers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<f64>,
    /// The solver.
    pub solve: f64,
    /// The Rayleigh–Ritz pass (streaming solvers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluate: Option<f64>,
    /// The whole run.
    pub total: f64,
}

/// The `report.json` of `stolr pca --out DIR`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaReport {
    /// The version of Stolr that wrote it.
    pub stolr_version: String,
    /// `"pca"`.
    pub command: String,
    /// The data.
    pub dataset: PcaDataset,
    /// The solver (`exact`, `svrg-bb`, `vr-pca`, `msg`, `capped-msg`, `incremental`, `oja`).
    pub solver: String,
    /// SVRG-PCA's `--mode` (`consistent`, `paper`).
    #[serde(default)]
    pub mode: Option<String>,
    /// The parameters.
    pub parameters: PcaParameters,
    /// The components' Ritz values and the run's figures.
    pub result: PcaResult,
    /// Timings.
    pub timings_s: PcaTimings,
    /// Peak resident memory of the run in bytes, when measured.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The files written.
    #[serde(default)]
    pub outputs: Vec<String>,
}

/// The rows a saved model was applied to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyDataset {
    /// The file read.
    pub source: String,
    /// Its `--format`.
    pub format: String,
    /// Rows `m`.
    pub n: usize,
    /// Features `d`.
    pub d: usize,
}

/// What `stolr transform` or `stolr predict` produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyResult {
    /// Rows written.
    pub rows: usize,
    /// Columns of `projections.npy` (transform).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<usize>,
    /// Mean squared error against the rows' targets (predict, when the rows carry targets).
    #[serde(default)]
    pub mse: Option<f64>,
}

/// The `report.json` of `stolr transform` and `stolr predict`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyReport {
    /// The version of Stolr that wrote it.
    pub stolr_version: String,
    /// `"transform"` or `"predict"`.
    pub command: String,
    /// The model file.
    pub model: String,
    /// Its kind (`kernel-pca`, `pca`, `kernel-ridge`).
    pub model_kind: String,
    /// The rows.
    pub dataset: ApplyDataset,
    /// What was written.
    pub result: ApplyResult,
    /// The whole run, in seconds.
    pub total_seconds: f64,
    /// The files written.
    pub outputs: Vec<String>,
}

/// The accuracy certificate of a kernel PCA result (issue 12, item 6): for each eigenpair
/// $(\lambda_i, u_i)$ of the result, measured against the true (centred) kernel matrix
/// $\tilde K$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertificateReport {
    /// `exact` (one product $\tilde K U$) or `estimate` (rows of $\tilde K U$ on uniformly
    /// sampled rows).
    pub method: String,
    /// What the numbers are.
    pub definition: String,
    /// $\|\tilde K u_i - \lambda_i u_i\| / \lambda_1$, one per eigenpair.
    pub residuals: Vec<f64>,
    /// $u_i^\top \tilde K u_i / \operatorname{tr}\tilde K$, one per eigenpair.
    pub captured: Vec<f64>,
    /// The sum of `captured`.
    pub captured_total: f64,
    /// $\operatorname{tr}\tilde K$, the total variance in feature space.
    pub trace: f64,
    /// Rows sampled (estimates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rows: Option<usize>,
    /// 95 % confidence intervals (estimates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<CertificateIntervals>,
    /// Whether the centring statistics were estimated from the sample too (not in the intervals).
    #[serde(default)]
    pub centering_estimated: bool,
    /// Seconds spent computing the certificate.
    pub seconds: f64,
}

/// 95 % confidence intervals of an estimated certificate, `[low, high]` per eigenpair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertificateIntervals {
    /// How they were computed.
    pub method: String,
    /// For each residual.
    pub residuals: Vec<[f64; 2]>,
    /// For each captured fraction.
    pub captured: Vec<[f64; 2]>,
}
