//! MSG's eigenvectors kept as `U = V R`: a tall orthonormal frame `V` `(d, p)` and a small
//! rotation `R` `(p, m)` with orthonormal columns, so that a rank-one update costs `O(d p)` for
//! the projections plus `O(p m²)` for the rotation instead of `O(d m²)` for forming `U Q`; the
//! frame is folded (`V ← V R`, `R ← I`) every few samples (docs/derivations.md §5.3).
//!
//! When the caller knows the next rows, up to [`BLOCK_ROWS`] of them are taken as a block
//! (docs/derivations.md §5.3, "blocks"): their projections `C = Vᵀ Xᵀ` and the Gram matrix
//! `X Xᵀ` are matrix products, the parts of the rows outside `span(V)` are `Q T` (a Cholesky
//! factor `T` of `X Xᵀ − CᵀC`, `Q` never formed), and each row then updates the iterate one at
//! a time in the coordinates of the frame `[V, Q]`, `O(m (m + b))` per row; the block ends with
//! one fold `V ← V R_V + Q R_Q`. The iterates are those of one row at a time up to rounding.

use faer::reborrow::ReborrowMut;
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

/// Rows a block takes at most (the block's own row and the ones after it): the products of a
/// block of 16 MNIST rows run near faer's matrix-product rate while the block's frame stays
/// narrow (measured on MNIST, k = 8: 8, 16 and 32 rows cost 2.8, 1.9 and 2.1 µs per row for
/// the products and the fold).
pub(super) const BLOCK_ROWS: usize = 16;

/// Smallest share of its squared norm `‖√η x‖²` a row must keep outside `span(V)` and the
/// rows before it in the block for the block to take it: the Cholesky pivot `T_jj²` is then
/// accurate to about `64 ε` relative and the fold's cancellation `X S − V C S` loses at most a
/// factor 8. A block ends before the first row below it (duplicate rows, rows in the span);
/// such a row is taken alone, with the re-orthogonalised projection of [`RotatedBasis::prepare`].
/// On the centred MNIST training rows (capped MSG, k = 8) no block of 16 rows is cut by it.
const BLOCK_PIVOT: f64 = 1.0 / 64.0;

/// The orthonormal eigenvectors `U = V R` of MSG's iterate (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct RotatedBasis {
    /// `V` `(d, p)`, orthonormal columns.
    frame: Mat<f64>,
    /// `R` `(p, m)`, orthonormal columns; `(p + b, m)` while a block of `b` rows is open, the
    /// last `b` rows the coordinates on the block's `Q`.
    rotation: Mat<f64>,
    /// Scratch: the scaled sample and then its part outside `span(V)`, length `d`.
    residual: Vec<f64>,
    /// Scratch for `V ← V R`, `(d, m)`.
    spare: Mat<f64>,
    /// The open block, if any.
    block: Option<Block>,
}

/// A block of rows taken ahead (see the module docs): what its rows' updates need of them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    /// The rows `x_j` as given, row-major `(b, d)`, to recognise them as they arrive.
    pub rows: Vec<f64>,
    /// `√η_j`, length `b`.
    pub roots: Vec<f64>,
    /// `‖√η_j x_j‖`, length `b`.
    pub norms: Vec<f64>,
    /// `C = Vᵀ(√η_j x_j)` `(p, b)`.
    pub inside: Mat<f64>,
    /// `T` `(b, b)`, upper triangular with a positive diagonal: the parts of the scaled rows
    /// outside `span(V)` are `Q T`, `Q` `(d, b)` orthonormal.
    pub factor: Mat<f64>,
    /// Rows of the block observed so far, `< b`.
    pub next: usize,
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
        RotatedBasis {
            frame: u,
            rotation: Mat::identity(m, m),
            residual: vec![0.0; d],
            spare: Mat::zeros(0, 0),
            block: None,
        }
    }

    /// `U = V R` from a saved frame `(d, p)`, rotation (`(p, m)`, or `(p + b, m)` with an
    /// open block of `b` rows) and block; the caller has checked the shapes.
    pub fn from_parts(frame: Mat<f64>, rotation: Mat<f64>, block: Option<Block>) -> Self {
        let d = frame.nrows();
        RotatedBasis { frame, rotation, residual: vec![0.0; d], spare: Mat::zeros(0, 0), block }
    }

    /// The frame `V` `(d, p)`, the rotation `R` (`(p, m)`, `(p + b, m)` with an open block) and
    /// the open block.
    pub fn parts(&self) -> (MatRef<'_, f64>, MatRef<'_, f64>, Option<&Block>) {
        (self.frame.as_ref(), self.rotation.as_ref(), self.block.as_ref())
    }

    /// The leading `count` eigenvectors `V R[:, ..count]`, `(d, count)` (with an open block,
    /// `V R_V + Q R_Q` formed as in [`RotatedBasis::end_block`]).
    pub fn leading(&self, count: usize) -> Mat<f64> {
        if let Some(block) = &self.block {
            return self.block_basis(block, count);
        }
        let mut out = Mat::zeros(self.frame.nrows(), count);
        product(out.as_mut(), self.frame.as_ref(), self.rotation.as_ref().subcols(0, count));
        out
    }

    /// Whether `x` is the next row of the open block (the same bits).
    pub fn expects(&self, x: &[f64]) -> bool {
        self.block.as_ref().is_some_and(|block| {
            let d = x.len();
            block.rows.get(block.next * d..(block.next + 1) * d).is_some_and(|row| super::same_bits(row, x))
        })
    }

    /// Whether a block is open.
    pub fn in_block(&self) -> bool {
        self.block.is_some()
    }

    /// Opens a block on the leading rows of `rows` (each of length `d`, finite, at most
    /// [`BLOCK_ROWS`]) with step sizes `etas`: folds the frame (`V = U`, `p = m`), forms
    /// `C = Vᵀ Xᵀ diag(√η)` and the Cholesky factor `T` of `diag(√η) X Xᵀ diag(√η) − CᵀC`,
    /// and keeps the rows up to the first whose pivot falls below [`BLOCK_PIVOT`] of its
    /// squared norm (and at most `d − m` rows). Returns the number of rows taken; with none
    /// the basis is only folded. `O(d b (m + b))`, matrix products on one thread.
    pub fn start_block(&mut self, rows: &[&[f64]], etas: &[f64]) -> usize {
        self.fold();
        let (d, m) = self.frame.shape();
        let b = rows.len().min(etas.len()).min(BLOCK_ROWS).min(d.saturating_sub(m));
        if b == 0 {
            return 0;
        }
        let mut flat = Vec::with_capacity(b * d);
        rows[..b].iter().for_each(|r| flat.extend_from_slice(r));
        let x = MatRef::from_row_major_slice(&flat, b, d);
        let roots: Vec<f64> = etas[..b].iter().map(|e| e.sqrt()).collect();
        let mut inside = Mat::<f64>::zeros(m, b);
        product(inside.as_mut(), self.frame.transpose(), x.transpose());
        let mut gram = Mat::<f64>::zeros(b, b);
        {
            use faer::linalg::matmul::triangular::{BlockStructure, matmul};
            matmul(
                gram.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Replace,
                x,
                BlockStructure::Rectangular,
                x.transpose(),
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
        }
        for (j, &root) in roots.iter().enumerate() {
            inside.col_mut(j).iter_mut().for_each(|c| *c *= root);
        }
        let mut norms = Vec::with_capacity(b);
        let mut factor = Mat::<f64>::zeros(b, b);
        let mut taken = 0;
        for j in 0..b {
            let norm_sq = roots[j] * roots[j] * gram[(j, j)];
            // The lower triangle of G − CᵀC, column j, rows i ≤ j (G scaled on the fly).
            let outside = |i: usize| {
                let inner: f64 = (0..m).map(|l| inside[(l, i)] * inside[(l, j)]).sum();
                roots[i] * roots[j] * gram[(j, i)] - inner
            };
            for i in 0..j {
                let dot: f64 = (0..i).map(|l| factor[(l, i)] * factor[(l, j)]).sum();
                factor[(i, j)] = (outside(i) - dot) / factor[(i, i)];
            }
            let pivot = outside(j) - (0..j).map(|l| factor[(l, j)] * factor[(l, j)]).sum::<f64>();
            if !(pivot > 0.0 && pivot >= BLOCK_PIVOT * norm_sq && norm_sq.is_finite()) {
                break;
            }
            factor[(j, j)] = pivot.sqrt();
            norms.push(norm_sq.sqrt());
            taken = j + 1;
        }
        if taken == 0 {
            return 0;
        }
        flat.truncate(taken * d);
        let mt = self.rotation.ncols();
        self.rotation.resize_with(m + taken, mt, |_, _| 0.0);
        self.block = Some(Block {
            rows: flat,
            roots: roots[..taken].to_vec(),
            norms,
            inside: inside.subcols(0, taken).to_owned(),
            factor: factor.submatrix(0, 0, taken, taken).to_owned(),
            next: 0,
        });
        taken
    }

    /// `V R_V + Q R_Q = V (R_V − C S) + Xᵀ diag(√η) S` with `S = T⁻¹ R_Q`, for the leading
    /// `count` columns of the rotation, `(d, count)`: `O(d (m + b) count)`.
    fn block_basis(&self, block: &Block, count: usize) -> Mat<f64> {
        let (d, p) = self.frame.shape();
        let b = block.factor.nrows();
        let mut solved = self.rotation.as_ref().submatrix(p, 0, b, count).to_owned();
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            block.factor.as_ref(),
            solved.as_mut(),
            Par::Seq,
        );
        let mut on_frame = self.rotation.as_ref().submatrix(0, 0, p, count).to_owned();
        if p > 0 {
            faer::linalg::matmul::matmul(
                on_frame.as_mut(),
                Accum::Add,
                block.inside.as_ref(),
                solved.as_ref(),
                -1.0,
                Par::Seq,
            );
        }
        for (i, &root) in block.roots.iter().enumerate() {
            solved.row_mut(i).iter_mut().for_each(|s| *s *= root);
        }
        let mut out = Mat::zeros(d, count);
        product(out.as_mut(), self.frame.as_ref(), on_frame.as_ref());
        let x = MatRef::from_row_major_slice(&block.rows, b, d);
        faer::linalg::matmul::matmul(out.as_mut(), Accum::Add, x.transpose(), solved.as_ref(), 1.0, Par::Seq);
        out
    }

    /// Closes the open block, if any: `V ← V R_V + Q R_Q`, `R ← I` (rows of the block not
    /// observed have zero rows in `R_Q`).
    pub fn end_block(&mut self) {
        if let Some(block) = self.block.take() {
            let m = self.rotation.ncols();
            self.frame = self.block_basis(&block, m);
            self.rotation = Mat::identity(m, m);
        }
    }

    /// `V ← V R`, `R ← I` (`2 d p m` flops), closing an open block first; afterwards the
    /// frame is `U` itself.
    pub fn fold(&mut self) {
        self.end_block();
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
    /// [`RotatedBasis::commit`]. With an open block, `x` must be its next row
    /// ([`RotatedBasis::expects`]) and `eta` its step size: `c` is then the block's
    /// coordinates of the row in `[V, Q]` (`w = 0`), `O(m (m + b))`.
    ///
    /// # Errors
    /// As [`eigen_of_grown_update`].
    pub fn prepare(&mut self, values: &[f64], x: &[f64], eta: f64) -> Result<PendingUpdate, LowRankError> {
        let (d, (p, m)) = (self.frame.nrows(), self.rotation.shape());
        debug_assert_eq!(values.len(), m);
        let (c, norm, outside) = match &self.block {
            Some(block) => {
                let (j, inner) = (block.next, block.inside.nrows());
                debug_assert!(self.expects(x) && block.roots[j] == eta.sqrt());
                let mut c = vec![0.0; p];
                c[..inner].iter_mut().zip(block.inside.col(j).iter()).for_each(|(c, &v)| *c = v);
                c[inner..=inner + j].iter_mut().zip(block.factor.col(j).iter()).for_each(|(c, &v)| *c = v);
                (c, block.norms[j], 0.0)
            }
            None => {
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
                (c, norm, outside)
            }
        };
        // x̂ = Rᵀc and e = c − R x̂, twice (p × m, cheap).
        let mut e = c;
        let mut coefficients = vec![0.0; m];
        for _ in 0..2 {
            project_out_small(self.rotation.as_ref(), &mut e, &mut coefficients);
        }
        let append = self.block.is_none() && p < d && outside > IN_SPAN * norm;
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
    /// `keep`. `O(p m keep)`, plus `O(d p keep)` when folding. With an open block the row's
    /// update stays in the block's coordinates, and the block's last row closes it
    /// ([`RotatedBasis::end_block`]).
    pub fn commit(&mut self, pending: &PendingUpdate, keep: usize) {
        let (d, (p, m)) = (self.frame.nrows(), self.rotation.shape());
        let top = pending.small.as_ref().subrows(0, m).subcols(0, keep);
        let p_new = p + usize::from(pending.appended.is_some());
        // next[:, j] = Σ_l top[l, j] R[:, l] (+ small[m, j] q), a column at a time: the
        // matrices are a few dozen entries wide, below where a general product pays off.
        let mut next = Mat::<f64>::zeros(p_new, keep);
        for j in 0..keep {
            let mut column = next.col_mut(j);
            for l in 0..m {
                let w = top[(l, j)];
                column
                    .rb_mut()
                    .subrows_mut(0, p)
                    .iter_mut()
                    .zip(self.rotation.col(l).iter())
                    .for_each(|(o, &r)| *o += w * r);
            }
            if let Some(q) = &pending.direction {
                let w = pending.small[(m, j)];
                column.rb_mut().iter_mut().zip(q).for_each(|(o, &qi)| *o += w * qi);
            }
        }
        if let Some(outside) = pending.appended {
            // Room for the columns until the next fold (a no-op once reserved).
            self.frame.reserve(d, (keep + EXTRA_COLUMNS + 1).max(p_new));
            let inv = 1.0 / outside;
            self.frame.resize_with(d, p_new, |i, _| self.residual[i] * inv);
        }
        self.rotation = next;
        if let Some(block) = &mut self.block {
            block.next += 1;
            if block.next == block.factor.nrows() {
                self.end_block();
            }
        } else if p_new > keep + EXTRA_COLUMNS {
            self.fold();
        }
    }

    /// Replaces the basis by `u` `(d, m)` orthonormal (`R = I`).
    pub fn replace(&mut self, u: Mat<f64>) {
        let m = u.ncols();
        self.frame = u;
        self.rotation = Mat::identity(m, m);
        self.block = None;
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

/// [`project_out`] for a matrix `a` of a few dozen rows (MSG's rotation), a column at a time.
fn project_out_small(a: MatRef<'_, f64>, v: &mut [f64], coefficients: &mut [f64]) {
    let mut dots = [0.0; 32];
    let mut heap;
    let dots: &mut [f64] = if a.ncols() <= dots.len() {
        &mut dots[..a.ncols()]
    } else {
        heap = vec![0.0; a.ncols()];
        &mut heap
    };
    for (l, dot) in dots.iter_mut().enumerate() {
        *dot = a.col(l).iter().zip(v.iter()).map(|(x, y)| x * y).sum();
    }
    for (l, &dot) in dots.iter().enumerate() {
        v.iter_mut().zip(a.col(l).iter()).for_each(|(v, &x)| *v -= dot * x);
    }
    coefficients.iter_mut().zip(dots.iter()).for_each(|(c, d)| *c += d);
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
