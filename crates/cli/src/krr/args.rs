//! The command line of `stolr krr`: its arguments and their value types.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use stolr_solvers::{KrrMethod, Named};

use crate::common::checkpoint::CheckpointArgs;
use crate::common::input::{Format, TableArgs};
use crate::common::names;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KrrGenerator {
    /// Paper 004's sinc: y = sin(|x|)/|x| on [-5, 5]², 10 dB noise on the training targets.
    Sinc,
    /// Friedman #1: x uniform on [0, 1]^10, y = 10 sin(π x1 x2) + 20 (x3 − 0.5)² + 10 x4 + 5 x5,
    /// N(0, --noise²) noise on the training targets; test targets noise-free.
    Friedman1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuleArg {
    /// Exact coordinate minimiser (never increases the objective).
    Exact,
    /// The paper's projected Newton step (Proposition 1).
    Newton,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NystromSolveArg {
    /// Direct up to M ≈ 7000 (cheaper than ~30 conjugate-gradient passes), else CG.
    Auto,
    /// K_Mn K_nM accumulated in one pass, then two Cholesky factorizations (exact).
    Direct,
    /// Falkon-preconditioned conjugate gradients, recomputing K_nM panel by panel each iteration.
    Cg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColumnsArg {
    /// The M landmark columns computed once (memory 8·n·M bytes).
    Precomputed,
    /// Columns computed when needed; only the active ones are kept.
    OnTheFly,
}

/// Arguments of `stolr krr`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct KrrArgs {
    /// Solver. Which to use: nystrom for accuracy per second and per byte at any n; slkl for
    /// a sparse predictor (fewest centres, cheapest predictions); krr when 16·n² bytes fit
    /// (docs/krr.md).
    #[arg(long, default_value = KrrMethod::Slkl.name(), value_parser = names::parser::<KrrMethod>())]
    pub(super) solver: KrrMethod,
    /// One data file, split at random into training and test sets (needs --format and
    /// --test-size).
    #[arg(long)]
    pub(super) input: Option<PathBuf>,
    /// Training data file (needs --test and --format).
    #[arg(long)]
    pub(super) train: Option<PathBuf>,
    /// Test data file (needs --train and --format).
    #[arg(long)]
    pub(super) test: Option<PathBuf>,
    /// Format of the data files. csv: the last column is the target (or the --label-column);
    /// libsvm: the label is the target (a narrower LIBSVM test file is padded with zero
    /// features).
    #[arg(long, value_enum)]
    pub(super) format: Option<Format>,
    /// CSV tables: `--label-column` names the target column, `--categorical` the columns to
    /// one-hot encode (the encoding is kept in the model, so `stolr predict` reads new rows the
    /// same way; a --test file is encoded with the training file's categories).
    #[command(flatten)]
    pub(super) table: TableArgs,
    /// CSV tables: the 1-based column of the sample weights (finite, >= 0, not all zero; not a
    /// feature): the fit minimises sum_i w_i (y_i - f(x_i))^2 + lambda ||f||^2. Every solver
    /// takes them, on one process (--nu/--lambda given). New rows for `stolr predict` keep the
    /// column (its values are not used).
    #[arg(long, value_name = "COL")]
    pub(super) weight_column: Option<usize>,
    /// Number of test rows of the random split of --input (the split depends on --seed only).
    #[arg(long)]
    pub(super) test_size: Option<usize>,
    /// Built-in generated data (the default when no file is given).
    #[arg(long, value_enum)]
    pub(super) generate: Option<KrrGenerator>,
    /// Generated training points.
    #[arg(long, default_value_t = 1000)]
    pub(super) n_train: usize,
    /// Generated test points.
    #[arg(long, default_value_t = 1000)]
    pub(super) n_test: usize,
    /// Standard deviation of the noise on Friedman #1's training targets.
    #[arg(long, default_value_t = 1.0)]
    pub(super) noise: f64,
    /// Number of landmarks M (slkl, krr-subset, uniform), at most the number of training points.
    #[arg(long, default_value_t = 100)]
    pub(super) landmarks: usize,
    #[doc = "Landmarks from a file instead of drawn: nystrom takes rows or indices, krr-subset and uniform indices."]
    #[arg(long, value_name = "PATH", conflicts_with = "landmarks", long_help = crate::common::landmarks::HELP)]
    pub(super) landmarks_file: Option<PathBuf>,
    /// Ridge λ > 0 (paper 004 fixes λ = 1: only λν matters), or `auto` (Nyström KRR only):
    /// --nu-folds-fold cross-validation over 10^-6 … 10^4, two points per decade, in two
    /// passes over the kernel panels.
    #[arg(long = "lambda", default_value = "1")]
    pub(super) lambda_text: String,
    /// λ resolved from --lambda (a number, or the cross-validated choice).
    #[arg(skip)]
    pub(super) lambda: f64,
    /// No intercept: f(x) = Σ α_j k(x, z_j), the papers' setting. By default the model is
    /// f(x) = Σ α_j k(x, z_j) + b with the intercept b unpenalized (docs/krr.md, "Intercept").
    #[arg(long)]
    pub(super) no_intercept: bool,
    /// How Nyström KRR solves its M × M system.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) nystrom_solver: NystromSolveArg,
    /// Nyström KRR's conjugate gradients stop at this relative preconditioned residual.
    #[arg(long, default_value_t = 1e-8)]
    pub(super) cg_tolerance: f64,
    /// Nyström KRR's conjugate-gradient iteration cap.
    #[arg(long, default_value_t = 200)]
    pub(super) cg_max_iterations: usize,
    /// Sparsity penalty ν > 0 of SLKL (and of Unif's common weight): a number, or `auto` for
    /// --nu-folds-fold cross-validation on the training set. SLKL: a path from ν_max (all
    /// weights 0) down six decades, two points per decade, warm-started, stopping once the
    /// validation error has turned; Unif: 10^-4 … 10^1, two points per decade.
    #[arg(long, default_value = "auto")]
    pub(super) nu: String,
    /// Folds of the cross-validation of --nu auto.
    #[arg(long, default_value_t = 5)]
    pub(super) nu_folds: usize,
    /// Gaussian kernel width: a number, or `auto` (sinc: 1 as in paper 004; otherwise the
    /// --sigma-percentile percentile of the pairwise distances of the standardized training
    /// features).
    #[arg(long, default_value = "auto")]
    pub(super) sigma: String,
    /// Percentile of the width rule of --sigma auto.
    #[arg(long, default_value_t = 20.0)]
    pub(super) sigma_percentile: f64,
    /// Use the features of data files as they are (default: standardize them with the
    /// training set's mean and standard deviation). Generated sinc data are never standardized.
    #[arg(long)]
    pub(super) no_standardize: bool,
    /// SLKL coordinate update rule.
    #[arg(long, value_enum, default_value = "exact")]
    pub(super) rule: RuleArg,
    /// SLKL stopping tolerance ε: stop after an epoch whose largest KKT violation is ≤ ε·ν.
    #[arg(long, default_value_t = 1e-3)]
    pub(super) epsilon: f64,
    /// SLKL maximum number of epochs (one epoch visits the M landmarks once).
    #[arg(long, default_value_t = 1000)]
    pub(super) max_epochs: usize,
    /// SLKL: after a full epoch that fails the KKT test, sweep only the active landmarks until
    /// they pass it, then a full epoch again (faster when few landmarks are active; the paper
    /// sweeps all of them every epoch).
    #[arg(long)]
    pub(super) active_set: bool,
    /// Where SLKL's kernel columns come from.
    #[arg(long, value_enum, default_value = "precomputed")]
    pub(super) columns: ColumnsArg,
    /// Seed of every random choice (data, split, width pairs, landmarks, coordinate order, ν).
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// Output directory for predictions.npy, landmarks.npy, weights.npy, coefficients.npy and
    /// report.json.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    #[command(flatten)]
    pub(super) checkpoint: CheckpointArgs,
    /// Keep the rows of --format libsvm files sparse, never densified: memory follows the stored
    /// entries (16 bytes each), not n·d. Every solver takes them (the same predictions as the
    /// dense run to about 1e-12 times the problem's conditioning), on one process, with
    /// --no-standardize (standardizing would fill every entry) and a given --nu and --lambda
    /// (the cross-validations need dense rows). `stolr predict --sparse` reads new rows so.
    #[arg(long)]
    pub(super) sparse: bool,
}
