//! Column-parallel element-wise loops over an owned matrix.
//!
//! faer parallelises its own kernels (GEMM, factorizations) through [`Par`] on rayon's global
//! pool; the element-wise passes of this crate (`exp`, `cos`/`sin`, ℓ1 distances, products of
//! projections) run on the same pool, so the two never compete for cores, and they honour
//! `faer::set_global_parallelism` (set it to `Par::Seq` to stay on one thread).

use faer::{Mat, Par};
use rayon::prelude::*;
use stolr_lowrank::clear_upper_vector_state;

/// Below this many scalar operations per task, splitting costs more than it saves.
const MIN_WORK_PER_TASK: usize = 1 << 16;

/// Calls `f(j, column_j)` for every column `j` of `m`.
///
/// `cost(j)` estimates the work of column `j` in scalar operations; columns are grouped into
/// contiguous tasks of at least [`MIN_WORK_PER_TASK`] operations, and small jobs stay sequential.
pub(crate) fn for_each_col_mut<F, C>(m: &mut Mat<f64>, par: Par, cost: C, f: F)
where
    F: Fn(usize, &mut [f64]) + Sync,
    C: Fn(usize) -> usize,
{
    let ncols = m.ncols();
    let mut cols: Vec<&mut [f64]> = m
        .col_iter_mut()
        .map(|c| c.try_as_col_major_mut().expect("columns of an owned faer matrix are contiguous").as_slice_mut())
        .collect();
    let total: usize = (0..ncols).map(cost).sum();
    // The passes call libm after GEMMs that may leave the thread's vector state dirty
    // ([`clear_upper_vector_state`]): clear it on whichever thread runs a column.
    if par.degree() <= 1 || total < 2 * MIN_WORK_PER_TASK || ncols < 2 {
        clear_upper_vector_state();
        for (j, col) in cols.iter_mut().enumerate() {
            f(j, col);
        }
        return;
    }
    let per_col = (total / ncols).max(1);
    let min_len = MIN_WORK_PER_TASK.div_ceil(per_col).max(1);
    cols.par_iter_mut().enumerate().with_min_len(min_len).for_each(|(j, col)| {
        clear_upper_vector_state();
        f(j, col)
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
