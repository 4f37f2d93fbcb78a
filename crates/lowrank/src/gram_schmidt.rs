//! Orthogonalizing a new block of columns against an orthonormal basis.

use faer::{Accum, Mat, MatRef};

use crate::LowRankError;
use crate::error::check_shape;
use crate::products::{gemm, hstack, mul};
use crate::qr_svd::thin_qr;
use crate::tall_products::tall_inner;

/// How the shrinkage step orthogonalizes `[U, new block]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Orthogonalization {
    /// No `n`-sized orthogonalization: the Gram matrix of `[U, ζ]` and a Rayleigh–Ritz step on
    /// the small `(b+a) × (b+a)` core, the new factor formed in place over `U`
    /// ([`crate::shrink_psd_in_place`]). `n·(b+a)²` flops for the Gram matrix and `2n(b+a)r`
    /// for the new factor, against about twice that for block Gram–Schmidt. The default. The
    /// PSD path only: the general path ([`crate::shrink_general`]) runs
    /// [`Orthogonalization::BlockGramSchmidt`] when given this.
    #[default]
    RayleighRitz,
    /// Block classical Gram–Schmidt of the new block against the (already orthonormal) `U`
    /// with one re-orthogonalization pass, then a thin QR of the remainder only:
    /// `O(n·a·b + n·a²)` instead of `O(n·(a+b)²)`.
    BlockGramSchmidt,
    /// A fresh thin QR of the whole `n × (b + a)` block, as the paper writes it. Kept as the
    /// reference path for tests.
    FreshQr,
}

/// The result of [`orthogonalize_against`]: `w = u·c + q·r`, with `qᵀu = 0` and `q`
/// orthonormal.
#[derive(Debug, Clone)]
pub struct OrthogonalizedBlock {
    /// Coefficients of `w` in the basis `u`, shape `(b, a)`.
    pub c: Mat<f64>,
    /// Orthonormal basis of the part of `w` orthogonal to `u`, shape `(n, p)`, `p = min(n, a)`.
    pub q: Mat<f64>,
    /// Upper-trapezoidal coefficients of that part, shape `(p, a)`.
    pub r: Mat<f64>,
}

/// Splits the block `w`, shape `(n, a)`, against the orthonormal columns of `u`, shape `(n, b)`:
/// `w = u·c + q·r` where `q` has orthonormal columns orthogonal to `u`.
///
/// Block classical Gram–Schmidt with one re-orthogonalization pass ("twice is enough",
/// Giraud et al. 2005): `c₁ = uᵀw`, `w₁ = w − u c₁`, `c₂ = uᵀw₁`, `w₂ = w₁ − u c₂`,
/// `c = c₁ + c₂`, then a thin QR `w₂ = q r`, by CholeskyQR2 (two passes of Gram matrix,
/// Cholesky factor and triangular solve: all matrix products) when the remainder is well
/// conditioned, and by Householder QR otherwise. Cost `O(n·a·b)` for the projections plus
/// `O(n·a²)` for the QR. If `w` has directions inside `span(u)` (a rank-deficient remainder),
/// the matching rows of `r` are zero to rounding, so `q r` stays exact even though those columns
/// of `q` are arbitrary.
///
/// # Errors
/// [`LowRankError::ShapeMismatch`] if `u` and `w` have different numbers of rows.
///
/// # References
/// docs/derivations.md §2.3 (factored SPGD step); the paper's step re-factors the whole block.
pub fn orthogonalize_against(u: MatRef<'_, f64>, w: MatRef<'_, f64>) -> Result<OrthogonalizedBlock, LowRankError> {
    check_shape("new block", (u.nrows(), w.ncols()), (w.nrows(), w.ncols()))?;
    let Deferred { c, mut q, pending, r } = orthogonalize_deferred(u, w.to_owned(), Rows::whole(u.nrows()));
    if let Some(r2) = pending {
        // q·R₂⁻¹ made explicit: qᵀ ← R₂⁻ᵀ qᵀ.
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            r2.transpose(),
            q.as_mut().transpose_mut(),
            faer::get_global_parallelism(),
        );
    }
    Ok(OrthogonalizedBlock { c, q, r })
}

/// [`orthogonalize_against`] with the last triangular solve of CholeskyQR2 left pending: the
/// orthonormal block is `q · pending⁻¹` (or `q` when `pending` is `None`). Callers that only
/// need `Q·X` for a small `X` apply `pending⁻¹` to `X` instead, saving an `O(n·a²)` solve.
struct Deferred {
    c: Mat<f64>,
    q: Mat<f64>,
    pending: Option<Mat<f64>>,
    r: Mat<f64>,
}

/// The rows a tall block is split over: this rank's rows of an `n`-row matrix whose other
/// rows the other ranks of `comm` hold (`n` the global count). Products over the rows are
/// formed per rank and added in rank order; with one rank every function taking this is its
/// single-process version, bit for bit.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'c> {
    pub comm: &'c dyn stolr_comm::Communicator,
    /// The global number of rows `n`.
    pub total: usize,
}

impl<'c> Rows<'c> {
    /// All `n` rows on one process.
    pub(crate) fn whole(n: usize) -> Rows<'static> {
        Rows { comm: &stolr_comm::SingleProcess, total: n }
    }
}

/// `w` `(n, a)` is consumed and reused as the storage of the result (no copy of the block).
/// On several ranks (`rows`) `u` and `w` are this rank's rows, the inner products are added
/// in rank order, every decision (CholeskyQR2 or Householder) is taken on replicated values,
/// and the Householder fallback is a TSQR ([`thin_qr_sharded`]).
fn orthogonalize_deferred(u: MatRef<'_, f64>, w: Mat<f64>, rows: Rows<'_>) -> Deferred {
    debug_assert_eq!(u.nrows(), w.nrows());
    let mut rem = w;
    let mut c = Mat::zeros(u.ncols(), rem.ncols());
    if u.ncols() > 0 {
        for _pass in 0..2 {
            let mut ci = tall_inner(u, rem.as_ref(), false);
            stolr_comm::all_reduce_mat(rows.comm, &mut ci);
            gemm(rem.as_mut(), Accum::Add, u, ci.as_ref(), -1.0);
            c += &ci;
        }
    }
    if rows.total >= rem.ncols() && rem.ncols() > 0 {
        match cholesky_qr2_deferred(rem, rows.comm) {
            Ok([q, r2, r1]) => {
                let r = mul(r2.as_ref(), r1.as_ref());
                return Deferred { c, q, pending: Some(r2), r };
            }
            Err(original) => rem = original,
        }
    }
    let (q, r) = thin_qr_sharded(rem.as_ref(), rows.comm);
    Deferred { c, q, pending: None, r }
}

/// The thin QR `a = q r` of the tall `a` `(n, k)` whose rows are split over the ranks of
/// `comm` (this rank's rows given): `q` this rank's rows `(n_local, p)` of an orthonormal
/// `(n, p)` factor, `r` `(p, k)` upper trapezoidal and the same on every rank, `p = min(n, k)`.
/// One rank: [`thin_qr`] itself. Several: TSQR — each rank's local QR `a_l = q_l r_l`, the
/// `r_l` gathered in rank order (`Σ min(n_l, k) · k` numbers) and stacked, the QR of the stack
/// `[r_1; …; r_P] = q_s r` on every rank, and `q = q_l q_s[block l]`. Collective.
pub(crate) fn thin_qr_sharded(a: MatRef<'_, f64>, comm: &dyn stolr_comm::Communicator) -> (Mat<f64>, Mat<f64>) {
    if comm.size() == 1 {
        return thin_qr(a);
    }
    let k = a.ncols();
    let (ql, rl) = thin_qr(a);
    let send: Vec<f64> = (0..rl.nrows()).flat_map(|i| (0..k).map(move |j| (i, j))).map(|(i, j)| rl[(i, j)]).collect();
    let blocks = comm.all_gather(&send);
    let heights: Vec<usize> = blocks.iter().map(|b| b.len().checked_div(k).unwrap_or(0)).collect();
    let flat = blocks.concat();
    let stacked = Mat::from_fn(heights.iter().sum(), k, |i, j| flat[i * k + j]);
    let (qs, r) = thin_qr(stacked.as_ref());
    let offset: usize = heights[..comm.rank()].iter().sum();
    let mine = qs.as_ref().subrows(offset, heights[comm.rank()]);
    (mul(ql.as_ref(), mine), r)
}

/// CholeskyQR2 (Fukaya et al. 2014; orthogonality `O(ε)` when `κ(w) ≲ ε^{-1/2}`, Yamamoto et
/// al. 2015) of a tall block `w` `(n, a)`, `n ≥ a`, with the second triangular solve deferred:
/// returns `(q₁, R₂, R₁)` with `w = q₁ R₁` and `q₁ R₂⁻¹` orthonormal, computed in the storage
/// of `w`. Gives `w` back (`Err`) when either Cholesky factorization fails, the first pass finds
/// `w` too ill-conditioned, or the second pass finds `q₁` far from orthonormal; the caller then
/// falls back to Householder QR.
fn cholesky_qr2_deferred(w: Mat<f64>, comm: &dyn stolr_comm::Communicator) -> Result<[Mat<f64>; 3], Mat<f64>> {
    let Some((l1, _)) = cholesky_of_gram(&w, comm) else { return Err(w) };
    let mut q = w;
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        l1.as_ref(),
        q.as_mut().transpose_mut(),
        faer::get_global_parallelism(),
    );
    let r1 = l1.transpose().to_owned();
    match cholesky_of_gram(&q, comm) {
        Some((l2, defect)) if defect < 1e-2 => Ok([q, l2.transpose().to_owned(), r1]),
        // Rare: undo the first pass (w = q₁ R₁) for the Householder fallback.
        _ => Err(mul(q.as_ref(), r1.as_ref())),
    }
}

/// The Cholesky factor `L` of `G = wᵀw` and `max|G − I|`; `None` when the factorization fails
/// or `L`'s diagonal spans more than six orders of magnitude (`κ(w)` too large for
/// CholeskyQR). Only the lower triangle of `G` is formed; on several ranks (`w` this rank's
/// rows) the ranks' parts are added in rank order, so every rank takes the same decision.
fn cholesky_of_gram(w: &Mat<f64>, comm: &dyn stolr_comm::Communicator) -> Option<(Mat<f64>, f64)> {
    let a = w.ncols();
    let mut g = tall_inner(w.as_ref(), w.as_ref(), true);
    stolr_comm::all_reduce_lower(comm, &mut g);
    let defect = (0..a)
        .flat_map(|j| (j..a).map(move |i| (i, j)))
        .map(|(i, j)| (g[(i, j)] - if i == j { 1.0 } else { 0.0 }).abs())
        .fold(0.0_f64, f64::max);
    let llt = g.llt(faer::Side::Lower).ok()?;
    let l = llt.L();
    let (lo, hi) = (0..a).map(|i| l[(i, i)]).fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Also rejects NaN.
    if lo.partial_cmp(&(1e-6 * hi)) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    Some((l.to_owned(), defect))
}

/// Orthonormal basis of `[u, w]` and the coefficients of `[u, w]` in it, by the chosen path.
/// Returns `(basis_extra, r_full)`: `[u, w] = [u, basis_extra] · r_full` for
/// `BlockGramSchmidt` (the basis keeps `u` as its first columns and `r_full` has the identity
/// in its top-left block), or `[u, w] = basis_extra · r_full` for `FreshQr` (then the basis is
/// entirely new and `u` is not reused). The flag in the result says which.
pub(crate) struct Basis {
    /// New orthonormal columns.
    pub extra: Mat<f64>,
    /// Coefficients, shape `(b + p, b + a)` or `(p, b + a)`.
    pub coeffs: Mat<f64>,
    /// Whether `u` is the leading part of the basis.
    pub keeps_u: bool,
    /// Upper-triangular `R₂` still to be applied: the new columns are `extra · R₂⁻¹`.
    pub pending: Option<Mat<f64>>,
}

/// `[u, w] = basis · coeffs` by block Gram–Schmidt (keeping `u`; also for `RayleighRitz`,
/// which has no explicit basis) or a fresh QR.
/// `w` `(n, a)` is consumed (its storage becomes the new columns).
pub(crate) fn extend_basis(u: MatRef<'_, f64>, w: Mat<f64>, how: Orthogonalization) -> Result<Basis, LowRankError> {
    extend_basis_sharded(u, w, how, Rows::whole(u.nrows()))
}

/// [`extend_basis`] of this rank's rows of `u` and `w` (`rows`: the ranks and the global row
/// count): the coefficients are the same on every rank, the new columns are this rank's rows.
/// Collective; one rank gives [`extend_basis`]'s bits.
pub(crate) fn extend_basis_sharded(
    u: MatRef<'_, f64>,
    w: Mat<f64>,
    how: Orthogonalization,
    rows: Rows<'_>,
) -> Result<Basis, LowRankError> {
    check_shape("new block", (u.nrows(), w.ncols()), (w.nrows(), w.ncols()))?;
    let (b, a) = (u.ncols(), w.ncols());
    match how {
        Orthogonalization::BlockGramSchmidt | Orthogonalization::RayleighRitz => {
            let Deferred { c, q, pending, r } = orthogonalize_deferred(u, w, rows);
            let p = q.ncols();
            let mut coeffs = Mat::zeros(b + p, b + a);
            for i in 0..b {
                coeffs[(i, i)] = 1.0;
            }
            coeffs.as_mut().submatrix_mut(0, b, b, a).copy_from(&c);
            coeffs.as_mut().submatrix_mut(b, b, p, a).copy_from(&r);
            Ok(Basis { extra: q, coeffs, keeps_u: true, pending })
        }
        Orthogonalization::FreshQr => {
            let (q, r) = thin_qr_sharded(hstack(u, w.as_ref()).as_ref(), rows.comm);
            Ok(Basis { extra: q, coeffs: r, keeps_u: false, pending: None })
        }
    }
}

impl Basis {
    /// `basis · coeffs`, shape `(n, k)`, for `coeffs` with as many rows as the basis has
    /// columns; `u` is the matrix that was passed to [`extend_basis`].
    pub(crate) fn times(&self, u: MatRef<'_, f64>, coeffs: MatRef<'_, f64>) -> Mat<f64> {
        let b = if self.keeps_u { u.ncols() } else { 0 };
        let resolved;
        let coeffs = match &self.pending {
            None => coeffs,
            Some(r2) => {
                let mut c = coeffs.to_owned();
                let bottom = c.as_mut().subrows_mut(b, self.extra.ncols());
                faer::linalg::triangular_solve::solve_upper_triangular_in_place(r2.as_ref(), bottom, faer::Par::Seq);
                resolved = c;
                resolved.as_ref()
            }
        };
        if self.keeps_u {
            crate::products::mul_split(u, self.extra.as_ref(), coeffs)
        } else {
            mul(self.extra.as_ref(), coeffs)
        }
    }
}
