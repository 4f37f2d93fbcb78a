//! What every front end hands the library to run a fit: the rows as a [`Shard`] (this process's
//! rows, their place among all rows, the communicator), and the named seed streams that every
//! random choice of a fit draws from ([`KpcaStream`], [`PcaStream`], [`KrrStream`]).
//!
//! One process is the same call with [`Shard::whole`] (the single-process communicator), so
//! the command-line tool, the Python package and an MPI run reach the same code, and the same
//! seed gives the same bits from every front end.

use faer::sparse::SparseRowMatRef;
use faer::{Mat, MatRef};
use stolr_estimators::DataRef;

use crate::SolverError;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, SingleProcess};

/// The communicator of an ordinary run, for [`Shard::whole`].
static SINGLE_PROCESS: SingleProcess = SingleProcess;

/// The rows of a fit as one process sees them: its rows `(place.rows, d)` of the `place.total`
/// rows of the problem, and the communicator shared with the processes that hold the others
/// (ranks hold consecutive blocks in rank order).
///
/// The rows are borrowed or owned: a fit that standardizes works in place on owned rows and
/// on a copy of borrowed ones. They are dense, or sparse ([`Shard::sparse`], one process): the
/// solvers that take sparse rows read them through [`Shard::data`], the others refuse them
/// ([`SolverError::SparseUnsupported`](crate::SolverError::SparseUnsupported)). Float32 rows
/// ([`Shard::whole_f32`]) are kept as they came: the kernel blocks and the PCA fits convert them
/// a block at a time; a step that needs all the rows in float64 ([`Shard::dense`]) gets an exact
/// float64 copy, made once and kept with the shard.
pub struct Shard<'a> {
    rows: ShardRows<'a>,
    /// The float64 copy of float32 rows, made the first time a step asks for float64 rows.
    converted: std::sync::OnceLock<Mat<f64>>,
    /// Which rows of the whole these are.
    pub place: RowShard,
    /// The processes that share the rows.
    pub comm: &'a dyn Communicator,
}

enum ShardRows<'a> {
    Borrowed(MatRef<'a, f64>),
    Owned(Mat<f64>),
    Sparse(SparseRowMatRef<'a, usize, f64>),
    F32(MatRef<'a, f32>),
    OwnedF32(Mat<f32>),
}

impl<'a> Shard<'a> {
    /// All the rows `x` `(n, d)` on one process.
    pub fn whole(x: MatRef<'a, f64>) -> Self {
        Self::with(ShardRows::Borrowed(x), RowShard::whole(x.nrows()), &SINGLE_PROCESS)
    }

    /// All the rows `x` `(n, d)`, owned, on one process.
    pub fn whole_owned(x: Mat<f64>) -> Self {
        let place = RowShard::whole(x.nrows());
        Self::with(ShardRows::Owned(x), place, &SINGLE_PROCESS)
    }

    /// All the rows `x` `(n, d)` in compressed sparse row form, on one process.
    pub fn sparse(x: SparseRowMatRef<'a, usize, f64>) -> Self {
        Self::with(ShardRows::Sparse(x), RowShard::whole(x.nrows()), &SINGLE_PROCESS)
    }

    /// All the rows `x` `(n, d)` in float32, on one process (kept in float32: `4·n·d` bytes).
    pub fn whole_f32(x: MatRef<'a, f32>) -> Self {
        Self::with(ShardRows::F32(x), RowShard::whole(x.nrows()), &SINGLE_PROCESS)
    }

    /// All the rows `x` `(n, d)` in float32, owned, on one process.
    pub fn whole_owned_f32(x: Mat<f32>) -> Self {
        let place = RowShard::whole(x.nrows());
        Self::with(ShardRows::OwnedF32(x), place, &SINGLE_PROCESS)
    }

    fn with(rows: ShardRows<'a>, place: RowShard, comm: &'a dyn Communicator) -> Self {
        Self { rows, converted: std::sync::OnceLock::new(), place, comm }
    }

    /// Whether the rows are float32.
    pub fn is_f32(&self) -> bool {
        matches!(self.rows, ShardRows::F32(_) | ShardRows::OwnedF32(_))
    }

    /// The float64 copy of float32 rows, made on the first call.
    fn converted(&self, x: MatRef<'_, f32>) -> MatRef<'_, f64> {
        self.converted.get_or_init(|| stolr_estimators::f32_to_f64(x)).as_ref()
    }

    /// The rows, dense or sparse.
    pub fn data(&self) -> DataRef<'_> {
        match &self.rows {
            ShardRows::Borrowed(x) => DataRef::Dense(*x),
            ShardRows::Owned(x) => DataRef::Dense(x.as_ref()),
            ShardRows::Sparse(x) => DataRef::Sparse(*x),
            ShardRows::F32(x) => DataRef::DenseF32(*x),
            ShardRows::OwnedF32(x) => DataRef::DenseF32(x.as_ref()),
        }
    }

    /// Whether the rows are sparse.
    pub fn is_sparse(&self) -> bool {
        matches!(self.rows, ShardRows::Sparse(_))
    }

    /// This process's rows, dense, in float64 (float32 rows: their exact float64 copy, made on
    /// the first call and kept with the shard, `8·n·d` bytes).
    ///
    /// # Errors
    /// [`SolverError::SparseUnsupported`] naming `what` (the step that needs dense rows) if the
    /// rows are sparse.
    pub fn dense(&self, what: &str) -> Result<MatRef<'_, f64>, SolverError> {
        match &self.rows {
            ShardRows::Sparse(_) => Err(SolverError::SparseUnsupported { what: what.to_string() }),
            _ => Ok(self.rows()),
        }
    }

    /// This process's rows `local` `(place.rows, d)`, owned, at `place` among the rows held by
    /// the ranks of `comm`.
    ///
    /// # Panics
    /// If `local` does not have `place.rows` rows (a caller's bug, not a data error).
    pub fn part(local: Mat<f64>, place: RowShard, comm: &'a dyn Communicator) -> Self {
        assert_eq!(local.nrows(), place.rows, "Shard::part: the rows do not match their place");
        Self::with(ShardRows::Owned(local), place, comm)
    }

    /// This process's rows `(place.rows, d)`, dense, in float64 (float32 rows: as
    /// [`Shard::dense`]).
    ///
    /// # Panics
    /// If the rows are sparse: a caller that may hold sparse rows reads them with
    /// [`Shard::data`] or [`Shard::dense`].
    pub fn rows(&self) -> MatRef<'_, f64> {
        match &self.rows {
            ShardRows::Borrowed(x) => *x,
            ShardRows::Owned(x) => x.as_ref(),
            ShardRows::F32(x) => self.converted(*x),
            ShardRows::OwnedF32(x) => self.converted(x.as_ref()),
            ShardRows::Sparse(_) => panic!("Shard::rows on sparse rows: use Shard::data or Shard::dense"),
        }
    }

    /// This process's rows, owned and dense (a copy when they were borrowed).
    ///
    /// # Errors
    /// [`SolverError::SparseUnsupported`] naming `what` if the rows are sparse (they are never
    /// densified behind the caller's back).
    pub fn into_owned(self, what: &str) -> Result<Mat<f64>, SolverError> {
        match self.rows {
            ShardRows::Borrowed(x) => Ok(stolr_estimators::to_owned(x)),
            ShardRows::Owned(x) => Ok(x),
            ShardRows::F32(x) => Ok(self.converted.into_inner().unwrap_or_else(|| stolr_estimators::f32_to_f64(x))),
            ShardRows::OwnedF32(x) => {
                Ok(self.converted.into_inner().unwrap_or_else(|| stolr_estimators::f32_to_f64(x.as_ref())))
            }
            ShardRows::Sparse(_) => Err(SolverError::SparseUnsupported { what: what.to_string() }),
        }
    }

    /// Whether the rows of every rank are here (one process).
    pub fn is_whole(&self) -> bool {
        self.comm.size() == 1
    }
}

impl std::fmt::Debug for Shard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, d) = self.data().shape();
        write!(f, "Shard({n} x {d} at {:?}, {:?})", self.place, self.comm)
    }
}

/// The generator of stream `index` of `seed`: the seed's Xoshiro256++ generator advanced by
/// `index` jumps of 2¹²⁸ steps, so that the streams never overlap and changing one option (say
/// the bandwidth) does not change the draws of another stage.
fn stream(seed: u64, index: u32) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..index {
        rng.jump();
    }
    rng
}

/// The random streams of a kernel PCA fit, by purpose ([`KpcaStream::rng`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KpcaStream {
    /// Generated data (the CLI's built-in rings): stream 0.
    Data,
    /// The bandwidth rule's sampled pairs: stream 1.
    Bandwidth,
    /// The subsample τ is chosen from for a rank: stream 2.
    Tau,
    /// SKPCA's estimator draws: stream 3.
    Skpca,
    /// Nyström's landmarks and the exact solvers' starting block: stream 4.
    Solver,
    /// KHA's initial coefficients and sampled rows: stream 5.
    Kha,
    /// The sampled rows of an estimated certificate: stream 6.
    Certificate,
}

impl KpcaStream {
    /// The generator of this stream of `seed`.
    pub fn rng(self, seed: u64) -> Xoshiro256PlusPlus {
        stream(seed, self as u32)
    }
}

/// The random streams of a PCA fit (batch and streaming), by purpose ([`PcaStream::rng`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcaStream {
    /// Generated data (`--generate`): stream 0.
    Data,
    /// The solver's draws (starting point, sampled rows): stream 1.
    Solver,
}

impl PcaStream {
    /// The generator of this stream of `seed`.
    pub fn rng(self, seed: u64) -> Xoshiro256PlusPlus {
        stream(seed, self as u32)
    }
}

/// The random streams of a kernel ridge regression, by purpose ([`KrrStream::rng`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KrrStream {
    /// Generated data (the sinc set): stream 0.
    Data,
    /// The train/test split: stream 1.
    Split,
    /// The bandwidth rule's sampled pairs: stream 2.
    Bandwidth,
    /// The landmarks `J` (the same for every solver given the same seed and data): stream 3.
    Landmarks,
    /// SLKL's coordinate order: stream 4.
    Coordinates,
    /// The folds and fits of the cross-validation of ν or λ: stream 5.
    Validation,
}

impl KrrStream {
    /// The generator of this stream of `seed`.
    pub fn rng(self, seed: u64) -> Xoshiro256PlusPlus {
        stream(seed, self as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn streams_are_the_seed_jumped_by_their_index() {
        let mut by_hand = Xoshiro256PlusPlus::seed_from_u64(9);
        by_hand.jump();
        by_hand.jump();
        assert_eq!(KpcaStream::Tau.rng(9).random::<u64>(), by_hand.random::<u64>());
        assert_eq!(KrrStream::Bandwidth.rng(9).random::<u64>(), KpcaStream::Tau.rng(9).random::<u64>());
        assert_ne!(KpcaStream::Skpca.rng(9).random::<u64>(), KpcaStream::Solver.rng(9).random::<u64>());
        assert_eq!(PcaStream::Solver.rng(3).random::<u64>(), KpcaStream::Bandwidth.rng(3).random::<u64>());
    }

    #[test]
    fn a_whole_shard_is_every_row_on_one_process() {
        let x = Mat::from_fn(5, 2, |i, j| (i * 2 + j) as f64);
        let s = Shard::whole(x.as_ref());
        assert!(s.is_whole());
        assert_eq!((s.place.first, s.place.rows, s.place.total), (0, 5, 5));
        assert_eq!(s.into_owned("a test").unwrap(), x);
    }
}
