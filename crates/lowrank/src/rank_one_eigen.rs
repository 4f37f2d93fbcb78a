//! The rank-one symmetric eigen-update `U diag(σ) Uᵀ + η x xᵀ` in `O(m² d)`.

use faer::reborrow::ReborrowMut;
use faer::{Accum, Mat, MatRef, Par};

use crate::error::{check_finite, check_shape};
use crate::{Eigenpairs, LowRankError, eigen_of_grown_update};

/// Relative size below which the part of `x` outside `span(U)` is treated as zero: with
/// `‖x⊥‖ ≤ 1e-12 ‖x‖` the dropped term `‖x⊥‖²` is below rounding of the update itself.
const IN_SPAN: f64 = 1e-12;

/// The eigendecomposition of `U diag(σ) Uᵀ + η x xᵀ`, held as a small rotation of the old
/// basis `U` and (when `x` leaves `span(U)`) one new direction, so that only the eigenvectors
/// the caller keeps are ever formed.
///
/// Produced by [`rank_one_eigen_update`]; `m` is the old rank and `m'` (`m` or `m + 1`) the new
/// one.
#[derive(Debug, Clone)]
pub struct RankOneEigenUpdate {
    values: Vec<f64>,
    /// `(m', m')`: column `j` holds eigenvector `j` in the basis `[U, q]`.
    rotation: Mat<f64>,
    /// The unit direction `q = x⊥/‖x⊥‖`, length `d`, when the rank grew.
    direction: Option<Vec<f64>>,
    dim: usize,
    old_rank: usize,
}

/// Eigendecomposition of `U diag(σ) Uᵀ + η x xᵀ` (\[MSG\], Algorithm 1).
///
/// `u` has shape `(d, m)` with orthonormal columns, `values` = `σ` has length `m` (any real
/// values, any order) and `x` has length `d`; `eta ≥ 0` scales the update. With
/// `x̂ = √η Uᵀx`, `x⊥ = √η x − U x̂` and `r = ‖x⊥‖`, the new eigenpairs come from the
/// `(m+1) × (m+1)` matrix `diag(σ, 0) + z zᵀ`, `z = (x̂, r)`, in the basis `[U, x⊥/r]`,
/// solved as a diagonal-plus-rank-one problem ([`crate::eigen_diagonal_plus_rank_one`]); the
/// cost is `O(md)` for the projections and `O(m²)` for the small eigenproblem, plus
/// `O(m·count·d)` when [`RankOneEigenUpdate::basis`] forms `count` eigenvectors.
///
/// Numerical safety: `x⊥` is orthogonalised twice (classical Gram–Schmidt with one
/// re-orthogonalisation) whenever the first pass cancels more than half of its norm, so `[U, q]`
/// stays orthonormal to rounding; and when `r ≤ 1e-12 √η ‖x‖` (or `m = d`) the rank does not
/// grow and the `m × m` problem `diag(σ) + x̂ x̂ᵀ` is solved instead (the paper's `x⊥ = 0`
/// branch).
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] when `values` or `x` does not match `u`;
/// [`LowRankError::NonFinite`] for NaN or ±∞ in `values`, `x` or `eta`;
/// [`LowRankError::InvalidParameter`] for `eta < 0`; [`LowRankError::NoConvergence`] if the
/// small eigensolver fails.
///
/// # Source
/// \[MSG\], Algorithm 1 (lines 1–7); docs/derivations.md §5.3.
pub fn rank_one_eigen_update(
    u: MatRef<'_, f64>,
    values: &[f64],
    x: &[f64],
    eta: f64,
) -> Result<RankOneEigenUpdate, LowRankError> {
    let (d, m) = (u.nrows(), u.ncols());
    check_shape("eigenvalues", (m, 1), (values.len(), 1))?;
    check_shape("sample", (d, 1), (x.len(), 1))?;
    check_finite("eta", [eta])?;
    if eta < 0.0 {
        return Err(LowRankError::InvalidParameter { name: "eta", reason: format!("must be ≥ 0, got {eta}") });
    }
    check_finite("eigenvalues", values.iter().copied())?;
    check_finite("sample", x.iter().copied())?;

    let scale = eta.sqrt();
    let mut residual: Vec<f64> = x.iter().map(|&v| scale * v).collect();
    let norm = norm2(&residual);
    let mut coefficients = vec![0.0; m];
    project_out(u, &mut residual, &mut coefficients);
    let mut r = norm2(&residual);
    if r < 0.5 * norm && r > IN_SPAN * norm {
        project_out(u, &mut residual, &mut coefficients);
        r = norm2(&residual);
    }
    let grows = m < d && r > IN_SPAN * norm;

    let (new_values, rotation) = eigen_of_grown_update(values, coefficients, grows.then_some(r))?;
    let direction = grows.then(|| {
        let inv = 1.0 / r;
        residual.iter().map(|&v| v * inv).collect()
    });
    Ok(RankOneEigenUpdate { values: new_values, rotation, direction, dim: d, old_rank: m })
}

impl RankOneEigenUpdate {
    /// The new eigenvalues, **nonincreasing**, length `m'`.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether the rank grew (`m' = m + 1`), i.e. `x` had a part outside `span(U)`.
    pub fn grew(&self) -> bool {
        self.direction.is_some()
    }

    /// The leading `count` eigenvectors, shape `(d, count)`, orthonormal, in the order of
    /// [`RankOneEigenUpdate::values`]. `u` must be the basis the update was computed from.
    /// Cost `O(m·count·d)`.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `u` is not `(d, m)`; [`LowRankError::InvalidParameter`]
    /// if `count > m'`.
    pub fn basis(&self, u: MatRef<'_, f64>, count: usize) -> Result<Mat<f64>, LowRankError> {
        let mut out = Mat::zeros(self.dim, count);
        self.basis_into(u, out.as_mut())?;
        Ok(out)
    }

    /// As [`RankOneEigenUpdate::basis`], writing the `out.ncols()` leading eigenvectors into
    /// `out`, shape `(d, count)`, without allocating.
    ///
    /// # Errors
    /// As [`RankOneEigenUpdate::basis`], plus a shape error when `out` has `d` rows wrong.
    pub fn basis_into(&self, u: MatRef<'_, f64>, mut out: faer::MatMut<'_, f64>) -> Result<(), LowRankError> {
        let count = out.ncols();
        check_shape("basis", (self.dim, self.old_rank), (u.nrows(), u.ncols()))?;
        check_shape("output basis", (self.dim, count), (out.nrows(), out.ncols()))?;
        if count > self.values.len() {
            return Err(LowRankError::InvalidParameter {
                name: "count",
                reason: format!("asked for {count} eigenvectors of a rank-{} update", self.values.len()),
            });
        }
        let m = self.old_rank;
        let top = self.rotation.subrows(0, m).subcols(0, count);
        if m > 0 {
            faer::linalg::matmul::matmul(out.as_mut(), Accum::Replace, u, top, 1.0, Par::Seq);
        } else {
            out.fill(0.0);
        }
        if let Some(q) = &self.direction {
            for j in 0..count {
                let w = self.rotation[(m, j)];
                if w != 0.0 {
                    let mut col = out.as_mut().col_mut(j);
                    match col.rb_mut().try_as_col_major_mut() {
                        Some(slice) => slice.as_slice_mut().iter_mut().zip(q).for_each(|(o, &qi)| *o += w * qi),
                        None => q.iter().enumerate().for_each(|(i, &qi)| col[i] += w * qi),
                    }
                }
            }
        }
        Ok(())
    }

    /// All `m'` eigenpairs as an [`Eigenpairs`] (values nonincreasing, vectors `(d, m')`).
    ///
    /// # Errors
    /// As [`RankOneEigenUpdate::basis`].
    pub fn into_eigenpairs(self, u: MatRef<'_, f64>) -> Result<Eigenpairs, LowRankError> {
        let vectors = self.basis(u, self.values.len())?;
        Ok(Eigenpairs { values: self.values, vectors })
    }
}

/// `residual -= U (Uᵀ residual)` (one classical Gram–Schmidt pass, as two matrix–vector
/// products), adding `Uᵀ residual` into `coefficients`.
fn project_out(u: MatRef<'_, f64>, residual: &mut [f64], coefficients: &mut [f64]) {
    if u.ncols() == 0 {
        return;
    }
    let mut dots = vec![0.0; u.ncols()];
    {
        let dots = faer::ColMut::from_slice_mut(&mut dots).as_mat_mut();
        let r = faer::ColRef::from_slice(residual).as_mat();
        faer::linalg::matmul::matmul(dots, Accum::Replace, u.transpose(), r, 1.0, Par::Seq);
    }
    let r = faer::ColMut::from_slice_mut(residual).as_mat_mut();
    let c = faer::ColRef::from_slice(&dots).as_mat();
    faer::linalg::matmul::matmul(r, Accum::Add, u, c, -1.0, Par::Seq);
    for (acc, d) in coefficients.iter_mut().zip(&dots) {
        *acc += d;
    }
}

fn norm2(v: &[f64]) -> f64 {
    crate::squared_norm(v).sqrt()
}
