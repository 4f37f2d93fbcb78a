//! MSG's eigenvectors kept as `U = V R`: a tall orthonormal frame `V` `(d, p)` and a small
//! rotation `R` `(p, m)` with orthonormal columns, so that a rank-one update costs `O(d p)` for
//! the projections plus `O(p m²)` for the rotation instead of `O(d m²)` for forming `U Q`; the
//! frame is folded (`V ← V R`, `R ← I`) every few samples (docs/derivations.md §5.3).

use faer::{Accum, Mat, MatMut, MatRef, Par};
use stolr_lowrank::{LowRankError, eigen_of_grown_update};

/// Relative size below which the part of `x` outside `span(U)` is treated as zero (the value
/// of `stolr_lowrank::rank_one_eigen_update`): with `‖x⊥‖ ≤ 1e-12 ‖x‖` the dropped term
/// `‖x⊥‖²` is below rounding of the update itself.
const IN_SPAN: f64 = 1e-12;

/// Columns the frame may hold beyond the rank before it is folded: a fold costs `2 d p m`
/// flops and each extra column `4 d` per sample, so about `√(m²/2)`…`m` extra columns balance
/// them; 8 is the measured optimum on MNIST with `m = 9`.
const EXTRA_COLUMNS: usize = 8;

/// The orthonormal eigenvectors `U = V R` of MSG's iterate (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct RotatedBasis {
    /// `V` `(d, p)`, orthonormal columns.
    frame: Mat<f64>,
    /// `R` `(p, m)`, orthonormal columns.
    rotation: Mat<f64>,
    /// Scratch: the scaled sample and then its part outside `span(V)`, length `d`.
    residual: Vec<f64>,
    /// Scratch for `V ← V R`, `(d, m)`.
    spare: Mat<f64>,
}

/// What one rank-one update computed before its eigenvalues are projected: the new
/// eigenvalues and what [`RotatedBasis::commit`] needs to rotate the basis.
pub(super) struct PendingUpdate {
    /// The eigenvalues of `M + η x xᵀ`, nonincreasing, length `m'`.
    pub values: Vec<f64>,
    /// `(m', m')`: the eigenvectors in the basis `[U, q]`.
    small: Mat<f64>,
    /// The coordinates of the new direction `q` in `[V, w/‖w‖]` (length `p` or `p + 1`), when
    /// the rank grew.
    direction: Option<Vec<f64>>,
    /// `‖w‖`, the norm of the part of `√η x` outside `span(V)`, when `w/‖w‖` joins the frame.
    appended: Option<f64>,
}

impl RotatedBasis {
    /// `U = u`, `(d, m)` orthonormal, held as `V = u`, `R = I`.
    pub fn new(u: Mat<f64>) -> Self {
        let (d, m) = u.shape();
        RotatedBasis { frame: u, rotation: Mat::identity(m, m), residual: vec![0.0; d], spare: Mat::zeros(0, 0) }
    }

    /// `U = V R` from a saved frame `(d, p)` and rotation `(p, m)`.
    pub fn from_parts(frame: Mat<f64>, rotation: Mat<f64>) -> Self {
        let d = frame.nrows();
        RotatedBasis { frame, rotation, residual: vec![0.0; d], spare: Mat::zeros(0, 0) }
    }

    /// The frame `V` `(d, p)` and the rotation `R` `(p, m)`.
    pub fn parts(&self) -> (MatRef<'_, f64>, MatRef<'_, f64>) {
        (self.frame.as_ref(), self.rotation.as_ref())
    }

    /// The leading `count` eigenvectors `V R[:, ..count]`, `(d, count)`.
    pub fn leading(&self, count: usize) -> Mat<f64> {
        let mut out = Mat::zeros(self.frame.nrows(), count);
        product(out.as_mut(), self.frame.as_ref(), self.rotation.as_ref().subcols(0, count));
        out
    }

    /// `V ← V R`, `R ← I` (`2 d p m` flops); afterwards the frame is `U` itself.
    pub fn fold(&mut self) {
        let (d, (p, m)) = (self.frame.nrows(), self.rotation.shape());
        if p == m && is_identity(self.rotation.as_ref()) {
            return;
        }
        self.spare.resize_with(d, m, |_, _| 0.0);
        self.spare.truncate(d, m);
        product(self.spare.as_mut(), self.frame.as_ref(), self.rotation.as_ref());
        std::mem::swap(&mut self.frame, &mut self.spare);
        self.rotation = Mat::identity(m, m);
    }

    /// The eigendecomposition of `U diag(σ) Uᵀ + η x xᵀ` (\[MSG\], Algorithm 1), as
    /// `stolr_lowrank::rank_one_eigen_update` computes it, with the projections taken against
    /// the frame: `c = Vᵀ(√η x)`, `w = √η x − V c` (re-orthogonalised once when the first pass
    /// cancels more than half of the norm), `x̂ = Rᵀc`, `e = c − R x̂` (the part of `√η x` in
    /// `span(V)` outside `span(U)`, also orthogonalised twice), and `r² = ‖e‖² + ‖w‖²`; the
    /// `(m + 1)`-dimensional problem `diag(σ, 0) + (x̂, r)(x̂, r)ᵀ` is the same as there.
    /// `O(d p)` for the projections, `O(m²)` for the small problem; nothing is changed until
    /// [`RotatedBasis::commit`].
    ///
    /// # Errors
    /// As [`eigen_of_grown_update`].
    pub fn prepare(&mut self, values: &[f64], x: &[f64], eta: f64) -> Result<PendingUpdate, LowRankError> {
        let (d, (p, m)) = (self.frame.nrows(), self.rotation.shape());
        debug_assert_eq!(values.len(), m);
        let scale = eta.sqrt();
        self.residual.iter_mut().zip(x).for_each(|(r, &v)| *r = scale * v);
        let norm = stolr_lowrank::squared_norm(&self.residual).sqrt();
        let mut c = vec![0.0; p];
        project_out(self.frame.as_ref(), &mut self.residual, &mut c);
        let mut outside = stolr_lowrank::squared_norm(&self.residual).sqrt();
        if outside < 0.5 * norm && outside > IN_SPAN * norm {
            project_out(self.frame.as_ref(), &mut self.residual, &mut c);
            outside = stolr_lowrank::squared_norm(&self.residual).sqrt();
        }
        // x̂ = Rᵀc and e = c − R x̂, twice (p × m, cheap).
        let mut e = c;
        let mut coefficients = vec![0.0; m];
        for _ in 0..2 {
            project_out(self.rotation.as_ref(), &mut e, &mut coefficients);
        }
        let append = p < d && outside > IN_SPAN * norm;
        let inside_sq = stolr_lowrank::squared_norm(&e);
        let r = (inside_sq + if append { outside * outside } else { 0.0 }).sqrt();
        let grows = m < d && r > IN_SPAN * norm;

        let (new_values, small) = eigen_of_grown_update(values, coefficients, grows.then_some(r))?;
        let (direction, appended) = if grows {
            let inv = 1.0 / r;
            let mut q: Vec<f64> = e.iter().map(|&v| v * inv).collect();
            if append {
                q.push(outside * inv);
            }
            (Some(q), append.then_some(outside))
        } else {
            (None, None)
        };
        Ok(PendingUpdate { values: new_values, small, direction, appended })
    }

    /// Keeps the leading `keep` eigenvectors of `pending` (which [`RotatedBasis::prepare`]
    /// computed from this basis): `R ← [R, q] Q[:, ..keep]`, with `V` extended by `w/‖w‖` when
    /// `x` left `span(V)`; folds the frame once it holds [`EXTRA_COLUMNS`] columns more than
    /// `keep`. `O(p m keep)`, plus `O(d p keep)` when folding.
    pub fn commit(&mut self, pending: &PendingUpdate, keep: usize) {
        let (d, (p, m)) = (self.frame.nrows(), self.rotation.shape());
        let top = pending.small.as_ref().subrows(0, m).subcols(0, keep);
        let p_new = p + usize::from(pending.appended.is_some());
        let mut next = Mat::<f64>::zeros(p_new, keep);
        product(next.as_mut().subrows_mut(0, p), self.rotation.as_ref(), top);
        if let Some(q) = &pending.direction {
            for j in 0..keep {
                let w = pending.small[(m, j)];
                if w != 0.0 {
                    for (i, &qi) in q.iter().enumerate() {
                        next[(i, j)] += w * qi;
                    }
                }
            }
        }
        if let Some(outside) = pending.appended {
            // Room for the columns until the next fold (a no-op once reserved).
            self.frame.reserve(d, (keep + EXTRA_COLUMNS + 1).max(p_new));
            let inv = 1.0 / outside;
            self.frame.resize_with(d, p_new, |i, _| self.residual[i] * inv);
        }
        self.rotation = next;
        if p_new > keep + EXTRA_COLUMNS {
            self.fold();
        }
    }

    /// Replaces the basis by `u` `(d, m)` orthonormal (`R = I`).
    pub fn replace(&mut self, u: Mat<f64>) {
        let m = u.ncols();
        self.frame = u;
        self.rotation = Mat::identity(m, m);
    }
}

/// `dst ← lhs · rhs` on one thread (the same bits for any number of threads).
fn product(dst: MatMut<'_, f64>, lhs: MatRef<'_, f64>, rhs: MatRef<'_, f64>) {
    if lhs.ncols() == 0 {
        let mut dst = dst;
        dst.fill(0.0);
        return;
    }
    faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, 1.0, Par::Seq);
}

fn is_identity(a: MatRef<'_, f64>) -> bool {
    (0..a.ncols()).all(|j| (0..a.nrows()).all(|i| a[(i, j)] == if i == j { 1.0 } else { 0.0 }))
}

/// `v -= A (Aᵀ v)` (one classical Gram–Schmidt pass, two matrix–vector products on one
/// thread), adding `Aᵀ v` into `coefficients`.
fn project_out(a: MatRef<'_, f64>, v: &mut [f64], coefficients: &mut [f64]) {
    let n = a.ncols();
    if n == 0 {
        return;
    }
    let mut dots = [0.0; 32];
    let mut heap;
    let dots: &mut [f64] = if n <= dots.len() {
        &mut dots[..n]
    } else {
        heap = vec![0.0; n];
        &mut heap
    };
    {
        let out = faer::ColMut::from_slice_mut(dots).as_mat_mut();
        let r = faer::ColRef::from_slice(v).as_mat();
        faer::linalg::matmul::matmul(out, Accum::Replace, a.transpose(), r, 1.0, Par::Seq);
    }
    let r = faer::ColMut::from_slice_mut(v).as_mat_mut();
    let c = faer::ColRef::from_slice(dots).as_mat();
    faer::linalg::matmul::matmul(r, Accum::Add, a, c, -1.0, Par::Seq);
    for (acc, d) in coefficients.iter_mut().zip(dots.iter()) {
        *acc += d;
    }
}

/// Smallest ratio `λ_j / λ_1` of a kept eigenvalue for which [`GramUpdate::basis`] forms its
/// eigenvector from the Gram matrix: below it the eigenvector would lose more than
/// `√(1/ratio) ε` ≈ `1e-13` of accuracy, and the caller uses the QR-based update instead.
const GRAM_RATIO: f64 = 1e-6;

/// The eigendecomposition of `U diag(σ) Uᵀ + Xᵀ diag(h) X` through the Gram matrix of
/// `B = [U diag(σ)^½, Xᵀ diag(h)^½]`: `A = B Bᵀ` and `BᵀB = Y Λ Yᵀ` give the eigenpairs
/// `(λ_j, B y_j / √λ_j)` of `A`.
pub(super) struct GramUpdate {
    /// The eigenvalues, nonincreasing, length `min(d, m + b)`.
    pub values: Vec<f64>,
    /// `(m + b, m + b)`: the eigenvectors `Y` of `BᵀB`.
    small: Mat<f64>,
}

/// [`GramUpdate`] of `U diag(σ) Uᵀ + Σᵢ hᵢ xᵢ xᵢᵀ` for `u` `(d, m)` orthonormal, `values` `σ`
/// (`σ ≥ 0`), the samples as the rows of `samples` `(b, d)` and `weights` `h ≥ 0`: the
/// products `C = UᵀXᵀ` `(m, b)` and `G = X Xᵀ` `(b, b)` (`O(d b (m + b))`, matrix products
/// on one thread) and the dense eigendecomposition of `BᵀB = [[Σ, Σ^½ C H^½], [H^½ Cᵀ Σ^½,
/// H^½ G H^½]]` `(m + b, m + b)`. The same eigenvalues as
/// [`stolr_lowrank::block_eigen_update`] up to rounding (`ε ‖A‖`), without its `O(d (m + b)²)`
/// QR factorization.
///
/// # Errors
/// [`LowRankError::NoConvergence`] if the small eigensolver fails.
pub(super) fn gram_eigen_update(
    u: MatRef<'_, f64>,
    values: &[f64],
    samples: MatRef<'_, f64>,
    weights: &[f64],
) -> Result<GramUpdate, LowRankError> {
    let (d, m, b) = (u.nrows(), u.ncols(), samples.nrows());
    let p = m + b;
    let mut c = Mat::<f64>::zeros(m, b);
    if m > 0 {
        faer::linalg::matmul::matmul(c.as_mut(), Accum::Replace, u.transpose(), samples.transpose(), 1.0, Par::Seq);
    }
    let mut g = Mat::<f64>::zeros(b, b);
    {
        use faer::linalg::matmul::triangular::{BlockStructure, matmul};
        matmul(
            g.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            samples,
            BlockStructure::Rectangular,
            samples.transpose(),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
    }
    let root_s: Vec<f64> = values.iter().map(|v| v.max(0.0).sqrt()).collect();
    let root_h: Vec<f64> = weights.iter().map(|v| v.sqrt()).collect();
    // Only the lower triangle of BᵀB is read.
    let mut gram = Mat::<f64>::zeros(p, p);
    for j in 0..m {
        gram[(j, j)] = values[j];
        for i in 0..b {
            gram[(m + i, j)] = root_h[i] * c[(j, i)] * root_s[j];
        }
    }
    for l in 0..b {
        for i in l..b {
            gram[(m + i, m + l)] = root_h[i] * g[(i, l)] * root_h[l];
        }
    }
    let (mut all, small) = stolr_lowrank::sym_eigen_desc(gram.as_ref())?;
    all.truncate(d.min(p));
    Ok(GramUpdate { values: all, small })
}

impl GramUpdate {
    /// The leading `count` eigenvectors `B y_j / √λ_j`, `(d, count)`, from the `u`, `values`,
    /// `samples` and `weights` the update was computed from (`O(d (m + b) count)`); `None` when
    /// one of them has `λ_j < 1e-6 λ_1` (then its accuracy would suffer, see [`GRAM_RATIO`]).
    pub fn basis(
        &self,
        u: MatRef<'_, f64>,
        values: &[f64],
        samples: MatRef<'_, f64>,
        weights: &[f64],
        count: usize,
    ) -> Option<Mat<f64>> {
        let (d, m, b) = (u.nrows(), u.ncols(), samples.nrows());
        let top = self.values.first().copied().unwrap_or(0.0);
        if count == 0 || self.values[count - 1] < GRAM_RATIO * top || self.values[count - 1] <= 0.0 {
            return (count == 0).then(|| Mat::zeros(d, 0));
        }
        let inv: Vec<f64> = self.values[..count].iter().map(|v| 1.0 / v.sqrt()).collect();
        let left = Mat::from_fn(m, count, |i, j| values[i].max(0.0).sqrt() * self.small[(i, j)] * inv[j]);
        let right = Mat::from_fn(b, count, |i, j| weights[i].sqrt() * self.small[(m + i, j)] * inv[j]);
        let mut out = Mat::<f64>::zeros(d, count);
        if m > 0 {
            faer::linalg::matmul::matmul(out.as_mut(), Accum::Replace, u, left.as_ref(), 1.0, Par::Seq);
        }
        faer::linalg::matmul::matmul(out.as_mut(), Accum::Add, samples.transpose(), right.as_ref(), 1.0, Par::Seq);
        Some(out)
    }
}
