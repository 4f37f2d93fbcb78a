//! The fitted kernel PCA model: projections of new rows on the kernel principal axes.

use std::path::Path;

use faer::{Mat, MatRef};
use serde_json::json;
use stolr_estimators::{DataRef, Kernel};
use stolr_lowrank::Eigenpairs;
use stolr_model::{ModelFile, OneHotEncoding, Standardization};

use crate::kpca::PreImageMap;
use crate::kpca::parts::ModelPart;
use crate::model_io::{
    bad, check_encoding, check_finite_array, get_encoding, get_f64, get_standardization, get_str, kernel_from_json,
    kernel_to_json, put_encoding, put_standardization,
};
use crate::{ModelRows, Persist, SolverError, Transformer};

/// New rows evaluated per block in [`KernelPcaModel::transform`]: the cross-kernel block holds
/// `TRANSFORM_BLOCK × p` entries.
const TRANSFORM_BLOCK: usize = 2048;

/// How a kernel PCA model centres the kernel of a new row `x` in feature space.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelCentering {
    /// No centring: the model was fitted on `K` itself.
    None,
    /// Centring with the statistics of the training kernel matrix (exact, SKPCA, KHA):
    /// $\tilde k(x, x_i) = k(x, x_i) - \frac1n \sum_l k(x, x_l) - m_i + \bar m$, with
    /// $m_i = \frac1n \sum_l k(x_l, x_i)$ the column means of `K` and $\bar m$ their mean
    /// (docs/derivations.md §7.1, out-of-sample kernel PCA). Needs the model rows to be the
    /// training rows.
    Training {
        /// $m$, the column means of the training kernel matrix, length `p = n`.
        column_means: Vec<f64>,
        /// $\bar m = 1^\top K 1 / n^2$.
        grand_mean: f64,
    },
    /// Centring in the approximate feature space (Nyström): the projection is
    /// $k(x, L) B - c$ with $c = \bar\varphi^\top V$ the projection of the mean feature vector.
    Offset(
        /// $c$, length `r`.
        Vec<f64>,
    ),
}

impl KernelCentering {
    /// [`KernelCentering::Training`] with the column means `m` (length `n`) and their mean
    /// $\bar m$ of the training kernel matrix when a centred fit returned them, else
    /// [`KernelCentering::None`].
    pub fn from_training_means(means: Option<(Vec<f64>, f64)>) -> Self {
        match means {
            Some((column_means, grand_mean)) => KernelCentering::Training { column_means, grand_mean },
            None => KernelCentering::None,
        }
    }
}

/// A fitted kernel PCA model: it maps a row $x$ to its coordinates on the `r` kernel principal
/// axes,
/// $$z(x) = \tilde k(x, R)\, A \in \mathbb R^r,$$
/// where `R` `(p, d)` are the model rows (the training rows, or the Nyström landmarks),
/// `A` `(p, r)` the coefficients and $\tilde k$ the kernel centred as [`KernelCentering`] says.
/// The projections are scaled as the fit's `projections.npy` is: transforming the training rows
/// gives $U\Lambda^{1/2}$ back.
///
/// | solver | rows `R` | coefficients `A` | centring |
/// |---|---|---|---|
/// | exact | the `n` training rows | $U\Lambda^{-1/2}$ | [`KernelCentering::Training`] (exact statistics) |
/// | KHA | the `n` training rows | $C = H A G_0 Y \Lambda^{1/2}$ of its Rayleigh–Ritz step, $\tilde K C = U\Lambda^{1/2}$ ([`crate::Kha::ritz`]) | `Training` (one streamed pass over `K` at fit time, $O(n^2 d)$) |
/// | SKPCA | the `n` training rows | $U\Lambda^{-1/2}$ of the recovered eigenpairs | `Training` (as KHA) |
/// | Nyström | the `m` landmarks | $U_W\Lambda_W^{-1/2} V$ | [`KernelCentering::Offset`] |
///
/// For the exact solver this is scikit-learn's `KernelPCA.transform`; its training projections
/// $\tilde K U \Lambda^{-1/2}$ equal $U\Lambda^{1/2}$ to the eigensolver's residual (about
/// `1e-14` relative, measured). KHA's coefficients are built so that the training projections
/// are $U\Lambda^{1/2}$ exactly (to rounding): `U` is a combination $\tilde K H A G_0 Y$ of the
/// columns of $\tilde K$. For SKPCA it is the exact formula with its approximate eigenpairs:
/// the training projections ($\tilde K U \Lambda^{-1/2}$) differ from $U\Lambda^{1/2}$ by the
/// residual of the eigenpairs (making them agree would take a product with the `n × n` kernel
/// matrix, which SKPCA exists to avoid). For Nyström it is exact for the Nyström approximation: the map
/// $\varphi(x) = \Lambda_W^{-1/2} U_W^\top k(L, x)$, centred with the training mean of
/// $\varphi$, projected on the eigenvectors `V` of $\tilde\Phi^\top\tilde\Phi$.
///
/// Memory `8·p·(d + r)` bytes; `transform` costs $O(m\,p\,(d + r))$.
///
/// # Examples
/// ```
/// use faer::Mat;
/// use rand::SeedableRng;
/// use stolr_estimators::{DataRef, Kernel};
/// use stolr_solvers::{Fit, KernelPca, KernelPcaModel, KpcaSolver, Persist, Transformer};
///
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
/// let train = Mat::from_fn(60, 3, |i, j| ((i * 3 + j) as f64 * 0.37).sin());
/// let test = Mat::from_fn(5, 3, |i, j| ((i * 5 + j) as f64 * 0.11).cos());
/// let params = KernelPca::new(4, Kernel::gaussian(1.0), KpcaSolver::exact()).center(true);
/// let model = params.fit(train.as_ref(), &mut rng, &mut ())?;
/// let z = model.transform(test.as_ref())?; // (5, 4)
/// assert_eq!((z.nrows(), z.ncols()), (5, 4));
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("model.npz");
/// model.save(&path)?;
/// let back = KernelPcaModel::load(&path, stolr_memory::MemoryBudget::default())?;
/// assert_eq!(back, model);
/// assert_eq!(back.transform(test.as_ref())?, z);
/// # Ok::<(), stolr_solvers::SolverError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPcaModel {
    solver: String,
    kernel: Kernel,
    standardization: Option<Standardization>,
    rows: ModelRows,
    coefficients: Mat<f64>,
    eigenvalues: Vec<f64>,
    centering: KernelCentering,
    encoding: Option<OneHotEncoding>,
    preimage: Option<PreImageMap>,
    part: Option<ModelPart>,
}

impl KernelPcaModel {
    /// A model from its parts: `rows` `(p, d)` (already standardized, if `standardization` is
    /// given; dense or sparse, [`ModelRows`]), `coefficients` `(p, r)`, `eigenvalues` (length
    /// `r`, nonincreasing), `centering`.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if the sizes disagree; [`SolverError::ModelMismatch`] for
    /// non-finite entries or a standardization of another width.
    pub fn new(
        solver: &str,
        kernel: Kernel,
        standardization: Option<Standardization>,
        rows: impl Into<ModelRows>,
        coefficients: Mat<f64>,
        eigenvalues: Vec<f64>,
        centering: KernelCentering,
    ) -> Result<Self, SolverError> {
        let rows = rows.into();
        kernel.validate()?;
        let (p, d, r) = (rows.nrows(), rows.ncols(), coefficients.ncols());
        if coefficients.nrows() != p {
            return Err(SolverError::ShapeMismatch {
                what: "rows of the coefficients (one per model row)",
                expected: p,
                found: coefficients.nrows(),
            });
        }
        if eigenvalues.len() != r {
            return Err(SolverError::ShapeMismatch {
                what: "number of eigenvalues (one per component)",
                expected: r,
                found: eigenvalues.len(),
            });
        }
        match &centering {
            KernelCentering::Training { column_means, .. } if column_means.len() != p => {
                return Err(SolverError::ShapeMismatch {
                    what: "number of kernel column means",
                    expected: p,
                    found: column_means.len(),
                });
            }
            KernelCentering::Offset(c) if c.len() != r => {
                return Err(SolverError::ShapeMismatch {
                    what: "length of the centring offset",
                    expected: r,
                    found: c.len(),
                });
            }
            _ => {}
        }
        if let Some(s) = &standardization
            && (s.mean.len() != d || s.scale.len() != d)
        {
            return Err(SolverError::ModelMismatch {
                reason: format!("the standardization has width {}, the rows {d}", s.mean.len()),
            });
        }
        let finite = |m: MatRef<'_, f64>| (0..m.ncols()).all(|j| (0..m.nrows()).all(|i| m[(i, j)].is_finite()));
        let centring_finite = match &centering {
            KernelCentering::None => true,
            KernelCentering::Training { column_means, grand_mean } => {
                grand_mean.is_finite() && column_means.iter().all(|v| v.is_finite())
            }
            KernelCentering::Offset(c) => c.iter().all(|v| v.is_finite()),
        };
        if standardization.is_some() && matches!(rows, ModelRows::Sparse(_)) {
            return Err(SolverError::ModelMismatch {
                reason: "sparse rows with a standardization (it would densify them)".into(),
            });
        }
        if !(rows.is_finite()
            && finite(coefficients.as_ref())
            && eigenvalues.iter().all(|v| v.is_finite())
            && centring_finite)
        {
            return Err(SolverError::ModelMismatch { reason: "the model has non-finite entries".into() });
        }
        Ok(Self {
            solver: solver.to_string(),
            kernel,
            standardization,
            rows,
            coefficients,
            eigenvalues,
            centering,
            encoding: None,
            preimage: None,
            part: None,
        })
    }

    /// The model with `encoding`, the categorical one-hot encoding its rows were read with
    /// (`None`: the rows were numeric as read). It is saved with the model (format version 2)
    /// so that new rows are read the same way (`stolr_datasets::read_table_with`); it does not
    /// change [`Transformer::transform`], which takes rows already encoded.
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] if the encoding does not produce
    /// [`KernelPcaModel::n_features`] features.
    pub fn with_encoding(mut self, encoding: Option<OneHotEncoding>) -> Result<Self, SolverError> {
        check_encoding(encoding.as_ref(), self.n_features())?;
        self.encoding = encoding;
        Ok(self)
    }

    /// The model with `standardization` (or none): new rows are standardized with it before
    /// the kernel. The model rows must already be standardized with it, as a streamed fit's
    /// landmarks are (the rows are standardized as they are read).
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] for a standardization of another width than the rows, or
    /// with sparse rows.
    pub fn with_standardization(mut self, standardization: Option<Standardization>) -> Result<Self, SolverError> {
        if let Some(s) = &standardization {
            if s.mean.len() != self.n_features() || s.scale.len() != self.n_features() {
                return Err(SolverError::ModelMismatch {
                    reason: format!("the standardization has width {}, the rows {}", s.mean.len(), self.n_features()),
                });
            }
            if matches!(self.rows, ModelRows::Sparse(_)) {
                return Err(SolverError::ModelMismatch {
                    reason: "sparse rows with a standardization (it would densify them)".into(),
                });
            }
        }
        self.standardization = standardization;
        Ok(self)
    }

    /// Sets (or removes, with `None`) the pre-image map of [`KernelPcaModel::inverse_transform`]
    /// (fitted by [`crate::KernelPcaFit::fit_inverse_transform`]); it is saved with the model.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if the map's embedding does not have the model's rank
    /// `r` columns or its coefficients the model's `d` features.
    pub fn set_preimage(&mut self, map: Option<PreImageMap>) -> Result<(), SolverError> {
        if let Some(map) = &map {
            if map.embedding().ncols() != self.rank() {
                return Err(SolverError::ShapeMismatch {
                    what: "components of the inverse transform's embedding (the model's rank)",
                    expected: self.rank(),
                    found: map.embedding().ncols(),
                });
            }
            if map.coefficients().ncols() != self.n_features() {
                return Err(SolverError::ShapeMismatch {
                    what: "features of the inverse transform's coefficients (the model's features)",
                    expected: self.n_features(),
                    found: map.coefficients().ncols(),
                });
            }
        }
        self.preimage = map;
        Ok(())
    }

    /// The model with the pre-image map `map` ([`KernelPcaModel::set_preimage`]).
    ///
    /// # Errors
    /// As [`KernelPcaModel::set_preimage`].
    pub fn with_preimage(mut self, map: Option<PreImageMap>) -> Result<Self, SolverError> {
        self.set_preimage(map)?;
        Ok(self)
    }

    /// The pre-image map, if the model was fitted with one.
    pub fn preimage(&self) -> Option<&PreImageMap> {
        self.preimage.as_ref()
    }

    /// The pre-images of the points `z` `(m, r)` of the embedding: $\hat x = \kappa(z, Z) A$
    /// by the kernel ridge map of [`PreImageMap`] (scikit-learn's
    /// `KernelPCA.inverse_transform`), result `(m, d)` in the features the model takes (a model
    /// that standardizes fits the map on the standardized rows and returns
    /// $\mu + s \odot \hat x$, in the raw features). Blocks of 2048 rows.
    ///
    /// # Errors
    /// [`SolverError::PreImageUnavailable`] if the model has no map (fitted without
    /// `fit_inverse_transform`, or saved by a build without it); [`SolverError::ShapeMismatch`]
    /// if `z` does not have `r` columns; [`SolverError::Estimator`] for non-finite entries.
    pub fn inverse_transform(&self, z: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        let Some(map) = &self.preimage else {
            return Err(SolverError::PreImageUnavailable {
                reason: format!(
                    "this {} kernel PCA model was fitted without the inverse transform: refit with \
                     fit_inverse_transform=True (stolr kpca --fit-inverse-transform)",
                    self.solver
                ),
            });
        };
        let mut x = map.apply(z, &self.kernel)?;
        if let Some(s) = &self.standardization {
            for j in 0..x.ncols() {
                let (m, sd) = (s.mean[j], s.scale[j]);
                x.col_as_slice_mut(j).iter_mut().for_each(|v| *v = m + sd * *v);
            }
        }
        Ok(x)
    }

    /// The categorical encoding of the raw rows, if the model was fitted on a table with one.
    pub fn encoding(&self) -> Option<&OneHotEncoding> {
        self.encoding.as_ref()
    }

    /// The model of eigenpairs `pairs` (eigenvectors `(n, r)` over the training rows `rows`
    /// `(n, d)`): coefficients $A = U\Lambda^{-1/2}$. Eigenpairs with $\lambda_j \le 0$ get a zero
    /// column (they carry no variance).
    ///
    /// # Errors
    /// As [`KernelPcaModel::new`].
    pub fn from_training_eigenpairs(
        solver: &str,
        kernel: Kernel,
        standardization: Option<Standardization>,
        rows: impl Into<ModelRows>,
        pairs: &Eigenpairs,
        centering: KernelCentering,
    ) -> Result<Self, SolverError> {
        let inv_sqrt: Vec<f64> = pairs.values.iter().map(|&l| if l > 0.0 { 1.0 / l.sqrt() } else { 0.0 }).collect();
        let a = Mat::from_fn(pairs.dim(), pairs.rank(), |i, j| pairs.vectors[(i, j)] * inv_sqrt[j]);
        Self::new(solver, kernel, standardization, rows, a, pairs.values.clone(), centering)
    }

    /// The solver that fitted the model (`exact`, `nystrom`, `skpca`, `kha`).
    pub fn solver(&self) -> &str {
        &self.solver
    }

    /// The kernel, with its bandwidth.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The standardization applied to every row before the kernel, if any.
    pub fn standardization(&self) -> Option<&Standardization> {
        self.standardization.as_ref()
    }

    /// Number of features `d` of the rows the model takes.
    pub fn n_features(&self) -> usize {
        self.rows.ncols()
    }

    /// Number of components `r`.
    pub fn rank(&self) -> usize {
        self.eigenvalues.len()
    }

    /// Eigenvalues of the (centred) training kernel matrix, nonincreasing, length `r`.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.eigenvalues
    }

    /// The model rows `R` `(p, d)`, standardized; dense or sparse as the training rows were.
    pub fn rows(&self) -> DataRef<'_> {
        self.rows.data()
    }

    /// The coefficients `A` `(p, r)`.
    pub fn coefficients(&self) -> MatRef<'_, f64> {
        self.coefficients.as_ref()
    }

    /// The centring.
    pub fn centering(&self) -> &KernelCentering {
        &self.centering
    }

    /// Which part of a model in parts this is (`None`: a whole model). A part cannot
    /// transform rows alone: [`KernelPcaModel::transform_sharded`] takes every rank's part, and
    /// [`Persist::load`] of the manifest joins the parts.
    pub fn part(&self) -> Option<&ModelPart> {
        self.part.as_ref()
    }

    /// The model marked as `part` of a model in parts (its rows some of the
    /// `part.total_rows` training rows), or as whole (`None`).
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] for more rows than the whole model has, a Nyström-style
    /// offset centring (whose models keep landmarks, not training rows), or a pre-image map
    /// (fitted on every row at once).
    pub(crate) fn with_part(mut self, part: Option<ModelPart>) -> Result<Self, SolverError> {
        if let Some(p) = &part {
            if self.rows.nrows() > p.total_rows {
                return Err(SolverError::ModelMismatch {
                    reason: format!("a part of {} rows of a model of {} rows", self.rows.nrows(), p.total_rows),
                });
            }
            if matches!(self.centering, KernelCentering::Offset(_)) || self.preimage.is_some() {
                return Err(SolverError::ModelMismatch {
                    reason: "only a model of training rows without a pre-image map is kept in parts".into(),
                });
            }
        }
        self.part = part;
        Ok(self)
    }

    /// The model's header without its rows: the kernel, standardization, encoding, eigenvalues
    /// and centring kind of this model, with `(0, d)` rows, `(0, r)` coefficients and no
    /// column means (an empty part; a manifest's contents).
    pub(crate) fn without_rows(&self) -> Self {
        let (d, r) = (self.n_features(), self.rank());
        let centering = match &self.centering {
            KernelCentering::Training { grand_mean, .. } => {
                KernelCentering::Training { column_means: Vec::new(), grand_mean: *grand_mean }
            }
            other => other.clone(),
        };
        Self {
            solver: self.solver.clone(),
            kernel: self.kernel,
            standardization: self.standardization.clone(),
            rows: ModelRows::Dense(Mat::zeros(0, d)),
            coefficients: Mat::zeros(0, r),
            eigenvalues: self.eigenvalues.clone(),
            centering,
            encoding: self.encoding.clone(),
            preimage: None,
            part: self.part.clone(),
        }
    }

    /// The rows, coefficients and column means of `parts` stacked in order under the header
    /// `header` (every part must have its kernel, standardization, eigenvalues and centring),
    /// marked as `part` (`None`: the whole model).
    ///
    /// # Errors
    /// [`SolverError::ModelMismatch`] for a part whose header differs or whose rows are
    /// sparse, and as [`KernelPcaModel::with_part`].
    pub(crate) fn join(header: &Self, parts: &[Self], part: Option<ModelPart>) -> Result<Self, SolverError> {
        let (d, r) = (header.n_features(), header.rank());
        let same = |m: &Self| {
            m.solver == header.solver
                && m.kernel == header.kernel
                && m.standardization == header.standardization
                && m.eigenvalues == header.eigenvalues
                && m.n_features() == d
                && std::mem::discriminant(&m.centering) == std::mem::discriminant(&header.centering)
        };
        if let Some(bad) = parts.iter().position(|m| !same(m)) {
            return Err(SolverError::ModelMismatch {
                reason: format!("part {bad} has another kernel, standardization, eigenvalues or centring"),
            });
        }
        let mut dense = Vec::with_capacity(parts.len());
        for m in parts {
            dense.push(
                m.rows
                    .dense()
                    .ok_or_else(|| SolverError::ModelMismatch { reason: "a model in parts keeps dense rows".into() })?,
            );
        }
        let p: usize = parts.iter().map(|m| m.rows.nrows()).sum();
        let mut rows = Mat::<f64>::zeros(p, d);
        let mut coefficients = Mat::<f64>::zeros(p, r);
        let mut at = 0;
        for (m, x) in parts.iter().zip(&dense) {
            let len = x.nrows();
            rows.as_mut().subrows_mut(at, len).copy_from(x);
            coefficients.as_mut().subrows_mut(at, len).copy_from(m.coefficients.as_ref());
            at += len;
        }
        let centering = match &header.centering {
            KernelCentering::Training { grand_mean, .. } => {
                let mut column_means = Vec::with_capacity(p);
                for m in parts {
                    if let KernelCentering::Training { column_means: c, .. } = &m.centering {
                        column_means.extend_from_slice(c);
                    }
                }
                KernelCentering::Training { column_means, grand_mean: *grand_mean }
            }
            other => other.clone(),
        };
        let model = Self::new(
            &header.solver,
            header.kernel,
            header.standardization.clone(),
            rows,
            coefficients,
            header.eigenvalues.clone(),
            centering,
        )?
        .with_encoding(header.encoding.clone())?;
        model.with_part(part)
    }
}

impl Transformer for KernelPcaModel {
    /// $z(x) = \tilde k(x, R) A$ for every row of `x` `(m, d)` (raw features: the model
    /// standardizes them itself); result `(m, r)`. Blocks of 2048 rows, memory
    /// $O(2048\,p)$.
    fn transform(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> {
        self.transform_data(DataRef::Dense(x))
    }
}

impl KernelPcaModel {
    /// [`Transformer::transform`] of new rows `x` `(m, d)`, dense or sparse (sparse rows are
    /// never densified; a model with a standardization takes dense rows only). Result `(m, r)`.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] for another number of features, [`SolverError::Estimator`]
    /// for non-finite entries, [`SolverError::SparseUnsupported`] for sparse rows and a model
    /// that standardizes.
    pub fn transform_data(&self, x: DataRef<'_>) -> Result<Mat<f64>, SolverError> {
        if let Some(part) = &self.part {
            return Err(part.refusal());
        }
        let mut storage = None;
        let x = crate::model_io::prepare_data(x, self.n_features(), self.standardization.as_ref(), &mut storage)?;
        let (sums, shift) = self.centring_terms();
        let (m, r) = (x.nrows(), self.rank());
        let mut z = Mat::<f64>::zeros(m, r);
        for start in (0..m).step_by(TRANSFORM_BLOCK) {
            let len = TRANSFORM_BLOCK.min(m - start);
            let (block, row_sums) = self.block_products(x.subrows(start, len));
            self.finish_block(&mut z, start, block.as_ref(), &row_sums, self.rows.nrows(), (&sums, &shift));
        }
        Ok(z)
    }

    /// The terms of the centring that do not depend on the new rows: the column sums
    /// $s = 1^\top A$ and $c = m^\top A - \bar m s$ for [`KernelCentering::Training`] (on a
    /// part, $m$ and `A` restricted to its rows: the parts' `s` and $m^\top A$ add up to the
    /// whole model's), the offset `c` and `s = 0` for [`KernelCentering::Offset`], zeros
    /// uncentred. Both of length `r`.
    pub(crate) fn centring_terms(&self) -> (Vec<f64>, Vec<f64>) {
        let (p, r) = (self.rows.nrows(), self.rank());
        let a = self.coefficients.as_ref();
        match &self.centering {
            KernelCentering::Training { column_means, grand_mean } => {
                let s: Vec<f64> = (0..r).map(|j| a.col(j).sum()).collect();
                let c: Vec<f64> = (0..r)
                    .map(|j| (0..p).map(|i| column_means[i] * a[(i, j)]).sum::<f64>() - grand_mean * s[j])
                    .collect();
                (s, c)
            }
            KernelCentering::Offset(c) => (vec![0.0; r], c.clone()),
            KernelCentering::None => (vec![0.0; r], vec![0.0; r]),
        }
    }

    /// For prepared new rows `x` `(b, d)` (standardized), $k(x, R) A$ `(b, r)` and the row
    /// sums $k(x, R) 1$ (length `b`; zeros unless the centring is
    /// [`KernelCentering::Training`]). A model without rows (an empty part) gives zeros.
    pub(crate) fn block_products(&self, x: DataRef<'_>) -> (Mat<f64>, Vec<f64>) {
        let (b, r) = (x.nrows(), self.rank());
        if self.rows.nrows() == 0 {
            return (Mat::zeros(b, r), vec![0.0; b]);
        }
        let k = crate::model_rows::cross_rows(&self.kernel, x, &self.rows);
        let block = stolr_lowrank::mul(k.as_ref(), self.coefficients.as_ref());
        let training = matches!(self.centering, KernelCentering::Training { .. });
        let row_sums = (0..b).map(|i| if training { k.row(i).sum() } else { 0.0 }).collect();
        (block, row_sums)
    }

    /// Rows `start..start + b` of the projections `z` from a block's products `block`
    /// `(b, r)` and kernel row sums over the `n` training rows, with the centring terms
    /// `(s, c)` of [`KernelPcaModel::centring_terms`]: $z = B - (k1/n)\, s^\top - 1 c^\top$.
    pub(crate) fn finish_block(
        &self,
        z: &mut Mat<f64>,
        start: usize,
        block: MatRef<'_, f64>,
        row_sums: &[f64],
        n: usize,
        (sums, shift): (&[f64], &[f64]),
    ) {
        let training = matches!(self.centering, KernelCentering::Training { .. });
        for (i, &row_sum) in row_sums.iter().enumerate() {
            let row_mean = if training { row_sum / n as f64 } else { 0.0 };
            for j in 0..block.ncols() {
                z[(start + i, j)] = block[(i, j)] - row_mean * sums[j] - shift[j];
            }
        }
    }
}

impl Persist for KernelPcaModel {
    const KIND: &'static str = "kernel-pca";

    fn to_model_file(&self) -> ModelFile {
        let mut file = self.model_file_of_kind(Self::KIND);
        if let Some(part) = &self.part {
            file.parameters_mut()["part"] = part.to_json();
        }
        file
    }

    fn from_model_file(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let mut model = Self::from_model_file_of_any_kind(file, path)?;
        model.part = ModelPart::from_parameters(file.parameters(), path)?;
        if let Some(part) = &model.part {
            part.check_rows(model.rows.nrows(), path)?;
        }
        Ok(model)
    }

    /// Reads a model from `path` (a model file, or a directory holding `model.npz`) within
    /// `memory`: a whole model, or the manifest of a model in parts (kind
    /// [`crate::KERNEL_PCA_PARTS_KIND`]), whose parts are read and joined into the whole model
    /// ([`crate::load_kernel_pca_parts`]).
    ///
    /// # Errors
    /// As [`Persist::load`]; for a manifest, those of [`crate::load_kernel_pca_parts`].
    fn load(path: &Path, memory: stolr_memory::MemoryBudget) -> Result<Self, SolverError> {
        let path = stolr_model::resolve_model_path(path)?;
        let file = ModelFile::load_kind(&path, &[Self::KIND, crate::KERNEL_PCA_PARTS_KIND], memory)?;
        if file.kind() == crate::KERNEL_PCA_PARTS_KIND {
            return crate::load_kernel_pca_parts(&file, &path, memory);
        }
        Self::from_model_file(&file, &path)
    }
}

impl KernelPcaModel {
    /// The model as a model file of kind `kind` (its own, or a manifest's), without the
    /// `part` entry.
    pub(crate) fn model_file_of_kind(&self, kind: &str) -> ModelFile {
        let (centering, grand_mean) = match &self.centering {
            KernelCentering::None => ("none", None),
            KernelCentering::Training { grand_mean, .. } => ("training", Some(*grand_mean)),
            KernelCentering::Offset(_) => ("offset", None),
        };
        let mut parameters = json!({
                "solver": self.solver,
                "kernel": kernel_to_json(&self.kernel),
                "centering": centering,
                "grand_mean": grand_mean,
                "n_features": self.n_features(),
                "rank": self.rank(),
                "eigenvalue_order": "nonincreasing",
                "transform": "z(x) = k~(x, rows) @ coefficients (see centering); training rows give U diag(sqrt(eigenvalues))",
        });
        if let Some(map) = &self.preimage {
            // Optional: a build without the map ignores it (and has no inverse transform).
            parameters["inverse_transform"] = json!({
                "alpha": map.alpha(),
                "map": "x(z) = k(z, preimage_embedding) @ preimage_coefficients, then unstandardized",
            });
        }
        let version = put_encoding(&mut parameters, self.encoding.as_ref());
        let mut file = ModelFile::new(kind, parameters);
        let rows_version = self.rows.put(&mut file, "rows");
        file.require_format_version(version.max(rows_version));
        file.put_matrix("coefficients", self.coefficients.as_ref());
        file.put_vector("eigenvalues", &self.eigenvalues);
        match &self.centering {
            KernelCentering::Training { column_means, .. } => file.put_vector("column_means", column_means),
            KernelCentering::Offset(c) => file.put_vector("offset", c),
            KernelCentering::None => {}
        }
        put_standardization(&mut file, self.standardization.as_ref());
        if let Some(map) = &self.preimage {
            file.put_matrix("preimage_embedding", map.embedding());
            file.put_matrix("preimage_coefficients", map.coefficients());
        }
        file
    }

    /// The model in `file` whatever its kind (a model file's, or a manifest's header);
    /// `part` is left unset.
    pub(crate) fn from_model_file_of_any_kind(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let kernel = kernel_from_json(file.parameters().get("kernel").unwrap_or(&serde_json::Value::Null), path)?;
        let rows = ModelRows::get(file, "rows", path)?;
        let coefficients = file.matrix("coefficients")?;
        let eigenvalues = file.vector("eigenvalues")?;
        check_finite_array("eigenvalues", &eigenvalues, path)?;
        let centering = match get_str(file, "centering", path)? {
            "none" => KernelCentering::None,
            "training" => KernelCentering::Training {
                column_means: file.vector("column_means")?,
                grand_mean: get_f64(file, "grand_mean", path)?,
            },
            "offset" => KernelCentering::Offset(file.vector("offset")?),
            other => return Err(bad(path, format!("unknown centering '{other}'"))),
        };
        let standardization = get_standardization(file, rows.ncols(), path)?;
        let solver = get_str(file, "solver", path)?.to_string();
        let encoding = get_encoding(file, rows.ncols(), path)?;
        let preimage = match file.parameters().get("inverse_transform").filter(|v| !v.is_null()) {
            None => None,
            Some(v) => {
                let alpha = v
                    .get("alpha")
                    .and_then(serde_json::Value::as_f64)
                    .ok_or_else(|| bad(path, "the inverse transform has no number 'alpha'"))?;
                let embedding = file.matrix("preimage_embedding")?;
                let coefficients = file.matrix("preimage_coefficients")?;
                Some(PreImageMap::new(alpha, embedding, coefficients).map_err(|e| bad(path, e.to_string()))?)
            }
        };
        Self::new(&solver, kernel, standardization, rows, coefficients, eigenvalues, centering)
            .and_then(|m| m.with_encoding(encoding))
            .and_then(|m| m.with_preimage(preimage))
            .map_err(|e| bad(path, e.to_string()))
    }
}
