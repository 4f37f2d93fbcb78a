//! Kernel expansions $f(x) = \sum_j c_j \kappa(x, z_j)$: the predictors of SLKL and of the KRR
//! baselines.

use faer::{Col, MatRef};
use stolr_estimators::{DataRef, Kernel};

use crate::model_rows::cross_rows;
use crate::{ModelRows, SolverError};

/// Test rows evaluated per block in [`KernelExpansion::predict`], so that the cross-kernel
/// block stays at `PREDICT_BLOCK × p` entries.
const PREDICT_BLOCK: usize = 4096;

/// A regression function $f(x) = \sum_{j=1}^{p} c_j \kappa(x, z_j)$ with centres $z_j$ (rows of a
/// `(p, d)` matrix) and coefficients $c$ (length `p`).
///
/// SLKL's sparse predictor (\[SLKL\], (10) with $k_\mu$; docs/derivations.md §6.8, "Predictor":
/// centres the active landmarks, $c = \beta$), KRR on all points (centres all training points,
/// $c = \alpha$) and the other baselines are all of this form. Evaluating costs $O(p\,c_\kappa)$
/// per test point ($c_\kappa = O(d)$ for the Gaussian kernel). `p = 0` is the zero function.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelExpansion {
    kernel: Kernel,
    centers: ModelRows,
    coefficients: Vec<f64>,
}

impl KernelExpansion {
    /// The expansion with centres `centers` `(p, d)` and `coefficients` (length `p`).
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `coefficients.len() != p`; [`SolverError::Estimator`] for
    /// invalid kernel parameters or non-finite centres; [`SolverError::InvalidConfig`]
    /// (`coefficients`) for a non-finite coefficient.
    pub fn new(kernel: Kernel, centers: impl Into<ModelRows>, coefficients: Vec<f64>) -> Result<Self, SolverError> {
        let centers = centers.into();
        kernel.validate()?;
        if coefficients.len() != centers.nrows() {
            return Err(SolverError::ShapeMismatch {
                what: "number of coefficients (one per centre)",
                expected: centers.nrows(),
                found: coefficients.len(),
            });
        }
        if centers.nrows() > 0 {
            centers.data().check()?;
        }
        if let Some(c) = coefficients.iter().find(|c| !c.is_finite()) {
            return Err(SolverError::InvalidConfig {
                name: "coefficients",
                reason: format!("must be finite, got {c}"),
            });
        }
        Ok(Self { kernel, centers, coefficients })
    }

    /// The kernel κ.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The centres $z_j$ as rows, shape `(p, d)`.
    pub fn centers(&self) -> DataRef<'_> {
        self.centers.data()
    }

    /// The centres as the model keeps them (dense, or sparse when fitted on sparse rows).
    pub fn center_rows(&self) -> &ModelRows {
        &self.centers
    }

    /// The coefficients $c$, length `p`.
    pub fn coefficients(&self) -> &[f64] {
        &self.coefficients
    }

    /// Number of centres `p`.
    pub fn len(&self) -> usize {
        self.coefficients.len()
    }

    /// Whether there are no centres (the zero function).
    pub fn is_empty(&self) -> bool {
        self.coefficients.is_empty()
    }

    /// Input dimension `d`.
    pub fn dim(&self) -> usize {
        self.centers.ncols()
    }

    /// $f(x_t)$ for every row $x_t$ of `x` `(m, d)`; result of length `m` (in the units of the
    /// training targets). Cost $O(m\,p\,d)$, memory $O(\min(m, 4096)\,p)$.
    ///
    /// # Errors
    /// [`SolverError::ShapeMismatch`] if `x` does not have `d` columns;
    /// [`SolverError::Estimator`] for NaN/∞ in `x`.
    pub fn predict(&self, x: MatRef<'_, f64>) -> Result<Col<f64>, SolverError> {
        self.predict_data(DataRef::Dense(x))
    }

    /// [`KernelExpansion::predict`] of rows `x` `(m, d)`, dense or sparse.
    ///
    /// # Errors
    /// As [`KernelExpansion::predict`].
    pub fn predict_data(&self, x: DataRef<'_>) -> Result<Col<f64>, SolverError> {
        if x.ncols() != self.dim() {
            return Err(SolverError::ShapeMismatch {
                what: "number of features of the test data",
                expected: self.dim(),
                found: x.ncols(),
            });
        }
        let m = x.nrows();
        let mut out = Col::<f64>::zeros(m);
        if m == 0 {
            return Ok(out);
        }
        x.check()?;
        if self.is_empty() {
            return Ok(out);
        }
        let c = MatRef::from_column_major_slice(&self.coefficients, self.len(), 1);
        for start in (0..m).step_by(PREDICT_BLOCK) {
            let len = PREDICT_BLOCK.min(m - start);
            let k = cross_rows(&self.kernel, x.subrows(start, len), &self.centers);
            // A matrix–vector product: faer splits its sum by thread; this one has fixed bits.
            let f = stolr_lowrank::mul(k.as_ref(), c);
            for i in 0..len {
                out[start + i] = f[(i, 0)];
            }
        }
        Ok(out)
    }
}
