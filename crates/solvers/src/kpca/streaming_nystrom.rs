//! Nyström kernel PCA from a stream of rows, in memory independent of the number of rows `n`:
//! landmarks by reservoir sampling in a first pass, the `m′ × m′` second moment of the Nyström
//! features in a second, never holding the rows.

use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use stolr_estimators::{CrossKernelPanels, Kernel, PANEL_ROWS, Panel};
use stolr_lowrank::sym_eigen_desc;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::SolverError;
use crate::error::check_rank;
use crate::kpca::fit::KpcaWarning;
use crate::kpca::kha::{zero_kernel, zero_kernel_floor};
use crate::kpca::nystrom::{add_feature_panel, dot, product_into, subtract_shift};
use crate::kpca::rank::RANK_TOLERANCE;
use crate::kpca::{KernelCentering, KernelPcaModel};
use crate::streaming::{PassKind, RowSource};

/// Rows of the stream held at once by default in [`streaming_nystrom_fit`]'s second pass: one
/// [`PANEL_ROWS`] panel (`8·256·(d + 2m)` bytes).
pub const DEFAULT_STREAM_BLOCK_ROWS: usize = 16 * PANEL_ROWS;

/// The name a streamed Nyström model records as its solver.
pub const STREAMING_NYSTROM: &str = "streaming-nystrom";

/// Configuration of [`streaming_nystrom_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingNystromConfig {
    /// Number of landmarks `m ≥ 1` (at most the number of rows `n`), drawn uniformly without
    /// replacement by reservoir sampling.
    pub landmarks: usize,
    /// Number of eigenpairs `r`, `1 ≤ r ≤ m`.
    pub rank: usize,
    /// Centre in feature space (decompose `H K̃ H`), exactly, from running sums.
    pub center: bool,
    /// The budget the fit's allocations are checked against before the first pass.
    pub memory: MemoryBudget,
    /// Rows of the stream held at once in the second pass, rounded up to a multiple of
    /// [`PANEL_ROWS`]. The results do not depend on it, bit for bit.
    pub block_rows: usize,
}

impl StreamingNystromConfig {
    /// `landmarks` landmarks, `rank` pairs, uncentred, the default budget and
    /// [`DEFAULT_STREAM_BLOCK_ROWS`].
    pub fn new(landmarks: usize, rank: usize) -> Self {
        Self { landmarks, rank, center: false, memory: MemoryBudget::default(), block_rows: DEFAULT_STREAM_BLOCK_ROWS }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }
}

/// A uniform sample without replacement of the rows of a stream, drawn in one pass by
/// reservoir sampling ([`reservoir_sample`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReservoirSample {
    /// The sampled rows `(min(m, n), d)`, in reservoir-slot order.
    pub rows: Mat<f64>,
    /// The position in the stream (0-based) of each sampled row, in the same order.
    pub positions: Vec<usize>,
    /// The number of rows `n` the pass read.
    pub seen: usize,
}

/// Checks one row of a stream: `d` entries, all finite.
pub(crate) fn check_row(index: usize, row: &[f64], d: usize) -> Result<(), SolverError> {
    if row.len() != d {
        return Err(SolverError::InvalidSample {
            index,
            reason: format!("row {index} of the stream has {} entries, the stream {d} features", row.len()),
        });
    }
    if let Some((col, value)) = row.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(SolverError::InvalidSample {
            index,
            reason: format!("row {index} of the stream, column {col} is {value}: data must be finite"),
        });
    }
    Ok(())
}

/// One pass over `source` (as [`PassKind::Statistics`]) that keeps a uniform sample of `m` of
/// its rows without replacement, by Algorithm R: the first `m` rows fill the reservoir; row
/// `i ≥ m` replaces slot `j` when `j`, drawn uniformly from `0..=i` by `rng`, is below `m`.
/// Every row is checked as it comes. Memory `8·m·d` bytes (checked by the caller); one draw per
/// row after the first `m`, so the same seed gives the same sample.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `m` is 0; [`SolverError::InvalidSample`] for a row of
/// another width or with a non-finite entry (its index in the stream); the reader's errors as
/// [`SolverError::Stream`].
///
/// # References
/// Vitter, "Random sampling with a reservoir", ACM TOMS 11 (1985), Algorithm R.
pub fn reservoir_sample<R: Rng + ?Sized>(
    source: &dyn RowSource,
    m: usize,
    rng: &mut R,
) -> Result<ReservoirSample, SolverError> {
    if m == 0 {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least 1 landmark, got 0".into() });
    }
    let d = source.dim()?;
    let mut rows = Mat::<f64>::zeros(m, d);
    let mut positions = Vec::new();
    let mut seen = 0usize;
    for (index, row) in source.rows(PassKind::Statistics)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        check_row(index, &x, d)?;
        let slot = if index < m {
            positions.push(index);
            Some(index)
        } else {
            let j = rng.random_range(0..=index);
            (j < m).then_some(j)
        };
        if let Some(slot) = slot {
            positions[slot] = index;
            rows.row_mut(slot).iter_mut().zip(&x).for_each(|(r, v)| *r = *v);
        }
        seen += 1;
    }
    if seen < m {
        rows.truncate(seen, d);
    }
    Ok(ReservoirSample { rows, positions, seen })
}

/// What [`streaming_nystrom_fit`] returns: the model (landmarks, coefficients `B`, the
/// centring offset) and what the fit measured. The eigenvectors over the training rows are not
/// kept (they are `n × r`): transforming the training rows with the model gives the
/// projections $U\Lambda^{1/2}$, in a further pass.
#[derive(Debug, Clone)]
pub struct StreamingNystromFit {
    /// The model: rows `R` = the `m` landmarks, coefficients `B = S V` `(m, r)`, centring
    /// [`KernelCentering::Offset`]`(Bᵀ c̄)` with `c̄` the mean of `k(L, x)` over the stream
    /// (uncentred: [`KernelCentering::None`]).
    pub model: KernelPcaModel,
    /// The eigenvalues of the (centred) Nyström kernel matrix `K̃ = C W⁺ Cᵀ` of all `n` rows,
    /// nonincreasing, length `r` (also in the model).
    pub eigenvalues: Vec<f64>,
    /// The rows read, `n`.
    pub n: usize,
    /// The stream positions of the landmarks, in the order of the model rows.
    pub landmarks: Vec<usize>,
    /// `m′`, the numerical rank of `W = K(L, L)` (eigenvalues above `1e-10·max`).
    pub kept: usize,
    /// Fewer pairs than requested ([`KpcaWarning::RankDeficient`]).
    pub warnings: Vec<KpcaWarning>,
}

/// The allocations of [`streaming_nystrom_fit`], each with what it is, in bytes: the landmark
/// rows and their prepared copy with the `m × m` matrices (at most four at a time: `W`, its
/// eigenvectors and the eigensolver's workspace, then `S`, `G` and `V`), and a block of rows
/// with its kernel panels and feature panels. Independent of `n`.
pub fn streaming_nystrom_bytes(m: usize, d: usize, block_rows: usize) -> [(String, u64); 2] {
    let block = CrossKernelPanels::rounded_block_rows(block_rows);
    [
        (
            format!("the landmark rows and the m × m landmark kernel with its factors (m = {m} landmarks, d = {d})"),
            f64_bytes(&[4, m, m]).saturating_add(f64_bytes(&[2, m, d])),
        ),
        (
            format!("a block of {block} streamed rows with its kernel and feature panels (m = {m} landmarks)"),
            f64_bytes(&[block, 2 * m + d]),
        ),
    ]
}

/// Nyström kernel PCA of every row of a stream, in two passes and memory independent of `n`.
///
/// **Pass 1** draws `m` landmarks `L` uniformly without replacement by reservoir sampling
/// ([`reservoir_sample`], the only use of `rng`) and counts `n`. `W = K(L, L) = U_W Λ_W U_Wᵀ`;
/// `S = U_W Λ_W^{-1/2}` `(m, m′)` on the eigenvalues above `1e-10·max` (as [`crate::nystrom_fit`]).
/// **Pass 2** reads the rows in blocks of `config.block_rows` (rounded up to [`PANEL_ROWS`]),
/// evaluates `k(L, x)` for each ([`CrossKernelPanels`]) and accumulates, panel after panel in
/// row order, $G = \sum_i \tilde f_i \tilde f_i^\top$ (lower triangle, `m′ × m′`) and
/// $\sum_i \tilde f_i$ with the Nyström features $\tilde f_i = S^\top (k(L, x_i) - s)$; the
/// shift `s` is the mean row of `W` with centring (limits cancellation), 0 without. Centring
/// subtracts $n\,g g^\top$, `g` the mean of the $\tilde f_i$: $F^\top H F$ exactly, the same
/// matrix as the in-memory solver. $G = V \Lambda V^\top$: `Λ` are the eigenvalues of `K̃`
/// (centred: `H K̃ H`), nonincreasing, and the out-of-sample map is
/// $z(x) = B^\top (k(L, x) - \bar c)$ with $B = S V$ and $\bar c$ the mean of $k(L, x_i)$
/// (stored as the offset $B^\top \bar c = B^\top s + V^\top g$; uncentred $\bar c = 0$). On
/// the training rows `z` gives the projections $U\Lambda^{1/2}$. Signs: the entry of largest
/// magnitude of each column of `V` is positive (the first such entry).
///
/// Pairs with $\lambda_j \le$ [`RANK_TOLERANCE`]$\,\lambda_1$ are dropped (a
/// [`KpcaWarning::RankDeficient`] says so). Both passes read the rows in the order the source
/// gives them; the result is the same, bit for bit, for every `block_rows` and for the same
/// seed. Time $O(n m d + n m m′)$ plus $O(m^3)$; memory
/// `8·(4m² + 2md + block·(2m + d))` bytes ([`streaming_nystrom_bytes`]), checked against
/// `config.memory` before the first pass.
///
/// # Errors
/// [`SolverError::InvalidConfig`] if `m` is 0 or exceeds the number of rows, for an empty
/// stream, or if the second pass reads another number of rows than the first;
/// [`SolverError::InvalidRank`] if `rank` is 0 or exceeds `m`, or if the (centred) Nyström
/// kernel matrix is numerically zero (e.g. constant data with centring);
/// [`SolverError::InvalidSample`] for a row with a non-finite entry or another width (its index
/// in the stream); [`SolverError::Memory`] if an allocation above exceeds the budget;
/// [`SolverError::Estimator`] for invalid kernel parameters; the reader's errors as
/// [`SolverError::Stream`]; [`SolverError::LowRank`] if an eigendecomposition fails.
///
/// # References
/// \[SKPCA\], "Experimental Setting" (Nyström); docs/derivations.md §1.5 and §7.1; Vitter (1985),
/// Algorithm R.
pub fn streaming_nystrom_fit<R: Rng + ?Sized>(
    source: &dyn RowSource,
    kernel: &Kernel,
    config: &StreamingNystromConfig,
    rng: &mut R,
) -> Result<StreamingNystromFit, SolverError> {
    kernel.validate()?;
    let m = config.landmarks;
    if m == 0 {
        return Err(SolverError::InvalidConfig { name: "landmarks", reason: "need at least 1 landmark, got 0".into() });
    }
    check_rank(config.rank, m)?;
    let d = source.dim()?;
    let needs = streaming_nystrom_bytes(m, d, config.block_rows);
    for (what, bytes) in &needs {
        config.memory.check(what.as_str(), *bytes)?;
    }
    let total = needs.iter().fold(0u64, |acc, (_, b)| acc.saturating_add(*b));
    config.memory.check(
        format!(
            "the streamed Nyström fit (m = {m} landmarks, d = {d}: landmarks, m × m matrices and a row block together)"
        ),
        total,
    )?;

    // Pass 1: the landmarks.
    let sample = reservoir_sample(source, m, rng)?;
    let n = sample.seen;
    if n == 0 {
        return Err(SolverError::InvalidConfig { name: "data", reason: "the stream is empty".into() });
    }
    if m > n {
        return Err(SolverError::InvalidConfig {
            name: "landmarks",
            reason: format!("need 1 <= m <= n = {n} (the rows of the stream), got {m}"),
        });
    }
    let landmarks = sample.rows;

    // W = U_W Λ_W U_Wᵀ; S = U_W Λ_W^{-1/2} on the kept eigenvalues.
    let w = kernel.matrix(landmarks.as_ref());
    let max_diagonal = (0..m).map(|i| w[(i, i)]).fold(0.0, f64::max);
    let shift: Vec<f64> =
        if config.center { (0..m).map(|j| w.col(j).sum() / m as f64).collect() } else { vec![0.0; m] };
    let (ew, mut s_full) = sym_eigen_desc(w.as_ref())?;
    drop(w);
    let cutoff = 1e-10 * ew.first().copied().unwrap_or(0.0).max(0.0);
    let kept = ew.iter().take_while(|&&v| v > cutoff).count();
    if kept == 0 {
        let floor = zero_kernel_floor(n, max_diagonal);
        return Err(zero_kernel(config.rank, false, ew.first().copied().unwrap_or(0.0), floor));
    }
    for (j, &value) in ew.iter().enumerate().take(kept) {
        let inv = 1.0 / value.sqrt();
        s_full.col_mut(j).iter_mut().for_each(|v| *v *= inv);
    }
    s_full.truncate(m, kept);
    let s = s_full.as_ref();

    // Pass 2: G = Σ f̃ f̃ᵀ and Σ f̃, panel after panel, blocks of rows read from the stream.
    let par = faer::get_global_parallelism();
    // The block, at most the rows the stream has (a huge `block_rows` holds `n` rows).
    let block_rows = CrossKernelPanels::rounded_block_rows(config.block_rows).min(n.next_multiple_of(PANEL_ROWS));
    let mut block = Mat::<f64>::zeros(block_rows, d);
    let mut gram = Mat::<f64>::zeros(kept, kept);
    let mut f_sums = vec![0.0; kept];
    // The panels and their feature scratch, allocated once for the whole pass.
    let mut reused = Vec::new();
    let mut accumulate = |rows: MatRef<'_, f64>| -> Result<(), SolverError> {
        let panels = CrossKernelPanels::new(kernel, rows, landmarks.as_ref())?;
        let features = |panel: &mut Panel| {
            if config.center {
                subtract_shift(&mut panel.kernel, &shift);
            }
            product_into(&mut panel.scratch, panel.kernel.as_ref(), s);
        };
        panels.for_each_block_reusing(rows.nrows(), &mut reused, features, |panels| {
            for panel in panels.iter() {
                add_feature_panel(&mut gram, config.center.then_some(&mut f_sums[..]), panel.scratch.as_ref(), par);
            }
            Ok::<(), SolverError>(())
        })
    };
    let mut filled = 0usize;
    let mut read = 0usize;
    for (index, row) in source.rows(PassKind::Solver)?.enumerate() {
        let x = row.map_err(|e| SolverError::Stream { index, source: Box::new(e) })?;
        check_row(index, &x, d)?;
        block.row_mut(filled).iter_mut().zip(&x).for_each(|(b, v)| *b = *v);
        filled += 1;
        read += 1;
        if filled == block_rows {
            accumulate(block.as_ref())?;
            filled = 0;
        }
    }
    if filled > 0 {
        accumulate(block.as_ref().subrows(0, filled))?;
    }
    drop(block);
    if read != n {
        return Err(SolverError::InvalidConfig {
            name: "data",
            reason: format!("the stream gave {n} rows in its first pass and {read} in its second: it must repeat"),
        });
    }

    // g = mean of f̃; centred FᵀHF = G − n g gᵀ (lower triangle).
    let g: Vec<f64> = f_sums.iter().map(|v| v / n as f64).collect();
    if config.center {
        for j in 0..kept {
            for i in j..kept {
                gram[(i, j)] -= n as f64 * g[i] * g[j];
            }
        }
    }
    let (lam, mut v) = sym_eigen_desc(gram.as_ref())?;
    drop(gram);
    let lambda1 = lam.first().copied().unwrap_or(0.0);
    let floor = zero_kernel_floor(n, max_diagonal);
    if lambda1.is_nan() || lambda1 <= floor {
        return Err(zero_kernel(config.rank, config.center, lambda1, floor));
    }
    let cutoff = RANK_TOLERANCE * lambda1;
    let r = lam.iter().take(config.rank).take_while(|&&l| l > cutoff).count();
    v.truncate(kept, r);
    // Signs: the first entry of largest magnitude of each column of V is positive.
    for j in 0..r {
        let col = v.col(j);
        let mut best = 0;
        for i in 1..kept {
            if col[i].abs() > col[best].abs() {
                best = i;
            }
        }
        if col[best] < 0.0 {
            v.col_mut(j).iter_mut().for_each(|x| *x = -*x);
        }
    }
    let coefficients = stolr_lowrank::mul(s, v.as_ref());
    let centering = if config.center {
        // Bᵀ c̄ = Bᵀ s + Vᵀ g.
        let offset = (0..r).map(|j| dot(coefficients.col(j), &shift) + dot(v.col(j), &g)).collect();
        KernelCentering::Offset(offset)
    } else {
        KernelCentering::None
    };
    let eigenvalues = lam[..r].to_vec();
    let mut warnings = Vec::new();
    if r < config.rank {
        warnings.push(KpcaWarning::RankDeficient { requested: config.rank, returned: r, solver: STREAMING_NYSTROM });
    }
    let model =
        KernelPcaModel::new(STREAMING_NYSTROM, *kernel, None, landmarks, coefficients, eigenvalues.clone(), centering)?;
    Ok(StreamingNystromFit { model, eigenvalues, n, landmarks: sample.positions, kept, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpca::{ExactKpcaConfig, exact_kpca};
    use crate::streaming::{MatrixSource, RowPass, RowReadError};
    use crate::{Persist, Transformer};
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Three clusters in 3 dimensions, a constant fourth column, an outlier (row 7) and rows 11
    /// and 12 duplicating row 3.
    fn hostile_data(n: usize) -> Mat<f64> {
        let mut x = Mat::from_fn(n, 4, |i, j| {
            if j == 3 {
                return 5.0;
            }
            let centre = [0.0, 3.0, -2.5][i % 3] * if j % 2 == 0 { 1.0 } else { -0.5 };
            centre + ((i * 7 + j * 13) as f64 * 0.377).sin() * 0.8
        });
        for j in 0..3 {
            x[(7, j)] = 40.0 + j as f64;
            x[(11, j)] = x[(3, j)];
            x[(12, j)] = x[(3, j)];
        }
        x
    }

    fn config(m: usize, rank: usize, center: bool, block_rows: usize) -> StreamingNystromConfig {
        StreamingNystromConfig {
            block_rows,
            memory: MemoryBudget::UNLIMITED,
            ..StreamingNystromConfig::new(m, rank).center(center)
        }
    }

    fn fit(x: MatRef<'_, f64>, kernel: &Kernel, config: &StreamingNystromConfig, seed: u64) -> StreamingNystromFit {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        streaming_nystrom_fit(&MatrixSource(x), kernel, config, &mut rng).unwrap()
    }

    /// The largest difference between the columns of `a` and `b` `(n, r)`, each column of `b`
    /// taken with the sign that matches `a` best.
    fn diff_up_to_sign(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        assert_eq!(a.shape(), b.shape());
        let mut worst = 0.0_f64;
        for j in 0..a.ncols() {
            let plus = (0..a.nrows()).map(|i| (a[(i, j)] - b[(i, j)]).abs()).fold(0.0, f64::max);
            let minus = (0..a.nrows()).map(|i| (a[(i, j)] + b[(i, j)]).abs()).fold(0.0, f64::max);
            worst = worst.max(plus.min(minus));
        }
        worst
    }

    fn max_abs(a: MatRef<'_, f64>) -> f64 {
        (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| a[(i, j)].abs())).fold(0.0, f64::max)
    }

    /// `U Λ^{1/2}` `(n, r)`.
    fn scaled(values: &[f64], vectors: MatRef<'_, f64>) -> Mat<f64> {
        Mat::from_fn(vectors.nrows(), values.len(), |i, j| vectors[(i, j)] * values[j].sqrt())
    }

    #[test]
    fn every_row_a_landmark_gives_the_exact_kernel_pca() {
        let n = 40;
        let x = hostile_data(n);
        for kernel in [Kernel::gaussian(2.0), Kernel::laplacian(3.0)] {
            for center in [false, true] {
                let rank = 6;
                let tag = format!("{kernel:?}, center = {center}");
                let exact = exact_kpca(
                    x.as_ref(),
                    &kernel,
                    &ExactKpcaConfig { center, memory: MemoryBudget::UNLIMITED, ..ExactKpcaConfig::new(rank) },
                )
                .unwrap();
                let streamed = fit(x.as_ref(), &kernel, &config(n, rank, center, 1), 3);
                assert_eq!(streamed.n, n, "{tag}");
                let mut positions = streamed.landmarks.clone();
                positions.sort_unstable();
                assert_eq!(positions, (0..n).collect::<Vec<_>>(), "{tag}: every row is a landmark");
                assert_eq!(streamed.eigenvalues.len(), rank, "{tag}");
                let top = exact.values[0];
                for (a, b) in streamed.eigenvalues.iter().zip(&exact.values) {
                    assert!((a - b).abs() <= 1e-9 * top, "{tag}: eigenvalue {a} vs exact {b}");
                }
                // The transform of the training rows is U Λ^{1/2} of the exact kernel PCA.
                let z = streamed.model.transform(x.as_ref()).unwrap();
                let reference = scaled(&exact.values, exact.vectors.as_ref());
                let dz = diff_up_to_sign(z.as_ref(), reference.as_ref());
                assert!(dz <= 1e-8 * max_abs(reference.as_ref()), "{tag}: projections differ by {dz}");
            }
        }
    }

    /// The Nyström kernel matrix `K̃ = C W⁺ Cᵀ` (centred: `H K̃ H`) formed densely, `(n, n)`,
    /// with `W⁺` dropping eigenvalues at most `1e-10·max` as the solver does.
    fn dense_nystrom_matrix(x: MatRef<'_, f64>, landmarks: MatRef<'_, f64>, kernel: &Kernel, center: bool) -> Mat<f64> {
        let c = kernel.cross(x, landmarks);
        let w = kernel.matrix(landmarks);
        let (ew, uw) = sym_eigen_desc(w.as_ref()).unwrap();
        let cutoff = 1e-10 * ew[0];
        let m = ew.len();
        // W⁺ formed explicitly loses ε·cond(W) relative: the test needs W well conditioned.
        assert!(ew[m - 1] > 1e-5 * ew[0], "cond(W) = {:e}: choose better-separated landmarks", ew[0] / ew[m - 1]);
        let w_pinv = Mat::from_fn(m, m, |i, j| {
            (0..m).filter(|&l| ew[l] > cutoff).map(|l| uw[(i, l)] * uw[(j, l)] / ew[l]).sum::<f64>()
        });
        let mut k = &c * &w_pinv * c.transpose();
        if center {
            let n = k.nrows();
            let row_means: Vec<f64> = (0..n).map(|i| k.row(i).iter().sum::<f64>() / n as f64).collect();
            let grand = row_means.iter().sum::<f64>() / n as f64;
            k = Mat::from_fn(n, n, |i, j| k[(i, j)] - row_means[i] - row_means[j] + grand);
        }
        k
    }

    #[test]
    fn fewer_landmarks_give_the_dense_nystrom_kernel_pca() {
        let n = 300;
        let x = hostile_data(n);
        let kernel = Kernel::gaussian(0.3);
        for center in [false, true] {
            let (m, rank) = (25, 5);
            let tag = format!("center = {center}");
            let streamed = fit(x.as_ref(), &kernel, &config(m, rank, center, 64), 9);
            let landmarks = streamed.model.rows().dense().unwrap().to_owned();
            for (l, &p) in streamed.landmarks.iter().enumerate() {
                assert!((0..4).all(|j| landmarks[(l, j)] == x[(p, j)]), "{tag}: landmark {l} is row {p}");
            }
            let k = dense_nystrom_matrix(x.as_ref(), landmarks.as_ref(), &kernel, center);
            let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
            let top = values[0];
            for (a, b) in streamed.eigenvalues.iter().zip(&values) {
                assert!((a - b).abs() <= 1e-9 * top, "{tag}: eigenvalue {a} vs dense {b}");
                assert!(*b > 1e-4 * top, "{tag}: the test needs well-resolved eigenvalues");
            }
            let z = streamed.model.transform(x.as_ref()).unwrap();
            let reference = scaled(&values[..rank], vectors.as_ref().subcols(0, rank));
            let dz = diff_up_to_sign(z.as_ref(), reference.as_ref());
            assert!(dz <= 1e-8 * max_abs(reference.as_ref()), "{tag}: projections differ by {dz}");
        }
    }

    #[test]
    fn results_are_bitwise_independent_of_the_block_size_and_reproducible() {
        let x = hostile_data(1100);
        let kernel = Kernel::gaussian(1.5);
        for center in [false, true] {
            let first = fit(x.as_ref(), &kernel, &config(60, 5, center, 1), 5);
            for block_rows in [256, 300, 512, 1024, 4096, usize::MAX] {
                let other = fit(x.as_ref(), &kernel, &config(60, 5, center, block_rows), 5);
                assert_eq!(other.model, first.model, "block_rows = {block_rows}, center = {center}");
                assert_eq!(other.eigenvalues, first.eigenvalues);
                assert_eq!(other.landmarks, first.landmarks);
            }
            let reseeded = fit(x.as_ref(), &kernel, &config(60, 5, center, 256), 6);
            assert_ne!(reseeded.landmarks, first.landmarks, "another seed, other landmarks");
        }
    }

    #[test]
    fn the_reservoir_includes_every_row_with_probability_m_over_n() {
        // n = 10, m = 3: each row is in the sample with probability 0.3; over 4000 seeded draws
        // the count is Binomial(4000, 0.3), standard deviation 29: 5 deviations is 145.
        let x = Mat::from_fn(10, 1, |i, _| i as f64);
        let mut counts = [0usize; 10];
        for seed in 0..4000 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let sample = reservoir_sample(&MatrixSource(x.as_ref()), 3, &mut rng).unwrap();
            assert_eq!(sample.seen, 10);
            let mut p = sample.positions.clone();
            p.sort_unstable();
            p.dedup();
            assert_eq!(p.len(), 3, "distinct rows");
            for (slot, &pos) in sample.positions.iter().enumerate() {
                assert_eq!(sample.rows[(slot, 0)], pos as f64);
                counts[pos] += 1;
            }
        }
        for (row, &c) in counts.iter().enumerate() {
            assert!((c as f64 - 1200.0).abs() <= 145.0, "row {row} sampled {c} times of 4000 (expected 1200)");
        }
    }

    #[test]
    fn the_model_saves_loads_and_transforms_new_rows_the_same() {
        let x = hostile_data(500);
        let kernel = Kernel::gaussian(2.0);
        let streamed = fit(x.as_ref(), &kernel, &config(40, 4, true, 256), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.npz");
        streamed.model.save(&path).unwrap();
        let back = KernelPcaModel::load(&path, MemoryBudget::UNLIMITED).unwrap();
        assert_eq!(back, streamed.model);
        assert_eq!(back.solver(), STREAMING_NYSTROM);
        let new_rows = Mat::from_fn(20, 4, |i, j| ((i * 4 + j) as f64 * 0.91).cos() * 3.0);
        assert_eq!(back.transform(new_rows.as_ref()).unwrap(), streamed.model.transform(new_rows.as_ref()).unwrap());
        // The centred training projections have mean zero.
        let z = streamed.model.transform(x.as_ref()).unwrap();
        for j in 0..z.ncols() {
            let mean = z.col(j).sum() / z.nrows() as f64;
            assert!(mean.abs() <= 1e-10 * max_abs(z.as_ref()), "column {j} has mean {mean}");
        }
    }

    /// Rows given as vectors; the second and later passes can drop the last row.
    struct Rows {
        rows: Vec<Vec<f64>>,
        d: usize,
        shrink_after_first: bool,
        fail_at: Option<usize>,
        passes: std::cell::Cell<usize>,
    }

    impl Rows {
        fn new(rows: Vec<Vec<f64>>, d: usize) -> Self {
            Self { rows, d, shrink_after_first: false, fail_at: None, passes: std::cell::Cell::new(0) }
        }
    }

    impl RowSource for Rows {
        fn dim(&self) -> Result<usize, SolverError> {
            Ok(self.d)
        }

        fn rows(&self, _pass: PassKind) -> Result<RowPass<'_>, SolverError> {
            let pass = self.passes.get();
            self.passes.set(pass + 1);
            let take = if self.shrink_after_first && pass > 0 { self.rows.len() - 1 } else { self.rows.len() };
            let fail_at = self.fail_at;
            Ok(Box::new(self.rows.iter().take(take).enumerate().map(move |(i, r)| {
                if Some(i) == fail_at {
                    Err(RowReadError(format!("line {}: unreadable", i + 1).into()))
                } else {
                    Ok(r.clone())
                }
            })))
        }
    }

    fn run(source: &dyn RowSource, config: &StreamingNystromConfig) -> Result<StreamingNystromFit, SolverError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        streaming_nystrom_fit(source, &Kernel::gaussian(1.0), config, &mut rng)
    }

    fn rows_of(x: MatRef<'_, f64>) -> Vec<Vec<f64>> {
        (0..x.nrows()).map(|i| x.row(i).iter().copied().collect()).collect()
    }

    #[test]
    fn the_kernel_pca_solver_enum_runs_it_and_agrees_with_exact() {
        use crate::kpca::{KernelPca, KpcaSolver};
        let n = 40;
        let x = hostile_data(n);
        let kernel = Kernel::gaussian(2.0);
        let params =
            |solver| KernelPca { memory: MemoryBudget::UNLIMITED, ..KernelPca::new(5, kernel, solver).center(true) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let streamed = params(KpcaSolver::StreamingNystrom { landmarks: n, block_rows: 256 })
            .fit_prepared(x.as_ref(), None, &mut rng, &mut ())
            .unwrap();
        let exact = params(KpcaSolver::exact()).fit_prepared(x.as_ref(), None, &mut rng, &mut ()).unwrap();
        assert_eq!(streamed.model.solver(), STREAMING_NYSTROM);
        let top = exact.pairs.values[0];
        for (a, b) in streamed.pairs.values.iter().zip(&exact.pairs.values) {
            assert!((a - b).abs() <= 1e-9 * top, "eigenvalue {a} vs exact {b}");
        }
        let du = diff_up_to_sign(streamed.pairs.vectors.as_ref(), exact.pairs.vectors.as_ref());
        assert!(du <= 1e-7, "eigenvectors differ by {du}");
    }

    #[test]
    fn hostile_streams_and_parameters_give_typed_errors() {
        let x = hostile_data(30);
        let good = rows_of(x.as_ref());
        let source = Rows::new(good.clone(), 4);
        let cfg = |m, r, center| config(m, r, center, 256);
        assert!(matches!(run(&source, &cfg(0, 1, false)), Err(SolverError::InvalidConfig { name: "landmarks", .. })));
        assert!(matches!(run(&source, &cfg(5, 0, false)), Err(SolverError::InvalidRank { rank: 0, .. })));
        assert!(matches!(run(&source, &cfg(5, 6, false)), Err(SolverError::InvalidRank { rank: 6, .. })));
        assert!(matches!(run(&source, &cfg(31, 2, false)), Err(SolverError::InvalidConfig { name: "landmarks", .. })));
        assert!(matches!(
            run(&Rows::new(Vec::new(), 4), &cfg(3, 1, false)),
            Err(SolverError::InvalidConfig { name: "data", .. })
        ));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut rows = good.clone();
            rows[17][2] = bad;
            match run(&Rows::new(rows, 4), &cfg(5, 2, true)) {
                Err(SolverError::InvalidSample { index: 17, reason }) => assert!(reason.contains("finite"), "{reason}"),
                other => panic!("{bad}: expected the row to be rejected, got {other:?}"),
            }
        }
        let mut rows = good.clone();
        rows[4].push(1.0);
        assert!(matches!(run(&Rows::new(rows, 4), &cfg(5, 2, true)), Err(SolverError::InvalidSample { index: 4, .. })));
        let failing = Rows { fail_at: Some(9), ..Rows::new(good.clone(), 4) };
        match run(&failing, &cfg(5, 2, true)) {
            Err(SolverError::Stream { index: 9, source }) => assert!(source.to_string().contains("line 10")),
            other => panic!("expected the reader's error, got {other:?}"),
        }
        let shrinking = Rows { shrink_after_first: true, ..Rows::new(good.clone(), 4) };
        assert!(matches!(run(&shrinking, &cfg(5, 2, true)), Err(SolverError::InvalidConfig { name: "data", .. })));
        // Constant data, centred: the centred kernel matrix is zero.
        let constant = Rows::new(vec![vec![1.5, -2.0, 0.0, 5.0]; 50], 4);
        match run(&constant, &cfg(5, 2, true)) {
            Err(SolverError::InvalidRank { reason, .. }) => assert!(reason.contains("numerically zero"), "{reason}"),
            other => panic!("expected constant data to be refused, got {other:?}"),
        }
        // Uncentred, constant data has one eigenpair: the rest is reported, not invented.
        let fit = run(&constant, &cfg(5, 2, false)).unwrap();
        assert_eq!(fit.eigenvalues.len(), 1);
        assert!((fit.eigenvalues[0] - 50.0).abs() <= 1e-9 * 50.0, "{:?}", fit.eigenvalues);
        assert!(matches!(fit.warnings[..], [KpcaWarning::RankDeficient { requested: 2, returned: 1, .. }]));
        // The budget is checked before the first pass and names what is over.
        let source = Rows::new(good.clone(), 4);
        let tight = StreamingNystromConfig { memory: MemoryBudget::bytes(1 << 20), ..cfg(500, 2, false) };
        match run(&source, &tight) {
            Err(SolverError::Memory(e)) => assert!(e.to_string().contains("m = 500"), "{e}"),
            other => panic!("expected a memory error, got {other:?}"),
        }
        assert_eq!(source.passes.get(), 0, "no pass over the rows before the budget check and the parameters");
        // Invalid kernel parameters.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        assert!(matches!(
            streaming_nystrom_fit(&source, &Kernel::gaussian(-1.0), &cfg(5, 2, false), &mut rng),
            Err(SolverError::Estimator(_))
        ));
    }
}
