//! `stolr kpca` on rows sharded across the processes of an MPI run: each rank reads only its
//! own rows of a file ([`crate::common::input::load_part`]: LIBSVM, CSV and MAGIC by
//! line-aligned byte ranges, MNIST IDX and `.npy` by offsets; gzip files and tables with
//! categorical columns are read whole by every rank, which keeps its balanced share, as is the
//! built-in data). The fit itself is the library's job on the shard
//! ([`stolr_solvers::KernelPcaJob::run`], the call one process makes): it standardizes over
//! every rank, estimates σ over the distinct rows of all ranks, runs the distributed solver
//! (Nyström, the matrix-free exact solver, SKPCA with random Fourier or Maclaurin features)
//! and returns the outcome on rank 0, which writes the same files as one process. Only rank 0
//! prints and draws the progress bar.

use anyhow::{Context, Result, bail};
use faer::Mat;
use stolr_comm::{Communicator, RowShard};
use stolr_datasets::Dataset;
use stolr_model::OneHotEncoding;

use super::args::{KpcaArgs, load};
use crate::common::input::{Format, Part, gather_labels, load_part};

/// This rank's rows and what rank 0 keeps of the whole data.
pub(super) struct Read {
    /// This rank's rows `(shard.rows, d)`.
    pub local: Mat<f64>,
    pub shard: RowShard,
    /// The labels of every row and the source, on rank 0 (an empty dataset elsewhere); its
    /// matrix is empty.
    pub full: Dataset,
    pub encoding: Option<OneHotEncoding>,
    pub origin: &'static str,
}

/// Reads this rank's rows: a file's part ([`load_part`]), the built-in data whole, keeping the
/// balanced share. Rank 0 gets the labels of every row. Every rank must end up with at least
/// one row. The rows are read within `memory` (`--memory-limit`). Collective.
pub(super) fn read_shard(args: &KpcaArgs, comm: &dyn Communicator, memory: stolr_memory::MemoryBudget) -> Result<Read> {
    let (rank, size) = (comm.rank(), comm.size());
    let read = match &args.input {
        // The regression sets are refused by `load`.
        Some(path) if !matches!(args.format, Format::Abalone | Format::Housing) => {
            let Part { data, shard, encoding } = load_part(path, args.format, &args.table, comm, memory)?;
            let labels = gather_labels(comm, &data.labels).unwrap_or(stolr_datasets::Labels::None);
            let full = Dataset { labels, x: Mat::new(), source: data.source.clone() };
            Read { local: data.x, shard, full, encoding, origin: "file" }
        }
        _ => {
            let (data, _, encoding, origin) = load(args, memory)?;
            let shard = RowShard::balanced(data.n(), rank, size);
            let local = data.x.as_ref().subrows(shard.first, shard.rows).to_owned();
            let full = Dataset { x: Mat::new(), ..data };
            Read { local, shard, full, encoding, origin }
        }
    };
    let counts = comm.all_gather(&[read.local.nrows() as f64, read.local.ncols() as f64]);
    if let Some(empty) = counts.iter().position(|c| c[0] == 0.0) {
        bail!(
            "rank {empty} of {size} holds no rows of the data (n = {}): use fewer processes",
            counts.iter().map(|c| c[0] as usize).sum::<usize>()
        );
    }
    if counts.iter().any(|c| c[1] == 0.0) {
        bail!("the dataset is empty (0 features)");
    }
    stolr_datasets::check_finite(read.local.as_ref()).context("the rows must be finite")?;
    if let Some(r) = args.rank
        && r > read.shard.total
    {
        bail!("--rank {r} exceeds the number of samples n = {}", read.shard.total);
    }
    Ok(read)
}
