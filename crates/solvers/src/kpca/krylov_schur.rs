//! The eigensolver of the matrix-free exact kernel PCA: a thick-restart block Lanczos (block
//! Krylov–Schur) on an operator given as this rank's rows of its products ([`Apply`]), the
//! basis sharded across the ranks of [`Ranks`] (one process: [`stolr_comm::SingleProcess`]).
//! [`super::matrix_free`] builds the operators (tiled kernel rows, sharded rows, a caller's
//! products) and the fits around it.

use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use stolr_comm::{Communicator, RowShard, all_gather_rows, all_reduce_mat};
use stolr_lowrank::{Eigenpairs, matmul, sym_eigen_desc, tall_inner};
use stolr_memory::f64_bytes;

use crate::SolverError;

/// The sizes of the Krylov basis: block `b`, `p` Ritz vectors kept at a restart, at most
/// `m_max` basis columns before a Rayleigh–Ritz step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) b: usize,
    pub(super) p: usize,
    pub(super) m_max: usize,
}

/// Block steps between restarts.
const STEPS_PER_RESTART: usize = 6;

impl Sizes {
    /// `None` when `n` is too small for a basis (`n < p + 2b`): then the operator is applied to
    /// the identity and decomposed densely.
    pub(super) fn new(n: usize, k: usize, b: usize) -> Option<Self> {
        let p = k + b;
        let m_max = (p + STEPS_PER_RESTART * b).min(n.saturating_sub(b));
        (m_max >= p + b).then_some(Sizes { b, p, m_max })
    }

    /// Bytes of this rank's `rows` of the basis `(rows, m_max + b)`, the expansion block
    /// `(rows, b)` and the Ritz vectors at a restart `(rows, p)`, the block gathered from every
    /// rank before a product `(n, b)` and the projected matrix `(m_max + b)²`.
    pub(super) fn bytes(self, n: usize, rows: usize) -> u64 {
        let cols = self.m_max + 2 * self.b + self.p;
        f64_bytes(&[rows, cols])
            .saturating_add(f64_bytes(&[n, self.b]))
            .saturating_add(f64_bytes(&[self.m_max + self.b, self.m_max + self.b]))
    }
}

pub(super) struct Solved {
    pub(super) pairs: Eigenpairs,
    pub(super) restarts: usize,
    pub(super) products: usize,
    pub(super) residuals: Vec<f64>,
}

/// This rank's rows of the operator applied to a whole block `(n, b)`: `(shard.rows, b)`.
pub(super) type Apply<'a> = dyn FnMut(MatRef<'_, f64>) -> Result<Mat<f64>, SolverError> + 'a;

/// The ranks sharing the rows of the basis and this rank's share.
pub(super) struct Ranks<'a> {
    pub(super) comm: &'a dyn Communicator,
    pub(super) shard: RowShard,
}

impl Ranks<'_> {
    /// `aᵀ b` over all rows: each rank's rows in fixed groups, then added in rank order.
    fn inner(&self, a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
        let mut out = tall_inner(a, b, false);
        all_reduce_mat(self.comm, &mut out);
        out
    }

    /// The Euclidean norm of a sharded column `(rows, 1)`.
    fn norm(&self, v: MatRef<'_, f64>) -> f64 {
        self.inner(v, v)[(0, 0)].sqrt()
    }

    /// This rank's rows of the deterministic start column `c`.
    fn start_column(&self, c: usize, salt: usize, mut out: MatMut<'_, f64>) {
        let values = start_column(self.shard.total, c, salt).skip(self.shard.first);
        for (i, v) in values.take(self.shard.rows).enumerate() {
            out[(i, 0)] = v;
        }
    }
}

/// Tiny `n`: the operator applied to the identity, its rows gathered from every rank, then a
/// dense eigendecomposition on every rank.
pub(super) fn dense_through_operator(
    ranks: &Ranks<'_>,
    k: usize,
    apply: &mut Apply<'_>,
) -> Result<Solved, SolverError> {
    let n = ranks.shard.total;
    let a = all_gather_rows(ranks.comm, apply(Mat::<f64>::identity(n, n).as_ref())?.as_ref());
    let sym = Mat::from_fn(n, n, |i, j| 0.5 * (a[(i, j)] + a[(j, i)]));
    drop(a);
    let (values, vectors) = sym_eigen_desc(sym.as_ref())?;
    let mut pairs = Eigenpairs { values: values[..k].to_vec(), vectors: vectors.subcols(0, k).to_owned() };
    pairs.fix_signs();
    pairs.vectors = pairs.vectors.subrows(ranks.shard.first, ranks.shard.rows).to_owned();
    Ok(Solved { pairs, restarts: 0, products: 1, residuals: vec![0.0; k] })
}

/// Deterministic start column `c`: a Weyl sequence with an irrational step per column, centred;
/// never orthogonal to a particular eigenvector such as the all-ones vector.
fn start_column(n: usize, c: usize, salt: usize) -> impl Iterator<Item = f64> {
    let alpha = ((2 + c + 97 * salt) as f64).sqrt().fract() + 0.1;
    (0..n).map(move |i| ((i as f64 + 1.0) * alpha + 0.5 * (c as f64)).fract() - 0.5)
}

/// Projects the columns of `against` (orthonormal, this rank's rows) off `w` (this rank's rows):
/// `w -= against · coef` with `coef = againstᵀ w` over all rows, which is returned.
fn project_out(ranks: &Ranks<'_>, against: MatRef<'_, f64>, mut w: MatMut<'_, f64>) -> Mat<f64> {
    if against.ncols() == 0 {
        return Mat::zeros(0, w.ncols());
    }
    let coef = ranks.inner(against, w.rb());
    matmul(w.rb_mut(), Accum::Add, against, coef.as_ref(), -1.0, faer::get_global_parallelism());
    coef
}

/// Orthonormalizes the columns of `w` `(rows, b)` (this rank's rows) in place, each already
/// orthogonal to `basis` `(rows, m)`, returning the upper triangular `r` with
/// `w_in = w_out · r`, the same on every rank.
///
/// Two passes of Cholesky QR: the Gram matrix `wᵀw` is added across ranks (one reduction of
/// `b²` numbers), factored `LLᵀ` on every rank, and `w ← w L⁻ᵀ`. When a column keeps less than
/// [`CHOLESKY_QR_KEEP`] of its norm against the previous ones (so that the first pass could
/// lose orthogonality), every rank finishes with [`column_gram_schmidt`] instead, which
/// handles dependent columns. The branch depends only on the reduced Gram matrix, so every rank
/// takes it.
pub(super) fn orthonormalize_block(
    ranks: &Ranks<'_>,
    w: &mut Mat<f64>,
    basis: MatRef<'_, f64>,
    salt: &mut usize,
) -> Mat<f64> {
    let b = w.ncols();
    let mut r = Mat::<f64>::identity(b, b);
    for _ in 0..2 {
        let gram = ranks.inner(w.as_ref(), w.as_ref());
        let Some(l) = checked_cholesky(&gram) else {
            return column_gram_schmidt(ranks, w, basis, salt) * &r;
        };
        solve_lower_triangular_in_place(l.as_ref(), w.as_mut().transpose_mut(), Par::Seq);
        r = l.transpose() * &r;
    }
    r
}

/// The share of its norm a column must keep against the previous columns for Cholesky QR
/// (`1e-5`: the Gram matrix then has condition well below `1/ε`, and two passes give columns
/// orthonormal to rounding).
const CHOLESKY_QR_KEEP: f64 = 1e-5;

/// The Cholesky factor `L` (lower) of the Gram matrix `g` `(b, b)`, or `None` when a pivot
/// falls below `CHOLESKY_QR_KEEP² · g_jj` (or is not finite).
fn checked_cholesky(g: &Mat<f64>) -> Option<Mat<f64>> {
    let b = g.nrows();
    let mut l = Mat::<f64>::zeros(b, b);
    for j in 0..b {
        let pivot = g[(j, j)] - (0..j).map(|k| l[(j, k)] * l[(j, k)]).sum::<f64>();
        if !(pivot > CHOLESKY_QR_KEEP * CHOLESKY_QR_KEEP * g[(j, j)] && pivot.is_finite()) {
            return None;
        }
        l[(j, j)] = pivot.sqrt();
        for i in j + 1..b {
            l[(i, j)] = (g[(i, j)] - (0..j).map(|k| l[(i, k)] * l[(j, k)]).sum::<f64>()) / l[(j, j)];
        }
    }
    Some(l)
}

/// [`orthonormalize_block`] column by column: each column projected off the previous ones
/// twice (one reduction each), then normalized; `3b − 1` reductions in all. A column whose norm
/// falls below `1e-12` of its norm on entry is dependent: it is replaced by a start-like vector
/// orthogonalized against `basis` and the previous columns, and its diagonal entry in `r` is 0
/// (its coefficients on the previous columns stay), so `w_in = w_out · r` holds to `1e-12` of
/// the column's norm.
fn column_gram_schmidt(ranks: &Ranks<'_>, w: &mut Mat<f64>, basis: MatRef<'_, f64>, salt: &mut usize) -> Mat<f64> {
    let b = w.ncols();
    let mut r = Mat::<f64>::zeros(b, b);
    // The norms on entry, one reduction for the block.
    let mut entry = Mat::from_fn(1, b, |_, c| w.col(c).iter().map(|v| v * v).sum::<f64>());
    all_reduce_mat(ranks.comm, &mut entry);
    for c in 0..b {
        let before = entry[(0, c)].sqrt();
        let (done, mut rest) = w.as_mut().split_at_col_mut(c);
        let mut col = rest.rb_mut().subcols_mut(0, 1);
        for _ in 0..2 {
            let coef = project_out(ranks, done.rb(), col.rb_mut());
            for p in 0..c {
                r[(p, c)] += coef[(p, 0)];
            }
        }
        let mut norm = ranks.norm(col.rb());
        if norm.is_nan() || norm <= 1e-12 * before || norm == 0.0 {
            // Dependent column: a fresh direction, orthogonal to everything so far.
            *salt += 1;
            ranks.start_column(c, *salt, col.rb_mut());
            for _ in 0..2 {
                project_out(ranks, basis, col.rb_mut());
                project_out(ranks, done.rb(), col.rb_mut());
            }
            norm = ranks.norm(col.rb());
        } else {
            r[(c, c)] = norm;
        }
        let inv = 1.0 / norm;
        col.col_mut(0).iter_mut().for_each(|v| *v *= inv);
    }
    r
}

/// The block Krylov–Schur iteration on `apply` (an `n × n` symmetric operator on `(n, b)`
/// blocks, each rank forming its rows) with the basis sharded by rows. See
/// [`matrix_free_kpca`] and [`matrix_free_kpca_sharded`].
pub(super) fn block_krylov_schur(
    ranks: &Ranks<'_>,
    k: usize,
    sizes: Sizes,
    tolerance: f64,
    max_restarts: usize,
    apply: &mut Apply<'_>,
) -> Result<Solved, SolverError> {
    let Sizes { b, p, m_max } = sizes;
    let rows = ranks.shard.rows;
    let par = faer::get_global_parallelism();
    let mut q = Mat::<f64>::zeros(rows, m_max + b);
    let mut t = Mat::<f64>::zeros(m_max + b, m_max + b);
    let mut salt = 0;
    // Start block: deterministic columns, orthonormalized.
    let mut start = Mat::<f64>::zeros(rows, b);
    for c in 0..b {
        ranks.start_column(c, 0, start.as_mut().subcols_mut(c, 1));
    }
    orthonormalize_block(ranks, &mut start, q.as_ref().subcols(0, 0), &mut salt);
    q.as_mut().subcols_mut(0, b).copy_from(&start);
    drop(start);
    let (mut m, mut new) = (b, 0);
    let (mut restarts, mut products) = (0, 0);
    loop {
        // A stop request (Ctrl-C in Python, `crate::interrupt`) ends the fit between products;
        // one process only, so that every rank of a sharded fit takes the same branch.
        if ranks.comm.size() == 1 && crate::interrupt::poll() {
            return Err(SolverError::Stopped { what: "the matrix-free exact kernel PCA" });
        }
        let block = all_gather_rows(ranks.comm, q.as_ref().subcols(new, b));
        let mut w = apply(block.as_ref())?;
        drop(block);
        products += 1;
        let qm = q.as_ref().subcols(0, m);
        let mut h = project_out(ranks, qm, w.as_mut());
        h += project_out(ranks, qm, w.as_mut());
        for c in 0..b {
            for i in 0..m {
                t[(i, new + c)] = h[(i, c)];
                t[(new + c, i)] = h[(i, c)];
            }
        }
        let r = orthonormalize_block(ranks, &mut w, qm, &mut salt);
        let room = m + b <= m_max;
        if room && m < p + b {
            q.as_mut().subcols_mut(m, b).copy_from(&w);
            new = m;
            m += b;
            continue;
        }
        // Rayleigh–Ritz on the m columns after every product once the basis holds two blocks
        // beyond the p kept at a restart (an (m, m) eigenproblem, m ≤ m_max: small against a
        // product of the (n, n) operator): replicated, so every rank takes the same branch.
        let tm = Mat::from_fn(m, m, |i, j| 0.5 * (t[(i, j)] + t[(j, i)]));
        let (theta, s) = sym_eigen_desc(tm.as_ref())?;
        let scale = theta[0].abs().max(f64::MIN_POSITIVE);
        // Residual of Ritz pair i: ‖R s[new..new+b, i]‖.
        let residual = |i: usize| {
            (0..b)
                .map(|a| {
                    let v: f64 = (0..b).map(|c| r[(a, c)] * s[(new + c, i)]).sum();
                    v * v
                })
                .sum::<f64>()
                .sqrt()
                / scale
        };
        let residuals: Vec<f64> = (0..k).map(residual).collect();
        let worst = residuals.iter().copied().fold(0.0, f64::max);
        if worst <= tolerance || (!room && restarts >= max_restarts) {
            if worst > tolerance {
                return Err(SolverError::NotConverged {
                    what: "the matrix-free exact kernel PCA (block Krylov–Schur)",
                    iterations: restarts,
                    residual: worst,
                    tolerance,
                });
            }
            let mut vectors = Mat::<f64>::zeros(rows, k);
            matmul(vectors.as_mut(), Accum::Replace, q.as_ref().subcols(0, m), s.as_ref().subcols(0, k), 1.0, par);
            let mut pairs = Eigenpairs { values: theta[..k].to_vec(), vectors };
            pairs.fix_signs_sharded(ranks.comm, ranks.shard.first);
            return Ok(Solved { pairs, restarts, products, residuals });
        }
        if room {
            q.as_mut().subcols_mut(m, b).copy_from(&w);
            new = m;
            m += b;
            continue;
        }
        // Thick restart: Q ← [Q s_{:p}, F], T ← diag(θ_{:p}), expand F next.
        let mut y = Mat::<f64>::zeros(rows, p);
        matmul(y.as_mut(), Accum::Replace, q.as_ref().subcols(0, m), s.as_ref().subcols(0, p), 1.0, par);
        q.as_mut().subcols_mut(0, p).copy_from(&y);
        drop(y);
        q.as_mut().subcols_mut(p, b).copy_from(&w);
        t.fill(0.0);
        for (i, &th) in theta.iter().take(p).enumerate() {
            t[(i, i)] = th;
        }
        m = p + b;
        new = p;
        restarts += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use stolr_comm::SingleProcess;

    #[test]
    fn block_orthonormalization_keeps_the_relation_for_any_conditioning() {
        let ranks = Ranks { comm: &SingleProcess, shard: RowShard::whole(200) };
        let mut rng = <Xoshiro256PlusPlus as SeedableRng>::seed_from_u64(4);
        let random = Mat::from_fn(200, 6, |_, _| rng.random_range(-1.0..1.0));
        // Well conditioned (Cholesky QR); a column 1e-7 from the span of the others (below
        // CHOLESKY_QR_KEEP: column by column); an exactly repeated column (replaced).
        let mut near = random.clone();
        let mut repeated = random.clone();
        for i in 0..200 {
            near[(i, 4)] = random[(i, 1)] - random[(i, 2)] + 1e-7 * random[(i, 4)];
            repeated[(i, 5)] = random[(i, 0)];
        }
        for (name, w_in) in [("random", random), ("nearly dependent", near), ("repeated", repeated)] {
            let mut w = w_in.clone();
            let mut salt = 0;
            let r = orthonormalize_block(&ranks, &mut w, Mat::<f64>::zeros(200, 0).as_ref(), &mut salt);
            let gram = w.transpose() * &w;
            let orth = (&gram - Mat::<f64>::identity(6, 6)).norm_max();
            assert!(orth < 1e-14, "{name}: ‖WᵀW − I‖ = {orth:e}");
            let relation = (&w * &r - &w_in).norm_max();
            assert!(relation < 1e-13 * w_in.norm_max(), "{name}: ‖W R − W_in‖ = {relation:e}");
            assert!((0..6).all(|i| (0..i).all(|j| r[(i, j)] == 0.0)), "{name}: R upper triangular");
            assert_eq!(salt, usize::from(name == "repeated"), "{name}: replaced columns");
        }
    }
}
