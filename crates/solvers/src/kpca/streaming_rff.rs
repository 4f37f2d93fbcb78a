//! Kernel PCA from a stream by random Fourier features: every row is mapped to its features
//! $\zeta(x)$ with $\zeta(x)^\top\zeta(y) \approx \kappa(x, y)$ and the features are fed to a
//! streaming PCA solver (capped MSG by default), in memory independent of the number of rows.

use std::path::Path;

use faer::{Mat, MatRef};
use rand::Rng;
use serde_json::json;
use stolr_estimators::{Kernel, MaclaurinMap};
use stolr_memory::{MemoryBudget, f64_bytes};
use stolr_model::{ModelFile, OneHotEncoding, Standardization};

use crate::kpca::streaming_nystrom::StreamShare;
use crate::model_io::{
    bad, check_encoding, get_encoding, get_f64, get_standardization, get_str, kernel_from_json, kernel_to_json,
    put_encoding, put_standardization,
};
use crate::streaming::{MsgConfig, PassKind, RowPass, RowReadError, RowSource, StreamingPcaJob, StreamingSolver};
use crate::{Observer, PcaModel, Persist, SolverError, Transformer};

/// The name a streamed random-feature model records as its solver.
pub const STREAMING_RFF: &str = "streaming-rff";

/// Configuration of [`streaming_rff_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingRffConfig {
    /// Number of frequencies `D ≥ 1`; each row has `2D` features (a cosine and a sine each).
    pub frequencies: usize,
    /// Number of components `r`, `1 ≤ r < 2D`.
    pub rank: usize,
    /// Centre in feature space by the mean feature vector (a first pass computes it).
    pub center: bool,
    /// The streaming PCA solver the features are fed to.
    pub solver: StreamingSolver,
    /// Rows per update of MSG and capped MSG (1 for the incremental algorithm and Oja).
    pub batch: usize,
    /// The scale `c` of the step size `η_t = c / (√t · running mean of ‖ζ‖²)`.
    pub eta_scale: f64,
    /// The budget the frequencies and the solver's buffers are checked against first.
    pub memory: MemoryBudget,
}

impl StreamingRffConfig {
    /// `frequencies` frequencies, `rank` components, uncentred, capped MSG with cap `2·rank` in
    /// mini-batches of 16 rows, the default step-size scale and budget. (On 600 rows of rings,
    /// one pass, rank 4: cap `2·rank` captured 0.99 of the exact centred top-4 variance, the
    /// streaming PCA default cap `rank + 1` only 0.97 and missed the fourth pair.)
    pub fn new(frequencies: usize, rank: usize) -> Self {
        Self {
            frequencies,
            rank,
            center: false,
            solver: StreamingSolver::CappedMsg { cap: Some(2 * rank) },
            batch: 16,
            eta_scale: MsgConfig::DEFAULT_C,
            memory: MemoryBudget::default(),
        }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// The random Fourier features of one row `x` (length `d`) for frequencies `omega` `(d, D)`:
/// `out[2j] = D^{-1/2} cos(w_jᵀx)`, `out[2j+1] = D^{-1/2} sin(w_jᵀx)` (length `2D`), so that
/// $\zeta(x)^\top\zeta(y) = \frac1D\sum_j \cos(w_j^\top(x - y))$, an unbiased estimate of
/// $\kappa(x, y)$ (the convention of [`stolr_estimators::RandomFourierFeatures`]).
///
/// Each argument $w_j^\top x$ is summed over the nonzero coordinates of `x` in index order
/// (four frequencies at a time, as independent sums), and the cosines and sines of the row's
/// `D` arguments go through [`stolr_estimators::scaled_cos_sin`] as one slice: a row's
/// features are the same bits wherever and with whatever other rows it is evaluated (training
/// passes, [`RffKernelPcaModel::transform`], the incremental solver). Time `O(nnz(x)·D)`.
pub(super) fn features_into(x: &[f64], omega: MatRef<'_, f64>, out: &mut [f64]) {
    let big_d = omega.ncols();
    let scale = 1.0 / (big_d as f64).sqrt();
    let nonzero: Vec<(usize, f64)> = x.iter().copied().enumerate().filter(|&(_, v)| v != 0.0).collect();
    let mut args = vec![0.0; big_d];
    for (c, chunk) in args.chunks_mut(4).enumerate() {
        let first = 4 * c;
        let mut acc = [0.0f64; 4];
        match omega.try_as_col_major() {
            Some(cols) => {
                let w: Vec<&[f64]> = (0..chunk.len())
                    .map(|l| cols.col(first + l).try_as_col_major().expect("column-major").as_slice())
                    .collect();
                for &(k, v) in &nonzero {
                    for (a, wl) in acc.iter_mut().zip(&w) {
                        *a += v * wl[k];
                    }
                }
            }
            None => {
                for &(k, v) in &nonzero {
                    for (l, a) in acc.iter_mut().enumerate().take(chunk.len()) {
                        *a += v * omega[(k, first + l)];
                    }
                }
            }
        }
        chunk.copy_from_slice(&acc[..chunk.len()]);
    }
    let (mut cos, mut sin) = (vec![0.0; big_d], vec![0.0; big_d]);
    stolr_estimators::scaled_cos_sin(&args, scale, &mut cos, &mut sin);
    for (j, (c, s)) in cos.iter().zip(&sin).enumerate() {
        out[2 * j] = *c;
        out[2 * j + 1] = *s;
    }
}

/// The rows of a source mapped to their random Fourier features, each row checked first (a
/// rejected row is reported as [`SolverError::InvalidSample`] inside the reader's error).
struct FeatureSource<'a> {
    source: &'a dyn RowSource,
    omega: MatRef<'a, f64>,
    /// Random Maclaurin features instead of Fourier ones (`omega` is then `(d, 0)`).
    maclaurin: Option<&'a MaclaurinMap>,
}

impl RowSource for FeatureSource<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        Ok(self.maclaurin.map_or(2 * self.omega.ncols(), MaclaurinMap::features))
    }

    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        let (d, omega) = (self.omega.nrows(), self.omega);
        if let Some(map) = self.maclaurin {
            let mut scratch = vec![0.0; map.signs().ncols()];
            return Ok(Box::new(self.source.rows(pass)?.enumerate().map(move |(index, row)| {
                let x = row?;
                crate::kpca::streaming_nystrom::check_row(index, &x, d).map_err(|e| RowReadError(Box::new(e)))?;
                let mut out = vec![0.0; map.features()];
                map.features_into(&x, &mut scratch, &mut out);
                Ok(out)
            })));
        }
        Ok(Box::new(self.source.rows(pass)?.enumerate().map(move |(index, row)| {
            let x = row?;
            crate::kpca::streaming_nystrom::check_row(index, &x, d).map_err(|e| RowReadError(Box::new(e)))?;
            let mut out = vec![0.0; 2 * omega.ncols()];
            features_into(&x, omega, &mut out);
            Ok(out)
        })))
    }
}

/// A row rejected by [`FeatureSource`] comes back as the typed error it is, not as a reader's.
fn unwrap_row_error(e: SolverError) -> SolverError {
    match e {
        SolverError::Stream { index, source } => match source.downcast::<RowReadError>() {
            Ok(read) => match read.0.downcast::<SolverError>() {
                Ok(inner) => *inner,
                Err(other) => SolverError::Stream { index, source: other },
            },
            Err(source) => SolverError::Stream { index, source },
        },
        e => e,
    }
}

/// A kernel PCA model by random Fourier features: $z(x) = V^\top(\zeta(x) - \mu)$ with the
/// frequencies $\Omega$ `(d, D)`, the mean feature vector $\mu$ (length `2D`, zero without
/// centring) and the basis `V` `(2D, r)`; on the training rows it gives the projections
/// (eigenvalues $\sum_i (v_j^\top(\zeta(x_i) - \mu))^2$, on the scale of the kernel matrix).
/// Saved as kind `rff-kernel-pca` (frequencies, mean, components, eigenvalues, kernel; the
/// standardization of the raw rows and the categorical encoding when it has them, absent
/// otherwise, so files without them load as before).
#[derive(Debug, Clone, PartialEq)]
pub struct RffKernelPcaModel {
    kernel: Kernel,
    frequencies: Mat<f64>,
    pca: PcaModel,
    standardization: Option<Standardization>,
    encoding: Option<OneHotEncoding>,
    /// Random Maclaurin features (a dot-product kernel): `frequencies` is then `(d, 0)`.
    maclaurin: Option<MaclaurinMap>,
}

impl RffKernelPcaModel {
    /// The model of `kernel`, `frequencies` `(d, D)` and the PCA model of the features `pca`
    /// (`2D` features).
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `pca` does not take `2D` features;
    /// [`SolverError::ModelMismatch`] for non-finite frequencies; the kernel's errors.
    pub fn new(kernel: Kernel, frequencies: Mat<f64>, pca: PcaModel) -> Result<Self, SolverError> {
        kernel.validate()?;
        if pca.n_features() != 2 * frequencies.ncols() {
            return Err(SolverError::ShapeMismatch {
                what: "features of the PCA model (two per frequency)",
                expected: 2 * frequencies.ncols(),
                found: pca.n_features(),
            });
        }
        let finite = (0..frequencies.ncols()).all(|j| frequencies.col(j).iter().all(|v| v.is_finite()));
        if !finite {
            return Err(SolverError::ModelMismatch { reason: "the frequencies have non-finite entries".into() });
        }
        Ok(Self { kernel, frequencies, pca, standardization: None, encoding: None, maclaurin: None })
    }

    /// The model of a dot-product `kernel` (polynomial) by random Maclaurin features `map`
    /// (Kar & Karnick 2012) and the PCA model of the features `pca` (`D` features):
    /// $z(x) = V^\top(m(x) - \mu)$ with $m$ the map's features.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `pca` does not take the map's `D` features; the
    /// kernel's errors.
    pub fn maclaurin(kernel: Kernel, map: MaclaurinMap, pca: PcaModel) -> Result<Self, SolverError> {
        kernel.validate()?;
        if pca.n_features() != map.features() {
            return Err(SolverError::ShapeMismatch {
                what: "features of the PCA model (one per Maclaurin feature)",
                expected: map.features(),
                found: pca.n_features(),
            });
        }
        let frequencies = Mat::zeros(map.dim(), 0);
        Ok(Self { kernel, frequencies, pca, standardization: None, encoding: None, maclaurin: Some(map) })
    }

    /// The random Maclaurin feature map, for a model of a dot-product kernel (`None`: random
    /// Fourier features, [`RffKernelPcaModel::frequencies`]).
    pub fn maclaurin_map(&self) -> Option<&MaclaurinMap> {
        self.maclaurin.as_ref()
    }

    /// The model with `standardization` applied to every raw row before its features
    /// (`x ← (x − mean) / scale`, [`Standardization::apply`]): the frequencies were drawn for,
    /// and the solver fed, the standardized rows.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] if its width is not `d`.
    pub fn with_standardization(mut self, standardization: Option<Standardization>) -> Result<Self, SolverError> {
        if let Some(s) = &standardization
            && (s.mean.len() != self.n_features() || s.scale.len() != self.n_features())
        {
            return Err(SolverError::ModelMismatch {
                reason: format!("the standardization has width {}, the model {}", s.mean.len(), self.n_features()),
            });
        }
        self.standardization = standardization;
        Ok(self)
    }

    /// The model with `encoding`, the one-hot encoding of the table its rows were read from
    /// (saved with the model so that new rows are read the same way; it does not change
    /// [`Transformer::transform`], which takes encoded rows).
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] if the encoding does not produce `d` features.
    pub fn with_encoding(mut self, encoding: Option<OneHotEncoding>) -> Result<Self, SolverError> {
        check_encoding(encoding.as_ref(), self.n_features())?;
        self.encoding = encoding;
        Ok(self)
    }

    /// The standardization of the raw rows, if any.
    pub fn standardization(&self) -> Option<&Standardization> {
        self.standardization.as_ref()
    }

    /// The categorical encoding of the raw rows, if the model was fitted on a table with one.
    pub fn encoding(&self) -> Option<&OneHotEncoding> {
        self.encoding.as_ref()
    }

    /// The kernel the features approximate.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The frequencies `(d, D)`, one per column.
    pub fn frequencies(&self) -> MatRef<'_, f64> {
        self.frequencies.as_ref()
    }

    /// The PCA model of the features: mean `μ` (length `2D`), basis `V` `(2D, r)`, eigenvalues.
    pub fn pca(&self) -> &PcaModel {
        &self.pca
    }

    /// Eigenvalues, nonincreasing, on the scale of the kernel matrix, length `r`.
    pub fn eigenvalues(&self) -> &[f64] {
        self.pca.eigenvalues()
    }

    /// Number of features `d` of the rows the model takes.
    pub fn n_features(&self) -> usize {
        self.frequencies.nrows()
    }
}

impl Transformer for RffKernelPcaModel {
    /// $V^\top(\zeta(x) - \mu)$ for every row of `x` `(m, d)` (raw rows: a model with a
    /// standardization applies it first); result `(m, r)`. Blocks of 1024 rows, memory
    /// `8·1024·2D` bytes.
    fn transform(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        let d = self.n_features();
        if x.ncols() != d {
            return Err(SolverError::ShapeMismatch {
                what: "number of features of the new rows",
                expected: d,
                found: x.ncols(),
            });
        }
        crate::error::check_data_allow_empty(x)?;
        let standardized = match &self.standardization {
            Some(s) => Some(crate::model_io::prepare_rows(x, d, Some(s))?),
            None => None,
        };
        let x = standardized.as_ref().map_or(x, |s| s.as_ref());
        let width = self.maclaurin.as_ref().map_or(2 * self.frequencies.ncols(), MaclaurinMap::features);
        let (m, r) = (x.nrows(), self.pca.rank());
        let mut z = Mat::<f64>::zeros(m, r);
        let mut row = vec![0.0; d];
        let mut feats = vec![0.0; width];
        let mut scratch = vec![0.0; self.maclaurin.as_ref().map_or(0, |map| map.signs().ncols())];
        for start in (0..m).step_by(1024) {
            let len = 1024.min(m - start);
            let mut block = Mat::<f64>::zeros(len, width);
            for i in 0..len {
                row.iter_mut().enumerate().for_each(|(j, v)| *v = x[(start + i, j)]);
                match &self.maclaurin {
                    Some(map) => map.features_into(&row, &mut scratch, &mut feats),
                    None => features_into(&row, self.frequencies.as_ref(), &mut feats),
                }
                feats.iter().enumerate().for_each(|(j, v)| block[(i, j)] = *v);
            }
            let projected = self.pca.transform(block.as_ref())?;
            z.as_mut().subrows_mut(start, len).copy_from(projected.as_ref());
        }
        Ok(z)
    }
}

impl Persist for RffKernelPcaModel {
    const KIND: &'static str = "rff-kernel-pca";

    fn to_model_file(&self) -> ModelFile {
        let parameters = json!({
            "solver": self.pca.solver(),
            "kernel": kernel_to_json(&self.kernel),
            "n_samples": self.pca.n_samples(),
            "n_features": self.n_features(),
            "frequencies": self.frequencies.ncols(),
            "rank": self.pca.rank(),
            "eigenvalue_order": "nonincreasing",
            "transform": "f = [cos(x @ w_j), sin(x @ w_j)]_j / sqrt(D) (w_j = frequencies[:, j], cos/sin interleaved); \
                          z = (f - mean) @ components",
        });
        let mut parameters = parameters;
        let version = put_encoding(&mut parameters, self.encoding.as_ref());
        if let Some(map) = &self.maclaurin {
            // No "frequencies": a build without Maclaurin models refuses the file, not misreads it.
            parameters["feature_map"] = json!("maclaurin");
            parameters["frequencies"] = json!(0);
            parameters["features"] = json!(map.features());
            parameters["transform"] = json!(
                "f_j = maclaurin_scales[j] * prod(x @ maclaurin_signs[:, c] for the maclaurin_orders[j] columns c \
                 after those of the features before j); z = (f - mean) @ components"
            );
        }
        let mut file = ModelFile::new(Self::KIND, parameters);
        file.require_format_version(version);
        put_standardization(&mut file, self.standardization.as_ref());
        match &self.maclaurin {
            Some(map) => {
                file.put_matrix("maclaurin_signs", map.signs());
                file.put_vector("maclaurin_orders", &map.orders().iter().map(|&o| f64::from(o)).collect::<Vec<_>>());
                file.put_vector("maclaurin_scales", map.scales());
            }
            None => file.put_matrix("frequencies", self.frequencies.as_ref()),
        }
        file.put_vector("mean", self.pca.mean());
        file.put_matrix("components", self.pca.components());
        file.put_vector("eigenvalues", self.pca.eigenvalues());
        file
    }

    fn from_model_file(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let kernel = kernel_from_json(file.parameters().get("kernel").unwrap_or(&serde_json::Value::Null), path)?;
        let n = get_f64(file, "n_samples", path)?;
        if !(n >= 1.0 && n.fract() == 0.0) {
            return Err(bad(path, format!("n_samples must be a positive integer, got {n}")));
        }
        let mean = file.vector("mean")?;
        let width = mean.len();
        let pca = PcaModel::new(
            get_str(file, "solver", path)?,
            mean,
            vec![1.0; width],
            file.matrix("components")?,
            file.vector("eigenvalues")?,
            n as usize,
        )
        .map_err(|e| bad(path, e.to_string()))?;
        let maclaurin = match file.parameters().get("feature_map").and_then(serde_json::Value::as_str) {
            None | Some("fourier") => None,
            Some("maclaurin") => {
                let orders = file.vector("maclaurin_orders")?;
                if orders.iter().any(|o| !(*o >= 0.0 && o.fract() == 0.0 && *o <= f64::from(u32::MAX))) {
                    return Err(bad(path, "maclaurin_orders must be nonnegative integers"));
                }
                let orders = orders.iter().map(|&o| o as u32).collect();
                let map =
                    MaclaurinMap::from_parts(file.matrix("maclaurin_signs")?, orders, file.vector("maclaurin_scales")?)
                        .map_err(|e| bad(path, e.to_string()))?;
                Some(map)
            }
            Some(other) => return Err(bad(path, format!("unknown feature_map '{other}'"))),
        };
        let (model, d) = match maclaurin {
            Some(map) => {
                let d = map.dim();
                (Self::maclaurin(kernel, map, pca), d)
            }
            None => {
                let frequencies = file.matrix("frequencies")?;
                let d = frequencies.nrows();
                (Self::new(kernel, frequencies, pca), d)
            }
        };
        let standardization = get_standardization(file, d, path)?;
        let encoding = get_encoding(file, d, path)?;
        model
            .and_then(|m| m.with_standardization(standardization))
            .and_then(|m| m.with_encoding(encoding))
            .map_err(|e| bad(path, e.to_string()))
    }
}

/// What [`streaming_rff_fit`] returns.
pub struct StreamingRffFit {
    /// The model (frequencies, feature mean, basis, eigenvalues).
    pub model: RffKernelPcaModel,
    /// Eigenvalues on the kernel-matrix scale, nonincreasing, length `r`.
    pub eigenvalues: Vec<f64>,
    /// Rows read, `n`.
    pub n: usize,
    /// Passes over the rows: the solver's and the Rayleigh–Ritz pass, and the mean's first with
    /// centring.
    pub passes: usize,
}

/// Kernel PCA of every row of a stream by random Fourier features and a streaming PCA solver
/// (\[MSG\]; Ullah, Mianjy, Marinov and Arora, NeurIPS 2018): `D` frequencies are drawn from
/// the kernel's spectral density by `rng` ([`Kernel::draw_frequencies`]), every row `x` becomes
/// $\zeta(x) \in \mathbb R^{2D}$ (`features_into`: $\zeta(x)^\top\zeta(y)$ estimates
/// $\kappa(x, y)$ without bias), and `config.solver` runs over the features in mini-batches
/// of `config.batch` rows ([`StreamingPcaJob`], its solver seeded from `rng`). With centring, a
/// first pass computes the mean feature vector $\mu$ and the solver sees $\zeta(x) - \mu$:
/// the random-feature Gram matrix $Z Z^\top$ is centred exactly, the kernel matrix only as far
/// as $Z Z^\top$ approximates it. A last (Rayleigh–Ritz) pass rotates the solver's subspace
/// `V` to $\sum_i V^\top(\zeta_i - \mu)(\zeta_i - \mu)^\top V$'s eigenvectors: the eigenvalues
/// are those of $V^\top Z^\top H Z V$, on the scale of the kernel matrix (sums over rows, not
/// means). Memory `8·(d·D + 3·2D·(r + 2) + 2·batch·2D)` bytes, checked first; the rows are never
/// held. The same seed gives the same bits.
///
/// # Errors
/// [`SolverError::InvalidRank`] for `r` outside `[1, 2D)`; [`SolverError::InvalidConfig`] for
/// an empty stream or an invalid batch; [`SolverError::Estimator`] for 0 frequencies, a kernel
/// that is not shift-invariant (polynomial) or invalid parameters;
/// [`SolverError::InvalidSample`] for a row with a non-finite entry or another width;
/// [`SolverError::Memory`] over the budget; the reader's errors as [`SolverError::Stream`].
///
/// # References
/// Rahimi & Recht, NIPS 2007 (random Fourier features); \[MSG\] (capped MSG); Ullah et al.,
/// "Streaming kernel PCA with Õ(√n) random features", NeurIPS 2018.
pub fn streaming_rff_fit<R: Rng + ?Sized>(
    source: &dyn RowSource,
    kernel: &Kernel,
    config: &StreamingRffConfig,
    rng: &mut R,
    observer: &mut dyn Observer,
) -> Result<StreamingRffFit, SolverError> {
    streaming_rff_fit_with(source, kernel, config, rng, &stolr_comm::SingleProcess, observer)
}

/// The rows of one rank of a run ([`StreamShare`]) of a stream that every rank reads whole.
struct SharedRows<'a> {
    source: &'a dyn RowSource,
    share: StreamShare,
}

impl RowSource for SharedRows<'_> {
    fn dim(&self) -> Result<usize, SolverError> {
        self.source.dim()
    }

    /// This rank's rows, each checked, with a reader's error or a rejected row reported at its
    /// index in the whole stream (not in this rank's share).
    fn rows(&self, pass: PassKind) -> Result<RowPass<'_>, SolverError> {
        let share = self.share;
        let d = self.source.dim()?;
        Ok(Box::new(self.source.rows(pass)?.enumerate().filter(move |(i, _)| share.owns(*i)).map(
            move |(index, row)| {
                let x = row.map_err(|e| RowReadError(Box::new(SolverError::Stream { index, source: Box::new(e) })))?;
                crate::kpca::streaming_nystrom::check_row(index, &x, d).map_err(|e| RowReadError(Box::new(e)))?;
                Ok(x)
            },
        )))
    }
}

/// [`streaming_rff_fit`] on the ranks of `comm`, each reading the whole stream (`source` gives
/// every row, in the same order on every rank) and feeding its share of every mini-batch:
/// the rows are shared in blocks of `config.batch` rows ([`StreamShare::of`]), so that each
/// data-parallel mini-batch of the job ([`StreamingPcaJob`], `RowShard::balanced(batch, ·, P)`
/// rows per rank, gathered in rank order) is the mini-batch of one process, row for row: the
/// solver's updates are the same bits for every number of processes, and the feature mean and
/// the Rayleigh–Ritz sums, added over the ranks, differ from one process's by rounding only.
/// `observer` sees the solver's pass on rank 0 and may offer checkpoints (the job's: the
/// solver's state and the position in the stream; one process only, as the job's).
///
/// # Errors
/// As [`streaming_rff_fit`]; [`SolverError::InvalidConfig`] for a batch smaller than the
/// number of processes.
pub fn streaming_rff_fit_with<R: Rng + ?Sized>(
    source: &dyn RowSource,
    kernel: &Kernel,
    config: &StreamingRffConfig,
    rng: &mut R,
    comm: &dyn stolr_comm::Communicator,
    observer: &mut dyn Observer,
) -> Result<StreamingRffFit, SolverError> {
    let share = if comm.size() > 1 {
        if config.batch < comm.size() {
            return Err(SolverError::InvalidConfig {
                name: "batch",
                reason: format!(
                    "{} is smaller than the {} processes: every rank adds at least one of its rows to each mini-batch",
                    config.batch,
                    comm.size()
                ),
            });
        }
        StreamShare::of(comm, config.batch)?
    } else {
        StreamShare::whole()
    };
    let shared = SharedRows { source, share };
    let source: &dyn RowSource = &shared;
    kernel.validate()?;
    let d = source.dim()?;
    let big_d = config.frequencies;
    // A dot-product kernel (polynomial) takes random Maclaurin features: D of them, their
    // Rademacher vectors about d × D (the orders average at most 1), checked as drawn.
    let dot_product = kernel.maclaurin_coefficient(0).is_some();
    config.memory.check(
        format!(
            "the d × D random {} vectors (d = {d}, D = {big_d})",
            if dot_product { "Maclaurin" } else { "Fourier" }
        ),
        f64_bytes(&[d, big_d]),
    )?;
    let mut by_ref = &mut *rng;
    let maclaurin = if dot_product { Some(MaclaurinMap::draw(kernel, d, big_d, &mut by_ref)?) } else { None };
    let omega = match &maclaurin {
        Some(_) => Mat::zeros(d, 0),
        None => kernel.draw_frequencies(d, big_d, &mut by_ref)?,
    };
    let width = if dot_product { big_d } else { big_d.saturating_mul(2) };
    if config.rank == 0 || config.rank >= width {
        return Err(SolverError::InvalidRank {
            rank: config.rank,
            reason: format!("random-feature kernel PCA needs 1 <= r < {width} features"),
        });
    }
    let seed = rng.next_u64();
    let job = StreamingPcaJob {
        solver: config.solver,
        rank: config.rank,
        eta_scale: config.eta_scale,
        batch: config.batch,
        center: config.center,
        scale: false,
        seed,
        memory: config.memory,
    };
    let features = FeatureSource { source, omega: omega.as_ref(), maclaurin: maclaurin.as_ref() };
    let outcome = job.run(&features, comm, observer).map_err(unwrap_row_error)?;
    let eigenvalues = outcome.pairs.values.clone();
    let pca = outcome.model;
    let pca = PcaModel::new(
        STREAMING_RFF,
        pca.mean().to_vec(),
        pca.scale().to_vec(),
        pca.components().to_owned(),
        pca.eigenvalues().to_vec(),
        outcome.samples,
    )?;
    let model = match maclaurin {
        Some(map) => RffKernelPcaModel::maclaurin(*kernel, map, pca)?,
        None => RffKernelPcaModel::new(*kernel, omega, pca)?,
    };
    Ok(StreamingRffFit { model, eigenvalues, n: outcome.samples, passes: outcome.passes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpca::{ExactKpcaConfig, exact_kpca, kernel_matrix};
    use crate::streaming::MatrixSource;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_lowrank::sym_eigen_desc;
    use stolr_model::Standardization;

    /// Two noisy rings and a blob in 3 dimensions, with a constant third column.
    fn rings(n: usize) -> Mat<f64> {
        Mat::from_fn(n, 3, |i, j| {
            let t = i as f64 * 0.6180339887 * std::f64::consts::TAU;
            let radius = [1.0, 3.0, 0.0][i % 3] + 0.15 * ((i * 13) as f64 * 0.77).sin();
            match j {
                0 => radius * t.cos(),
                1 => radius * t.sin(),
                _ => 2.0,
            }
        })
    }

    fn fit(x: MatRef<'_, f64>, config: &StreamingRffConfig, seed: u64) -> Result<StreamingRffFit, SolverError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        streaming_rff_fit(&MatrixSource(x), &Kernel::gaussian(1.0), config, &mut rng, &mut ())
    }

    /// The share of the exact centred kernel PCA's top-`k` variance captured by the span of
    /// the columns of `z` `(n, k)`: $\mathrm{tr}(Q^\top \tilde K Q) / \sum_{j \le k}\lambda_j$.
    fn captured_share(z: MatRef<'_, f64>, kc: MatRef<'_, f64>, top: &[f64]) -> f64 {
        let (values, vectors) = sym_eigen_desc((z.transpose() * z).as_ref()).unwrap();
        let k = z.ncols();
        let kept = values.iter().take_while(|&&v| v > 1e-12 * values[0]).count();
        assert_eq!(kept, k, "the projections span {kept} < {k} dimensions");
        let q = Mat::from_fn(z.nrows(), k, |i, j| {
            (0..k).map(|l| z[(i, l)] * vectors[(l, j)]).sum::<f64>() / values[j].sqrt()
        });
        let captured = (q.transpose() * kc * &q).diagonal().column_vector().sum();
        captured / top.iter().sum::<f64>()
    }

    #[test]
    fn fourier_features_match_the_direct_formula_on_sparse_and_extreme_rows() {
        let kernel = Kernel::gaussian(2.0);
        let (d, big_d) = (9, 37);
        let omega = kernel.draw_frequencies(d, big_d, &mut Xoshiro256PlusPlus::seed_from_u64(5)).unwrap();
        let rows: [Vec<f64>; 4] = [
            vec![0.0; 9],
            vec![0.0, 1.5, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 3.25],
            vec![1e3, -1e3, 0.5, 0.0, 7.0, -7.0, 1e-8, 0.0, 2.0],
            (0..9).map(|k| (k as f64 * 0.7).sin()).collect(),
        ];
        let scale = 1.0 / (big_d as f64).sqrt();
        for x in &rows {
            let mut out = vec![0.0; 2 * big_d];
            features_into(x, omega.as_ref(), &mut out);
            for j in 0..big_d {
                let t: f64 = (0..d).map(|k| x[k] * omega[(k, j)]).sum();
                // A few ulps of the argument's magnitude (the sum's rounding and the vectorized
                // sin/cos), never more.
                let tol = 1e-14 * (1.0 + t.abs());
                assert!((out[2 * j] - scale * t.cos()).abs() <= tol, "cos, x = {x:?}, j = {j}");
                assert!((out[2 * j + 1] - scale * t.sin()).abs() <= tol, "sin, x = {x:?}, j = {j}");
            }
        }
        // A row's features do not depend on the rows transformed with it.
        let model_rows = Mat::from_fn(4, d, |i, k| rows[i][k]);
        let pca = PcaModel::new(
            "t",
            vec![0.0; 2 * big_d],
            vec![1.0; 2 * big_d],
            Mat::identity(2 * big_d, 3),
            vec![3.0, 2.0, 1.0],
            4,
        )
        .unwrap();
        let model = RffKernelPcaModel::new(kernel, omega.clone(), pca).unwrap();
        let together = model.transform(model_rows.as_ref()).unwrap();
        for i in 0..4 {
            let alone = model.transform(model_rows.as_ref().subrows(i, 1)).unwrap();
            assert_eq!(alone.row(0), together.row(i));
        }
    }

    #[test]
    fn many_features_capture_the_exact_centred_top_variance() {
        let n = 600;
        let x = rings(n);
        let kernel = Kernel::gaussian(1.0);
        let k = 4;
        let exact = exact_kpca(
            x.as_ref(),
            &kernel,
            &ExactKpcaConfig { center: true, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(k) },
        )
        .unwrap();
        let kc = kernel_matrix(x.as_ref(), &kernel, true, MemoryBudget::UNLIMITED).unwrap();
        // The default (capped MSG, cap 2k, mini-batches of 16), one row at a time, and the
        // incremental algorithm. (Measured: cap k + 1 captures 0.969 and misses the 4th pair.)
        let default = StreamingRffConfig::new(2000, k);
        for (solver, batch) in [
            (default.solver, default.batch),
            (StreamingSolver::CappedMsg { cap: Some(2 * k) }, 1),
            (StreamingSolver::Incremental, 1),
        ] {
            let config = StreamingRffConfig {
                solver,
                batch,
                memory: MemoryBudget::UNLIMITED,
                ..StreamingRffConfig::new(2000, k).center(true)
            };
            let fit = fit(x.as_ref(), &config, 4).unwrap();
            assert_eq!((fit.n, fit.passes), (n, 3));
            let z = fit.model.transform(x.as_ref()).unwrap();
            let share = captured_share(z.as_ref(), kc.as_ref(), &exact.values);
            eprintln!(
                "{solver:?}, batch {batch}: captured share {share:.5}, eigenvalues {:?} vs exact {:?}",
                fit.eigenvalues, exact.values
            );
            assert!(share >= 0.97, "{solver:?}, batch {batch}: captured share {share}");
            // Eigenvalues on the kernel-matrix scale: within the random-feature and one-pass
            // error of the exact ones (a wrong scale, e.g. means instead of sums, is off by n).
            for (a, b) in fit.eigenvalues.iter().zip(&exact.values) {
                assert!((a - b).abs() <= 0.15 * b, "{solver:?}, batch {batch}: eigenvalue {a} vs exact {b}");
            }
        }
    }

    #[test]
    fn the_features_estimate_the_kernel_without_bias() {
        // ζ(x)ᵀζ(y) is the mean of D terms cos(wᵀ(x − y)), each of variance at most 1/2: with
        // D = 20000 its standard deviation is at most 0.005; 5 deviations is 0.025.
        let (x, y) = ([0.3, -1.2, 2.0], [1.1, -0.4, 1.5]);
        for kernel in [Kernel::gaussian(1.3), Kernel::laplacian(2.0)] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
            let omega = kernel.draw_frequencies(3, 20_000, &mut rng).unwrap();
            let (mut zx, mut zy) = (vec![0.0; 40_000], vec![0.0; 40_000]);
            features_into(&x, omega.as_ref(), &mut zx);
            features_into(&y, omega.as_ref(), &mut zy);
            let estimate: f64 = zx.iter().zip(&zy).map(|(a, b)| a * b).sum();
            let exact = kernel.eval(&x, &y);
            assert!((estimate - exact).abs() <= 0.025, "{kernel:?}: {estimate} vs {exact}");
            let norm: f64 = zx.iter().map(|a| a * a).sum();
            assert!((norm - 1.0).abs() <= 1e-12, "ζ(x)ᵀζ(x) = 1 = κ(x, x), got {norm}");
        }
    }

    #[test]
    fn equal_seeds_give_equal_bits_and_the_model_round_trips() {
        let x = rings(300);
        let config =
            StreamingRffConfig { memory: MemoryBudget::UNLIMITED, ..StreamingRffConfig::new(50, 3).center(true) };
        let a = fit(x.as_ref(), &config, 8).unwrap();
        let b = fit(x.as_ref(), &config, 8).unwrap();
        assert_eq!(a.model, b.model);
        assert_eq!(a.eigenvalues, b.eigenvalues);
        let c = fit(x.as_ref(), &config, 9).unwrap();
        assert_ne!(a.model.frequencies(), c.model.frequencies());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.npz");
        a.model.save(&path).unwrap();
        let back = RffKernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap();
        assert_eq!(back, a.model);
        let new_rows = Mat::from_fn(7, 3, |i, j| ((i * 3 + j) as f64 * 0.37).sin());
        assert_eq!(back.transform(new_rows.as_ref()).unwrap(), a.model.transform(new_rows.as_ref()).unwrap());
        // The centred training projections have mean zero (the mean of the features is exact).
        let z = a.model.transform(x.as_ref()).unwrap();
        for j in 0..z.ncols() {
            assert!(z.col(j).sum().abs() <= 1e-10 * 300.0, "column {j}");
        }
    }

    #[test]
    fn maclaurin_features_capture_the_polynomial_kernel_pca_and_the_model_round_trips() {
        let n = 300;
        let x = rings(n);
        let kernel = Kernel::polynomial(3.0, 1.0, 2);
        let k = 3;
        let exact = exact_kpca(
            x.as_ref(),
            &kernel,
            &ExactKpcaConfig { center: true, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(k) },
        )
        .unwrap();
        let kc = kernel_matrix(x.as_ref(), &kernel, true, MemoryBudget::UNLIMITED).unwrap();
        let config = StreamingRffConfig {
            solver: StreamingSolver::Incremental,
            batch: 1,
            memory: MemoryBudget::UNLIMITED,
            ..StreamingRffConfig::new(4000, k).center(true)
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let fit = streaming_rff_fit(&MatrixSource(x.as_ref()), &kernel, &config, &mut rng, &mut ()).unwrap();
        let map = fit.model.maclaurin_map().expect("a polynomial kernel takes Maclaurin features");
        assert_eq!((map.features(), fit.model.pca().n_features()), (4000, 4000));
        let z = fit.model.transform(x.as_ref()).unwrap();
        let share = captured_share(z.as_ref(), kc.as_ref(), &exact.values);
        eprintln!(
            "Maclaurin: captured share {share:.5}, eigenvalues {:?} vs exact {:?}",
            fit.eigenvalues, exact.values
        );
        assert!(share >= 0.95, "captured share {share}");
        for (a, b) in fit.eigenvalues.iter().zip(&exact.values) {
            assert!((a - b).abs() <= 0.2 * b, "eigenvalue {a} vs exact {b}");
        }
        // Saved and loaded: the same map and the same projections.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.npz");
        fit.model.save(&path).unwrap();
        let back = RffKernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap();
        assert_eq!(back, fit.model);
        assert_eq!(back.transform(x.as_ref()).unwrap(), z);
        // Standardization and encoding are kept and applied: the model standardizes raw rows.
        let stats = Standardization { mean: vec![0.5, -0.25, 2.0], scale: vec![2.0, 4.0, 1.0] };
        let with = fit.model.clone().with_standardization(Some(stats.clone())).unwrap();
        let raw = Mat::from_fn(n, 3, |i, j| x[(i, j)] * stats.scale[j] + stats.mean[j]);
        let again = with.transform(raw.as_ref()).unwrap();
        let diff = (0..k).flat_map(|j| (0..n).map(move |i| (i, j))).map(|(i, j)| (again[(i, j)] - z[(i, j)]).abs());
        assert!(diff.fold(0.0, f64::max) <= 1e-9 * z[(0, 0)].abs().max(1.0));
        with.save(&path).unwrap();
        assert_eq!(RffKernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap(), with);
        // A damaged map is refused on load, not misread.
        let mut file = with.to_model_file();
        file.put_vector("maclaurin_orders", &vec![1.5; 4000]);
        let damaged = dir.path().join("damaged.npz");
        file.save(&damaged).unwrap();
        assert!(RffKernelPcaModel::load(&damaged, MemoryBudget::UNLIMITED).is_err());
    }

    #[test]
    fn hostile_inputs_give_typed_errors() {
        let x = rings(40);
        let config =
            StreamingRffConfig { memory: MemoryBudget::UNLIMITED, ..StreamingRffConfig::new(10, 2).center(true) };
        let mut bad = x.clone();
        bad[(23, 1)] = f64::NAN;
        match fit(bad.as_ref(), &config, 1) {
            Err(SolverError::InvalidSample { index: 23, reason }) => assert!(reason.contains("finite"), "{reason}"),
            other => panic!("expected the NaN row to be rejected, got {:?}", other.err()),
        }
        let uncentred = StreamingRffConfig { center: false, ..config.clone() };
        assert!(matches!(fit(bad.as_ref(), &uncentred, 1), Err(SolverError::InvalidSample { index: 23, .. })));
        assert!(matches!(
            fit(x.as_ref(), &StreamingRffConfig { rank: 0, ..config.clone() }, 1),
            Err(SolverError::InvalidRank { rank: 0, .. })
        ));
        assert!(matches!(
            fit(x.as_ref(), &StreamingRffConfig { rank: 20, ..config.clone() }, 1),
            Err(SolverError::InvalidRank { rank: 20, .. })
        ));
        assert!(matches!(
            fit(x.as_ref(), &StreamingRffConfig { frequencies: 0, ..config.clone() }, 1),
            Err(SolverError::Estimator(_))
        ));
        let empty = Mat::<f64>::zeros(0, 3);
        assert!(matches!(fit(empty.as_ref(), &config, 1), Err(SolverError::InvalidConfig { .. })));
        // The polynomial kernel takes Maclaurin features: D = 10 of them, so rank 10 is refused.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let poly = StreamingRffConfig { rank: 10, ..config.clone() };
        assert!(matches!(
            streaming_rff_fit(&MatrixSource(x.as_ref()), &Kernel::polynomial(1.0, 1.0, 2), &poly, &mut rng, &mut ()),
            Err(SolverError::InvalidRank { rank: 10, .. })
        ));
        let tight = StreamingRffConfig { memory: MemoryBudget::bytes(1000), ..config.clone() };
        assert!(matches!(fit(x.as_ref(), &tight, 1), Err(SolverError::Memory(_))));
    }

    #[test]
    fn every_number_of_processes_gives_the_one_process_answer() {
        // 1000 rows: the last mini-batch of 16 is partial; 16 rows over 3 ranks are 6, 5, 5.
        let x = rings(1000);
        let probe = Mat::from_fn(25, 3, |i, j| ((i * 3 + j) as f64 * 0.37).sin() * 2.0);
        for center in [false, true] {
            let config =
                StreamingRffConfig { memory: MemoryBudget::UNLIMITED, ..StreamingRffConfig::new(60, 4).center(center) };
            let one = fit(x.as_ref(), &config, 3).unwrap();
            let z1 = one.model.transform(probe.as_ref()).unwrap();
            let scale = z1.norm_max();
            for size in [2, 3] {
                let fits = stolr_comm::ThreadGroup::run(size, |comm| {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
                    let source = MatrixSource(x.as_ref());
                    streaming_rff_fit_with(&source, &Kernel::gaussian(1.0), &config, &mut rng, comm, &mut ()).unwrap()
                });
                for (rank, f) in fits.iter().enumerate() {
                    let tag = format!("center = {center}, P = {size}, rank {rank}");
                    assert_eq!(f.n, 1000, "{tag}");
                    assert_eq!(f.model.frequencies(), one.model.frequencies(), "{tag}");
                    for (a, b) in f.eigenvalues.iter().zip(&one.eigenvalues) {
                        assert!((a - b).abs() <= 1e-10 * one.eigenvalues[0], "{tag}: eigenvalue {a} vs {b}");
                    }
                    let z = f.model.transform(probe.as_ref()).unwrap();
                    let dz = (&z - &z1).norm_max();
                    assert!(dz <= 1e-10 * scale, "{tag}: projections differ by {dz}");
                }
            }
        }
        // A batch smaller than the processes is refused on every rank.
        let small = StreamingRffConfig { batch: 2, memory: MemoryBudget::UNLIMITED, ..StreamingRffConfig::new(10, 2) };
        let errors = stolr_comm::ThreadGroup::run(3, |comm| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
            streaming_rff_fit_with(&MatrixSource(x.as_ref()), &Kernel::gaussian(1.0), &small, &mut rng, comm, &mut ())
                .err()
        });
        assert!(errors.iter().all(|e| matches!(e, Some(SolverError::InvalidConfig { name: "batch", .. }))));
    }
}
