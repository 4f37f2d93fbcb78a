//! `.npy` files of `(n, r)` matrices whose rows are split across the ranks of an MPI run (the
//! eigenvectors and projections of a sharded fit): rank 0 writes the file, receiving every
//! other rank's rows a block at a time, so that no process ever holds more than its own rows
//! and one block of another's.

use std::path::Path;

use anyhow::{Result, bail};
use faer::MatRef;
use stolr_comm::Communicator;
use stolr_datasets::{write_npy_rows, write_npy_values};

/// Rows sent per message when rank 0 collects another rank's rows (4096 rows of `r` values).
pub const BLOCK_ROWS: usize = 4096;

/// Writes the `(n, r)` matrix whose rows are, in rank order, each rank's `local` `(n_p, r)`,
/// each column `j` multiplied by `scale[j]` (`None`: as they are), to `path` on rank 0 (`path`
/// is ignored on the other ranks; `write` must be the same on every rank: `false` writes
/// nothing and sends nothing). Rank 0 writes its own rows, then each other rank's in blocks of
/// [`BLOCK_ROWS`] rows gathered from it (`8·BLOCK_ROWS·r` bytes per message): rank 0 holds one
/// block beyond its rows. Collective.
///
/// # Errors
/// When ranks hold a different number of columns, or the file cannot be written (on rank 0;
/// the other ranks go on, and the run then fails on rank 0).
pub fn write_rows_in_rank_order(
    path: Option<&Path>,
    write: bool,
    local: MatRef<'_, f64>,
    scale: Option<&[f64]>,
    comm: &dyn Communicator,
) -> Result<()> {
    write_in_rank_order(path, write, local, scale, false, comm)
}

/// [`write_rows_in_rank_order`] for a vector: each rank's `local` values `(n_p,)`, written in
/// rank order as one `(n,)` array. Collective.
///
/// # Errors
/// As [`write_rows_in_rank_order`].
pub fn write_values_in_rank_order(path: Option<&Path>, local: &[f64], comm: &dyn Communicator) -> Result<()> {
    let column = MatRef::from_column_major_slice(local, local.len(), 1);
    write_in_rank_order(path, true, column, None, true, comm)
}

/// [`write_rows_in_rank_order`], the file a vector `(n,)` when `vector` (`local` one column).
fn write_in_rank_order(
    path: Option<&Path>,
    write: bool,
    local: MatRef<'_, f64>,
    scale: Option<&[f64]>,
    vector: bool,
    comm: &dyn Communicator,
) -> Result<()> {
    if !write {
        return Ok(());
    }
    let r = local.ncols();
    let shapes = comm.all_gather(&[local.nrows() as f64, r as f64]);
    if shapes.iter().any(|s| s[1] as usize != r) {
        bail!("the ranks hold eigenvectors of different widths: {shapes:?}");
    }
    let counts: Vec<usize> = shapes.iter().map(|s| s[0] as usize).collect();
    let n: usize = counts.iter().sum();
    let scaled = |row: &mut Vec<f64>| {
        if let Some(scale) = scale {
            row.iter_mut().zip(scale).for_each(|(v, s)| *v *= s);
        }
    };
    let row_of = |i: usize| {
        let mut row: Vec<f64> = local.row(i).iter().copied().collect();
        scaled(&mut row);
        row
    };
    // The blocks of rank `p`: every rank takes part in each gather; only `p` sends.
    let me = comm.rank();
    let block_of = move |p: usize, k: usize| -> Option<Vec<f64>> {
        let send: Vec<f64> = if me == p {
            let end = ((k + 1) * BLOCK_ROWS).min(counts[p]);
            (k * BLOCK_ROWS..end).flat_map(row_of).collect()
        } else {
            Vec::new()
        };
        comm.gather(&send, 0).map(|mut parts| std::mem::take(&mut parts[p]))
    };
    let schedule: Vec<(usize, usize)> = (1..comm.size())
        .flat_map(|p| (0..shapes[p][0] as usize).step_by(BLOCK_ROWS).map(move |s| (p, s / BLOCK_ROWS)))
        .collect();
    match path.filter(|_| comm.is_root()) {
        Some(path) => {
            let own = (0..local.nrows()).map(|i| Ok::<_, String>(row_of(i)));
            let others = schedule.into_iter().flat_map(|(p, k)| {
                let block = block_of(p, k).unwrap_or_default();
                block.chunks_exact(r.max(1)).map(|row| Ok(row.to_vec())).collect::<Vec<_>>()
            });
            if vector {
                write_npy_values(path, n, own.chain(others))?;
            } else {
                write_npy_rows(path, n, r, own.chain(others))?;
            }
        }
        None => {
            for (p, k) in schedule {
                block_of(p, k);
            }
        }
    }
    Ok(())
}
