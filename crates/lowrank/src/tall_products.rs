//! Products over the rows of tall matrices (`n` rows, few columns): inner products `aᵀb`, the
//! one-pass `(XW, XᵀXW)`, the Gram matrix of a pair of blocks (sharded across ranks) and the
//! in-place recombination of a basis. Reductions over the rows cut them into groups fixed by the
//! shape alone, form each group's partial product sequentially and add the partials in group
//! order.

use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// At most this many row groups (and partial results held at once) in the fixed-order
/// reductions of [`tall_inner`] and [`gram_apply`].
const MAX_ROW_GROUPS: usize = 32;

/// The number of row groups of a fixed-order reduction over `n` rows costing `work_per_row`
/// multiply–adds each: about 2²⁰ multiply–adds and at least 256 rows per group (below that the
/// split costs more than it saves), at most [`MAX_ROW_GROUPS`]. A function of the shape alone,
/// never of the number of threads.
fn row_groups(n: usize, work_per_row: usize) -> usize {
    let by_work = n.saturating_mul(work_per_row.max(1)) >> 20;
    by_work.min(n / 256).clamp(1, MAX_ROW_GROUPS)
}

/// Runs `part(g)` for `g` in `0..groups` (in parallel on faer's global parallelism when it has
/// more than one thread) and returns the results in group order.
fn map_groups<T: Send>(groups: usize, part: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if faer::get_global_parallelism().degree() > 1 && groups > 1 {
        use rayon::prelude::*;
        (0..groups).into_par_iter().map(part).collect()
    } else {
        (0..groups).map(part).collect()
    }
}

/// The sum of `parts` in their order (zero `(p, q)` when there are none).
fn sum_in_order(parts: Vec<Mat<f64>>, p: usize, q: usize) -> Mat<f64> {
    let mut parts = parts.into_iter();
    let mut sum = parts.next().unwrap_or_else(|| Mat::zeros(p, q));
    for part in parts {
        sum += &part;
    }
    sum
}

/// `aᵀ b` for tall `a` `(n, p)` and `b` `(n, q)`, result `(p, q)`; with `lower_only`, only the
/// lower triangle is formed (for `a = b`, a Gram matrix; the upper triangle is then zero).
///
/// Products of this "inner" shape have a long summation dimension and a small output. The rows
/// are cut into contiguous groups fixed by `n·p·q` alone (about 2²⁰ multiply–adds and at least
/// 256 rows each, at most 32 groups); each group's partial product is one sequential GEMM (in
/// parallel over the groups on faer's global parallelism), and the partials are summed in
/// group order, so the result is the same bits for any number of threads. Memory: one `(p, q)`
/// partial per group.
///
/// # Panics
/// If `a` and `b` have different numbers of rows.
pub fn tall_inner(a: MatRef<'_, f64>, b: MatRef<'_, f64>, lower_only: bool) -> Mat<f64> {
    assert_eq!(a.nrows(), b.nrows(), "tall_inner: row counts differ");
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    let (n, p, q) = (a.nrows(), a.ncols(), b.ncols());
    let structure = if lower_only { BlockStructure::TriangularLower } else { BlockStructure::Rectangular };
    let groups = row_groups(n, p * q);
    let rows = n.div_ceil(groups);
    let partial = |g: usize| {
        let start = (g * rows).min(n);
        let len = rows.min(n - start);
        let mut out = Mat::<f64>::zeros(p, q);
        matmul(
            out.as_mut(),
            structure,
            Accum::Replace,
            a.subrows(start, len).transpose(),
            BlockStructure::Rectangular,
            b.subrows(start, len),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        out
    };
    sum_in_order(map_groups(groups, partial), p, q)
}

/// The Gram matrix $\sum_b B_b^\top B_b$ `(d, d)` (lower triangle only; the upper is zero) of
/// `n` rows of width `d` that are never held together: `fill(start, block)` writes rows
/// `start .. start + block.nrows()` into `block` `(len, d)`, in blocks of `block_rows` rows (a
/// source converted or centred on the fly, e.g. float32 rows).
///
/// The blocks are dealt in turn to [`gram_lanes`] lanes (fixed by `d` alone), each summing its
/// blocks in order with sequential GEMMs; the lanes run in parallel on faer's global
/// parallelism and are added in lane order, so the result is the same bits for any number of
/// threads. Memory: per lane a `(d, d)` sum and a `(block_rows, d)` block ([`gram_blocks_bytes`]).
///
/// # Panics
/// If `block_rows == 0`.
pub fn gram_of_row_blocks(
    n: usize,
    d: usize,
    block_rows: usize,
    fill: impl Fn(usize, MatMut<'_, f64>) + Sync,
) -> Mat<f64> {
    gram_and_sums_of_row_blocks(n, d, block_rows, fill).0
}

/// [`gram_of_row_blocks`] and the column sums of the same blocks (length `d`), taken while each
/// block is in cache: each lane sums its blocks' columns row after row in block order, and the
/// lanes' sums are added in lane order (the same bits for any number of threads). A centred
/// Gram matrix then needs no pass of its own for the mean's correction
/// (`Pca::fit_exact_rows`).
///
/// # Panics
/// If `block_rows == 0`.
pub fn gram_and_sums_of_row_blocks(
    n: usize,
    d: usize,
    block_rows: usize,
    fill: impl Fn(usize, MatMut<'_, f64>) + Sync,
) -> (Mat<f64>, Vec<f64>) {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    assert!(block_rows > 0, "gram_of_row_blocks: empty blocks");
    let lanes = gram_lanes(d);
    let blocks = n.div_ceil(block_rows);
    let lane = |l: usize| {
        let mut sum = Mat::<f64>::zeros(d, d);
        let mut sums = vec![0.0; d];
        let mut block = Mat::<f64>::zeros(block_rows.min(n), d);
        for b in (l..blocks).step_by(lanes) {
            let start = b * block_rows;
            let len = block_rows.min(n - start);
            let mut rows = block.as_mut().subrows_mut(0, len);
            fill(start, rows.rb_mut());
            // Four columns at a time: four independent chains of additions over contiguous
            // columns, each column still summed from its first row down.
            for (j0, totals) in (0..d).step_by(4).zip(sums.chunks_mut(4)) {
                let column = |k: usize| {
                    rows.rb().col(j0 + k).try_as_col_major().expect("a column of a Mat is contiguous").as_slice()
                };
                let columns: [&[f64]; 4] = std::array::from_fn(|k| if k < totals.len() { column(k) } else { &[] });
                let mut acc = [0.0; 4];
                acc[..totals.len()].copy_from_slice(totals);
                if totals.len() == 4 {
                    let [a, b, c, e] = columns;
                    for (((a, b), c), e) in a.iter().zip(b).zip(c).zip(e) {
                        acc[0] += a;
                        acc[1] += b;
                        acc[2] += c;
                        acc[3] += e;
                    }
                } else {
                    for (k, column) in columns.iter().enumerate().take(totals.len()) {
                        acc[k] = column.iter().fold(acc[k], |t, v| t + v);
                    }
                }
                totals.copy_from_slice(&acc[..totals.len()]);
            }
            matmul(
                sum.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                rows.rb().transpose(),
                BlockStructure::Rectangular,
                rows.rb(),
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
        }
        (sum, sums)
    };
    let (grams, sums): (Vec<_>, Vec<_>) = map_groups(lanes, lane).into_iter().unzip();
    let mut total = vec![0.0; d];
    for part in sums {
        total.iter_mut().zip(part).for_each(|(t, v)| *t += v);
    }
    (sum_in_order(grams, d, d), total)
}

/// The number of lanes of [`gram_of_row_blocks`] for width `d`: 4, 2 or 1, the most whose
/// `(d, d)` sums take at most 128 MiB together.
pub fn gram_lanes(d: usize) -> usize {
    let sum = 8u64.saturating_mul(d as u64).saturating_mul(d as u64);
    [4u64, 2].into_iter().find(|&l| l.saturating_mul(sum) <= 128 << 20).unwrap_or(1) as usize
}

/// Bytes [`gram_of_row_blocks`] and [`gram_and_sums_of_row_blocks`] allocate: per lane a
/// `(d, d)` sum, `d` column sums and a block of `block_rows` rows, plus the result.
pub fn gram_blocks_bytes(d: usize, block_rows: usize) -> u64 {
    let (d, b) = (d as u64, block_rows as u64);
    let lane = 8u64.saturating_mul(d.saturating_mul(d).saturating_add(b.saturating_mul(d)).saturating_add(d));
    lane.saturating_mul(gram_lanes(d as usize) as u64 + 1)
}

/// `(X W, Xᵀ X W)` for data `x` `(n, d)` and `w` `(d, r)` in **one pass** over `x`: row blocks
/// of `x` are multiplied by `w` and, while still in cache, their transposes by the result. The
/// snapshot of the PCA solvers is bound by memory bandwidth on data like MNIST (70 000 × 784),
/// so reading `x` once instead of twice halves its cost. Returns `xw` `(n, r)` and `xtxw`
/// `(d, r)`.
///
/// The rows are cut into contiguous groups of whole 256-row blocks, fixed by `n` alone (at
/// least four blocks per group, at most 32 groups); each group sums its blocks' products in
/// order (in parallel over the groups on faer's global parallelism) and the `(d, r)` partials
/// are summed in group order, so the result is the same bits for any number of threads.
///
/// # Panics
/// If `w` does not have `d` rows.
pub fn gram_apply(x: MatRef<'_, f64>, w: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    assert_eq!(x.ncols(), w.nrows(), "gram_apply: w needs one row per column of x");
    const BLOCK: usize = 256;
    let (n, d, r) = (x.nrows(), x.ncols(), w.ncols());
    let mut xw = Mat::<f64>::zeros(n, r);
    let range = |(start, xw): (usize, MatMut<'_, f64>)| {
        let mut xw = xw;
        let mut acc = Mat::<f64>::zeros(d, r);
        let len = xw.nrows();
        for s in (0..len).step_by(BLOCK) {
            let b = BLOCK.min(len - s);
            let rows = x.subrows(start + s, b);
            let mut t = xw.rb_mut().subrows_mut(s, b);
            faer::linalg::matmul::matmul(t.rb_mut(), Accum::Replace, rows, w, 1.0, Par::Seq);
            faer::linalg::matmul::matmul(acc.as_mut(), Accum::Add, rows.transpose(), t.rb(), 1.0, Par::Seq);
        }
        acc
    };
    let blocks = n.div_ceil(BLOCK);
    let groups = blocks.div_ceil(4).clamp(1, MAX_ROW_GROUPS);
    let step = blocks.div_ceil(groups) * BLOCK;
    let mut parts: Vec<(usize, MatMut<'_, f64>)> = Vec::with_capacity(groups);
    let mut rest = xw.as_mut();
    let mut start = 0;
    while start < n {
        let len = step.min(n - start);
        let (head, tail) = rest.split_at_row_mut(len);
        parts.push((start, head));
        rest = tail;
        start += len;
    }
    let partials: Vec<Mat<f64>> = if faer::get_global_parallelism().degree() > 1 && parts.len() > 1 {
        use rayon::prelude::*;
        parts.into_par_iter().map(range).collect()
    } else {
        parts.into_iter().map(range).collect()
    };
    let acc = sum_in_order(partials, d, r);
    (xw, acc)
}

/// Rows per group of [`gram_of_pair`]: enough for efficient products, few enough partial sums.
const GRAM_GROUP_ROWS: usize = 4096;
/// At most this many partial Gram matrices are held at once by [`gram_of_pair`].
const GRAM_MAX_GROUPS: usize = 32;

/// The lower triangle of the Gram matrix `[u, w]ᵀ[u, w]` of `u` `(n, b)` and `w` `(n, a)`,
/// shape `(b + a, b + a)` (upper triangle zero), without forming `[u, w]`. When `known_uu`
/// (`(b, b)`, lower triangle read) is given it is taken as the block `uᵀu` instead of forming
/// it, which saves `n·b(b+1)` of the `n·(b+a)(b+a+1)` flops.
///
/// The rows are cut into `g = min(⌈n/4096⌉, 32)` contiguous groups; each group's partial Gram
/// matrix is one sequential product (in parallel over groups on faer's global parallelism), and
/// the partials are summed in group order. The groups depend on `n` only, so the result is the
/// same bits whatever the number of threads. Memory `g·(b+a)²`.
///
/// **Sharded rows.** `u` and `w` are this rank's rows; the local sum (over the local `n`) is
/// then added across ranks in rank order by `comm` (the rows of the lower triangle below the
/// known block only, `a·b + a(a+1)/2` numbers, when `known_uu` is given; `m(m+1)/2` otherwise).
///
/// # Panics
/// If `u` and `w` have different numbers of rows, or `known_uu` is not `(b, b)`.
pub(crate) fn gram_of_pair(
    u: MatRef<'_, f64>,
    w: MatRef<'_, f64>,
    known_uu: Option<MatRef<'_, f64>>,
    comm: &dyn stolr_comm::Communicator,
) -> Mat<f64> {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    assert_eq!(u.nrows(), w.nrows(), "gram_of_pair: row counts differ");
    let (n, b, a) = (u.nrows(), u.ncols(), w.ncols());
    assert!(known_uu.is_none_or(|g| g.shape() == (b, b)), "gram_of_pair: known_uu shape");
    let m = b + a;
    let groups = n.div_ceil(GRAM_GROUP_ROWS).clamp(1, GRAM_MAX_GROUPS);
    let rows_per_group = n.div_ceil(groups).max(1);
    let partial = |g: usize| {
        let start = (g * rows_per_group).min(n);
        let len = rows_per_group.min(n - start);
        let (ug, wg) = (u.subrows(start, len), w.subrows(start, len));
        let mut out = Mat::<f64>::zeros(m, m);
        let seq = Par::Seq;
        let (lower, rect) = (BlockStructure::TriangularLower, BlockStructure::Rectangular);
        let replace = Accum::Replace;
        if known_uu.is_none() {
            matmul(out.as_mut().submatrix_mut(0, 0, b, b), lower, replace, ug.transpose(), rect, ug, rect, 1.0, seq);
        }
        matmul(out.as_mut().submatrix_mut(b, 0, a, b), rect, replace, wg.transpose(), rect, ug, rect, 1.0, seq);
        matmul(out.as_mut().submatrix_mut(b, b, a, a), lower, replace, wg.transpose(), rect, wg, rect, 1.0, seq);
        out
    };
    let partials: Vec<Mat<f64>> = if faer::get_global_parallelism().degree() > 1 && groups > 1 {
        use rayon::prelude::*;
        (0..groups).into_par_iter().map(partial).collect()
    } else {
        (0..groups).map(partial).collect()
    };
    let mut parts = partials.into_iter();
    let mut sum = parts.next().unwrap_or_else(|| Mat::zeros(m, m));
    for p in parts {
        sum += &p;
    }
    // The local rows' partials, then the ranks' in rank order; the known block never crosses.
    stolr_comm::all_reduce_lower_from(comm, &mut sum, if known_uu.is_some() { b } else { 0 });
    if let Some(g) = known_uu {
        for j in 0..b {
            for i in j..b {
                sum[(i, j)] = g[(i, j)];
            }
        }
    }
    sum
}

/// Rows per block of [`combine_in_place`].
const COMBINE_ROWS: usize = 512;

/// `u[:, ..k] ← [u[:, ..b], w] · y` in place, for `u` `(n, c)` with `c ≥ max(b, k)`, `w`
/// `(n, a)` and `y` `(b + a, k)`; the other columns of `u` are left as they are.
///
/// Row `i` of the result depends on row `i` of `u` and `w` only, so the product is formed one
/// block of 512 rows at a time into a small buffer and copied back over the block: no `n × k`
/// temporary. Blocks run in parallel on faer's global parallelism; each row is computed by
/// the same operations whatever the number of threads. Cost `2n(b+a)k` flops.
///
/// # Panics
/// If the shapes are inconsistent.
pub(crate) fn combine_in_place(u: MatMut<'_, f64>, b: usize, w: MatRef<'_, f64>, y: MatRef<'_, f64>) {
    let (n, k, a) = (u.nrows(), y.ncols(), w.ncols());
    assert!(w.nrows() == n && y.nrows() == b + a && u.ncols() >= b.max(k), "combine_in_place: shapes");
    let block = |tmp: &mut Mat<f64>, (index, ub): (usize, MatMut<'_, f64>)| {
        let rows = ub.nrows();
        let mut t = tmp.as_mut().subrows_mut(0, rows);
        let wb = w.subrows(index * COMBINE_ROWS, rows);
        let seq = Par::Seq;
        let use_u = b > 0;
        if use_u {
            let ub_old = ub.rb().subcols(0, b);
            faer::linalg::matmul::matmul(t.rb_mut(), Accum::Replace, ub_old, y.subrows(0, b), 1.0, seq);
        }
        let accum = if use_u { Accum::Add } else { Accum::Replace };
        faer::linalg::matmul::matmul(t.rb_mut(), accum, wb, y.subrows(b, a), 1.0, seq);
        ub.subcols_mut(0, k).copy_from(t.rb());
    };
    let new_tmp = || Mat::<f64>::zeros(COMBINE_ROWS.min(n), k);
    if faer::get_global_parallelism().degree() > 1 && n > COMBINE_ROWS {
        use rayon::prelude::*;
        u.par_row_chunks_mut(COMBINE_ROWS).enumerate().for_each_init(new_tmp, block);
    } else {
        let mut tmp = new_tmp();
        let mut u = u;
        for index in 0..n.div_ceil(COMBINE_ROWS) {
            let start = index * COMBINE_ROWS;
            let rows = COMBINE_ROWS.min(n - start);
            block(&mut tmp, (index, u.rb_mut().subrows_mut(start, rows)));
        }
    }
}

#[cfg(test)]
mod gram_blocks_tests {
    use super::*;

    #[test]
    fn gram_of_row_blocks_is_the_gram_matrix_for_every_block_size_and_thread_count() {
        let (n, d) = (203, 7);
        let x = Mat::from_fn(n, d, |i, j| ((i * 31 + j * 17) % 23) as f64 - 11.0 + if i == 5 { 1e3 } else { 0.0 });
        let want = x.transpose() * &x;
        for block in [1, 10, 64, 203, 500] {
            let fill = |start: usize, mut b: MatMut<'_, f64>| {
                let len = b.nrows();
                b.copy_from(x.subrows(start, len));
            };
            let got = gram_of_row_blocks(n, d, block, fill);
            for j in 0..d {
                for i in 0..d {
                    let w = if i >= j { want[(i, j)] } else { 0.0 };
                    assert!((got[(i, j)] - w).abs() <= 1e-12 * want[(i, i)].abs().max(1.0), "block {block} ({i}, {j})");
                }
            }
            // The same bits on one thread as on the pool.
            let before = faer::get_global_parallelism();
            faer::set_global_parallelism(Par::Seq);
            let seq = gram_of_row_blocks(n, d, block, fill);
            faer::set_global_parallelism(before);
            assert_eq!(seq, got, "block {block}: thread count changed the bits");
        }
        assert_eq!(gram_lanes(10), 4);
        assert_eq!(gram_lanes(3000), 1);
    }
}
