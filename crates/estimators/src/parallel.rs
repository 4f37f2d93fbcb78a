//! Column-parallel element-wise loops over an owned matrix.
//!
//! faer parallelises its own kernels (GEMM, factorizations) through [`Par`]; the element-wise
//! passes of this crate (`exp`, `cos`/`sin`, ℓ1 distances, products of projections) are spread
//! over the same number of threads with `std::thread::scope`, so the crate needs no extra
//! dependency and honours `faer::set_global_parallelism` (set it to `Par::Seq` to stay on one
//! thread).

use faer::{Mat, Par};

/// Below this many scalar operations per thread, spawning a thread costs more than it saves.
const MIN_WORK_PER_THREAD: usize = 1 << 16;

/// Calls `f(j, column_j)` for every column `j` of `m`.
///
/// `cost(j)` estimates the work of column `j` in scalar operations; it balances contiguous
/// groups of columns over at most `par.degree()` threads and keeps small jobs sequential.
pub(crate) fn for_each_col_mut<F, C>(m: &mut Mat<f64>, par: Par, cost: C, f: F)
where
    F: Fn(usize, &mut [f64]) + Sync,
    C: Fn(usize) -> usize,
{
    let ncols = m.ncols();
    let mut cols: Vec<&mut [f64]> = m
        .col_iter_mut()
        .map(|c| {
            c.try_as_col_major_mut()
                .expect("columns of an owned faer matrix are contiguous")
                .as_slice_mut()
        })
        .collect();
    let costs: Vec<usize> = (0..ncols).map(cost).collect();
    let total: usize = costs.iter().sum();
    let threads = par
        .degree()
        .min(total / MIN_WORK_PER_THREAD)
        .min(ncols)
        .max(1);
    if threads == 1 {
        for (j, col) in cols.iter_mut().enumerate() {
            f(j, col);
        }
        return;
    }
    let f = &f;
    std::thread::scope(|scope| {
        let mut rest: &mut [&mut [f64]] = &mut cols;
        let mut start = 0;
        let mut done = 0;
        for t in 0..threads {
            let last = t + 1 == threads;
            let target = total / threads * (t + 1);
            let mut end = start;
            while end < ncols && (last || done < target || end == start) {
                done += costs[end];
                end += 1;
            }
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
            rest = tail;
            let first = start;
            let run = move || {
                let chunk = chunk;
                for (offset, col) in chunk.iter_mut().enumerate() {
                    f(first + offset, col);
                }
            };
            if last {
                run();
            } else {
                scope.spawn(run);
            }
            start = end;
        }
    });
}

/// Copies the strictly lower triangle of the square matrix `m` onto its upper triangle, in
/// cache-sized blocks.
pub(crate) fn mirror_lower_to_upper(m: &mut Mat<f64>) {
    const BLOCK: usize = 64;
    let n = m.nrows();
    debug_assert_eq!(n, m.ncols());
    for jb in (0..n).step_by(BLOCK) {
        let j_end = (jb + BLOCK).min(n);
        for ib in (jb..n).step_by(BLOCK) {
            let i_end = (ib + BLOCK).min(n);
            for j in jb..j_end {
                for i in ib.max(j + 1)..i_end {
                    m[(j, i)] = m[(i, j)];
                }
            }
        }
    }
}
