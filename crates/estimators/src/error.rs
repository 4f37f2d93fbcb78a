//! The crate's error type.

/// Errors returned by kernel validation, the bandwidth rule and the sampler constructors.
///
/// Every variant carries the offending values, so that the message alone says what to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EstimatorError {
    /// A sampler was asked for zero random features or sampled columns.
    #[error("the number of {what} must be at least 1, got 0")]
    ZeroFeatures {
        /// What was zero: `"random Fourier features"`, `"sampled columns"`, `"Maclaurin features"`.
        what: &'static str,
    },
    /// A saved random feature map ([`crate::MaclaurinMap::from_parts`]) is inconsistent.
    #[error("invalid random feature map: {reason}")]
    InvalidFeatureMap {
        /// What is wrong, with the values found.
        reason: String,
    },
    /// The data matrix has no rows or no columns.
    #[error("the data matrix is empty ({nrows} samples, {ncols} features): need at least one of each")]
    EmptyData {
        /// Number of samples `n` (rows).
        nrows: usize,
        /// Number of features `d` (columns).
        ncols: usize,
    },
    /// An entry of the data matrix is NaN or infinite.
    #[error("row {row}, column {col} is {value}: data must be finite")]
    NonFinite {
        /// Row (sample) index, 0-based.
        row: usize,
        /// Column (feature) index, 0-based.
        col: usize,
        /// The offending value.
        value: f64,
    },
    /// A kernel parameter is out of its domain.
    #[error("invalid {kernel} kernel: {parameter} = {value}, but {requirement}")]
    InvalidKernel {
        /// Kernel name ([`crate::KernelFamily::name`]).
        kernel: &'static str,
        /// Parameter name ([`crate::Parameter::name`]).
        parameter: &'static str,
        /// The offending value (a degree is converted to `f64`).
        value: f64,
        /// The constraint that was violated, e.g. `"sigma must be finite and > 0"`.
        requirement: &'static str,
    },
    /// The estimator cannot be built for this kernel (e.g. random Fourier features need a
    /// shift-invariant kernel, random Maclaurin features a dot-product kernel).
    #[error("the {estimator} estimator does not support the {kernel} kernel; {hint}")]
    UnsupportedKernel {
        /// Estimator name, as returned by [`crate::KernelSampler::name`].
        estimator: &'static str,
        /// Kernel name.
        kernel: &'static str,
        /// Which kernels or estimators to use instead.
        hint: &'static str,
    },
    /// Two matrices that must agree in one dimension do not (e.g. the fixed rows of
    /// [`crate::CrossKernelPanels`] and the data have different numbers of features).
    #[error("the number of {what} is {found}, expected {expected}")]
    DimensionMismatch {
        /// What was counted.
        what: &'static str,
        /// The size required.
        expected: usize,
        /// The size found.
        found: usize,
    },
    /// The bandwidth rule needs at least two samples.
    #[error("the bandwidth rule needs at least 2 samples to form a pair, got {n}")]
    TooFewSamples {
        /// Number of samples.
        n: usize,
    },
    /// The percentile of the bandwidth rule is outside `(0, 100]`.
    #[error("percentile = {percentile}, but it must lie in (0, 100]")]
    InvalidPercentile {
        /// The offending percentile.
        percentile: f64,
    },
    /// The bandwidth rule was asked to sample zero pairs.
    #[error("the bandwidth rule needs at least 1 sampled pair, got 0")]
    ZeroPairs,
    /// Every row of the data is the same, so the bandwidth rule has no pair of distinct rows.
    #[error("all {n} rows are equal: the bandwidth rule needs two distinct rows; set sigma explicitly")]
    SingleDistinctRow {
        /// Number of rows.
        n: usize,
    },
    /// The requested percentile of the pairwise distances (between distinct rows) is zero, so it
    /// cannot be a bandwidth.
    #[error(
        "the {percentile}-th percentile of {pairs} pairwise distances between distinct rows is 0 \
         (rows too close to tell apart): cannot use it as a kernel bandwidth; \
         raise the percentile or set sigma explicitly"
    )]
    DegenerateBandwidth {
        /// The requested percentile.
        percentile: f64,
        /// Number of pairwise distances the percentile was computed from.
        pairs: usize,
    },
    /// The counts given to a weighted sampler ([`crate::Weighted`]) are not counts of rows, or
    /// its sampler's draws cannot be weighted.
    #[error("cannot weight the draws by the rows' counts: {reason}")]
    InvalidWeights {
        /// What is wrong, with the values found.
        reason: String,
    },
    /// Two inputs do not fit together (e.g. a block applied to the kernel operator).
    #[error("{what}: expected {expected}, found {found}")]
    ShapeMismatch {
        /// What does not fit.
        what: &'static str,
        /// The size it must have.
        expected: usize,
        /// The size it has.
        found: usize,
    },
    /// Float32 rows given to a step that reads the rows in float64 itself (the random feature
    /// samplers): the caller converts them first (`f32_to_f64`).
    #[error("{what} take float64 rows: convert float32 rows first")]
    Float32Unsupported {
        /// What needs float64 rows.
        what: &'static str,
    },
}
