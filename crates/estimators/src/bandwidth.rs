//! The kernel-width rule: a percentile of the pairwise Euclidean distances between distinct rows.

use std::hash::{DefaultHasher, Hasher};

use faer::MatRef;
use rand::{Rng, RngExt};

use stolr_comm::Communicator;

use crate::EstimatorError;
use crate::sparse::{Csr, DataRef, sparse_sq_distance};

/// Default percentile of the width rule (\[SKPCA\], "Experimental Setting").
pub const DEFAULT_BANDWIDTH_PERCENTILE: f64 = 20.0;

/// Default number of sampled pairs of the width rule (docs/derivations.md §1.1).
pub const DEFAULT_BANDWIDTH_PAIRS: usize = 1_000_000;

/// Share of duplicate rows (`1 - distinct_rows / rows`) above which callers should warn that
/// the data holds many repeated rows: 10 %. The rule itself is unaffected by duplicates; the
/// warning says that the kernel matrix has many equal rows (and so a low effective `n`).
pub const DUPLICATE_WARNING_SHARE: f64 = 0.10;

/// What [`bandwidth_estimate`] measured: the width and the counts it was computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    /// The width $\sigma$, in the units of the data (a distance); positive and finite.
    pub sigma: f64,
    /// Number of rows examined: every row of the data, `n` (the duplicates are found over the
    /// whole data, not over a subsample).
    pub rows: usize,
    /// Number of distinct rows among them (exact duplicates, entry for entry, count once).
    pub distinct_rows: usize,
    /// Number of pairwise distances the percentile was taken over.
    pub pairs: usize,
    /// Whether every pair of distinct rows was used (`true`) or `pairs` pairs were sampled.
    pub exact: bool,
}

impl Bandwidth {
    /// The share of duplicate rows, `1 - distinct_rows / rows`, in `[0, 1)`.
    pub fn duplicate_share(&self) -> f64 {
        if self.rows == 0 { 0.0 } else { 1.0 - self.distinct_rows as f64 / self.rows as f64 }
    }

    /// Whether duplicates exceed [`DUPLICATE_WARNING_SHARE`] of the rows.
    pub fn many_duplicates(&self) -> bool {
        self.duplicate_share() > DUPLICATE_WARNING_SHARE
    }
}

/// The kernel width $\sigma$ as the `percentile`-th percentile of the pairwise Euclidean
/// distances between the **distinct** rows of `x`, shape `(n, d)`; the result is in the units
/// of the data (a distance, not a squared distance).
///
/// Same as [`bandwidth_estimate`]`(x, percentile, pairs, rng)?.sigma`; see there for the rule,
/// its cost and its departure from \[SKPCA\] (duplicate rows count once).
///
/// # Errors
/// As [`bandwidth_estimate`].
///
/// # References
/// docs/derivations.md §1.1; \[SKPCA\], "Experimental Setting" (20th
/// percentile, after Mallapragada et al. 2009).
pub fn bandwidth_rule<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    percentile: f64,
    pairs: usize,
    rng: &mut R,
) -> Result<f64, EstimatorError> {
    bandwidth_estimate(x, percentile, pairs, rng).map(|b| b.sigma)
}

/// The kernel width $\sigma$ as the `percentile`-th percentile of the pairwise Euclidean
/// distances $\{\|u_a - u_b\|_2 : a < b\}$ between the **distinct** rows $u_0, \dots, u_{m-1}$
/// of `x`, shape `(n, d)`, with the counts it was computed from.
///
/// **Duplicates count once (a departure from \[SKPCA\]).** \[SKPCA\] takes the percentile over
/// all pairs of samples. When many rows repeat (KDD Cup 99: about 145 000 distinct rows among
/// 494 021, and most of the rest copies of a few attack records), most pairs are copies of each
/// other and that percentile is 0 or nearly so: the kernel becomes nearly the identity. So the
/// rows are first deduplicated: the distinct rows $u_a$ are the first occurrence of each row in
/// row order (rows equal entry for entry, with $-0 = +0$; found by hashing every row, so over
/// the whole data, not a subsample), and the pairs are formed among them. On data without
/// duplicate rows $u_a$ is row $a$ of `x` and the result is bit for bit the rule without
/// deduplication (same distances, same draws from `rng`).
///
/// If $m(m-1)/2 \le$ `pairs`, every pair of distinct rows is used and the result is exact.
/// Otherwise `pairs` pairs are drawn i.i.d. uniformly among the pairs $a \ne b$ (with
/// replacement), which estimates the same percentile; `rng` is used only in that case, so the
/// same seed gives the same bits. The percentile linearly interpolates between order
/// statistics, like numpy's default: with the $p$ distances sorted as $v_0 \le \dots \le
/// v_{p-1}$ and $h = (\mathrm{percentile}/100)(p-1)$, it returns $v_{\lfloor h\rfloor} + (h -
/// \lfloor h\rfloor)(v_{\lfloor h\rfloor+1} - v_{\lfloor h\rfloor})$.
///
/// Cost: $O(n d)$ to find the distinct rows, then $O(\min(\mathrm{pairs}, m^2/2) \cdot d)$
/// time. Memory: a hash table of the `m` distinct rows ($O(m)$ words), a row-major copy of them
/// ($8 m d$ bytes) and the distances ($8\min(\mathrm{pairs}, m^2/2)$ bytes).
///
/// # Errors
/// - [`EstimatorError::TooFewSamples`] if $n < 2$;
/// - [`EstimatorError::EmptyData`] if $d = 0$; [`EstimatorError::NonFinite`] for a NaN or
///   infinite entry;
/// - [`EstimatorError::InvalidPercentile`] unless $0 <$ `percentile` $\le 100$;
/// - [`EstimatorError::ZeroPairs`] if `pairs == 0`;
/// - [`EstimatorError::SingleDistinctRow`] if every row is equal ($m = 1$);
/// - [`EstimatorError::DegenerateBandwidth`] if the percentile is still 0 (distinct rows so
///   close that their squared distance underflows).
///
/// # References
/// docs/derivations.md §1.1; \[SKPCA\], "Experimental Setting" (20th
/// percentile, after Mallapragada et al. 2009), here over distinct rows.
pub fn bandwidth_estimate<'x, R: Rng + ?Sized>(
    x: impl Into<DataRef<'x>>,
    percentile: f64,
    pairs: usize,
    rng: &mut R,
) -> Result<Bandwidth, EstimatorError> {
    let x = x.into();
    let n = x.nrows();
    if n < 2 {
        return Err(EstimatorError::TooFewSamples { n });
    }
    x.check()?;
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(EstimatorError::InvalidPercentile { percentile });
    }
    if pairs == 0 {
        return Err(EstimatorError::ZeroPairs);
    }
    let converted;
    let x = match x {
        DataRef::Dense(x) => x,
        DataRef::DenseF32(x) => {
            // An exact float64 copy: the same distances as the float64 rows.
            converted = crate::sparse::f32_to_f64(x);
            converted.as_ref()
        }
        DataRef::Sparse(x) => {
            // Distinct rows by their stored entries; each distance by a merge of two supports,
            // the same sum as the dense loop's (the coordinates where both rows are 0 add +0).
            let csr = Csr::from_ref(x);
            let distinct = csr.distinct_rows();
            let rows = csr.gather(&distinct);
            let dist = |a: usize, b: usize| sparse_sq_distance(rows.row(a), rows.row(b)).sqrt();
            return from_distances(n, distinct.len(), percentile, pairs, rng, dist);
        }
    };
    let d = x.ncols();
    let distinct = distinct_rows(x);
    let m = distinct.len();
    if m < 2 {
        return Err(EstimatorError::SingleDistinctRow { n });
    }
    // The distinct rows, row-major: row a is row distinct[a] of x.
    let mut rows = Vec::with_capacity(m * d);
    for &i in &distinct {
        rows.extend((0..d).map(|k| x[(i, k)]));
    }
    drop(distinct);
    let row = |a: usize| &rows[a * d..(a + 1) * d];
    from_distances(n, m, percentile, pairs, rng, |a, b| row_distance(row(a).iter().copied(), row(b)))
}

/// The rule on `m` distinct rows (of `n`) with distances `dist(a, b)`: every pair when there
/// are at most `pairs` of them, else `pairs` pairs drawn from `rng`.
fn from_distances<R: Rng + ?Sized>(
    n: usize,
    m: usize,
    percentile: f64,
    pairs: usize,
    rng: &mut R,
    dist: impl Fn(usize, usize) -> f64,
) -> Result<Bandwidth, EstimatorError> {
    if m < 2 {
        return Err(EstimatorError::SingleDistinctRow { n });
    }

    // m(m-1)/2 without overflow.
    let all_pairs = (m as u128) * (m as u128 - 1) / 2;
    let exact = all_pairs <= pairs as u128;
    let distances: Vec<f64> = if exact {
        let mut v = Vec::with_capacity(all_pairs as usize);
        for a in 0..m {
            for b in a + 1..m {
                v.push(dist(a, b));
            }
        }
        v
    } else {
        (0..pairs)
            .map(|_| {
                let (a, b) = draw_pair(rng, m);
                dist(a, b)
            })
            .collect()
    };
    percentile_of(n, m, distances, percentile, exact)
}

/// The rule's result from the measured `distances` of `m` distinct rows of `n`.
fn percentile_of(
    n: usize,
    m: usize,
    mut distances: Vec<f64>,
    percentile: f64,
    exact: bool,
) -> Result<Bandwidth, EstimatorError> {
    let count = distances.len();
    let sigma = linear_percentile(&mut distances, percentile);
    if sigma > 0.0 {
        Ok(Bandwidth { sigma, rows: n, distinct_rows: m, pairs: count, exact })
    } else {
        Err(EstimatorError::DegenerateBandwidth { percentile, pairs: count })
    }
}

/// The indices of the distinct rows of `x` `(n, d)`: the first occurrence of each row, in row
/// order. Rows are equal when every entry is equal as `f64` (so $-0 = +0$; `x` is finite).
/// One pass, $O(n d)$ time, a hash table of the distinct rows ($O(m)$ words); hash collisions
/// are resolved by comparing the rows.
/// [`bandwidth_estimate`] over rows sharded across the ranks of `comm`: `x` is this rank's
/// block of rows, in rank order the blocks are the whole data. Gives the same [`Bandwidth`], bit
/// for bit, as [`bandwidth_estimate`] on the whole data (same `rng` state on every rank), and
/// no rank holds the distinct rows of the others.
///
/// **Scheme.**
/// 1. Each rank finds its own distinct rows (first occurrences, exact comparison) and the ranks
///    exchange a 128-bit fingerprint of each ([`Communicator::all_gather`], 32 bytes per
///    distinct row). In rank order, the first occurrence of each fingerprint is a distinct row
///    of the whole data in row order (a row repeated on a later rank is dropped there), so
///    every rank knows the `m` distinct rows, who owns each, and draws the same pairs
///    `(a, b)` as one process. Two different rows on different ranks are taken as equal only
///    if their 128-bit fingerprints collide (probability about `m²/2¹²⁹`).
/// 2. With at most `pairs` pairs in all (`m ≲ 1400` for the default), the `m` rows are
///    exchanged and every pair measured, as one process does.
/// 3. Otherwise the owner of `a` measures pair `(a, b)`: every rank's distinct rows are
///    broadcast by their owner in blocks of [`BANDWIDTH_BLOCK_ROWS`] rows, each rank measuring
///    its pairs whose `b` is in the block, with the same arithmetic as one process; the
///    `pairs` distances (one rank's value, zeros elsewhere) are added over the ranks, exactly.
///
/// Memory per rank: its rows, one block, the drawn pairs and their distances (`40·pairs`
/// bytes) and the fingerprints (`48·m` bytes), never `m·d`. Each rank sends its distinct rows
/// once (`8·m_p·d` bytes, as a broadcast) and `16·pairs·(P−1)/P` bytes for the distances.
///
/// # Errors
/// As [`bandwidth_estimate`] (every rank returns the same error).
pub fn bandwidth_estimate_sharded<R: Rng + ?Sized>(
    x: MatRef<'_, f64>,
    percentile: f64,
    pairs: usize,
    rng: &mut R,
    comm: &dyn Communicator,
) -> Result<Bandwidth, EstimatorError> {
    if comm.size() == 1 {
        return bandwidth_estimate(x, percentile, pairs, rng);
    }
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(EstimatorError::InvalidPercentile { percentile });
    }
    if pairs == 0 {
        return Err(EstimatorError::ZeroPairs);
    }
    let (d, me, size) = (x.ncols(), comm.rank(), comm.size());
    // Every rank's shape and first non-finite entry, so that every rank returns the same
    // error as the rule on the whole data.
    let first_bad = (0..x.nrows()).find_map(|i| (0..d).find(|&k| !x[(i, k)].is_finite()).map(|k| (i, k)));
    let report = match first_bad {
        Some((i, k)) => [x.nrows() as f64, d as f64, 1.0, i as f64, k as f64, x[(i, k)]],
        None => [x.nrows() as f64, d as f64, 0.0, 0.0, 0.0, 0.0],
    };
    let shapes = comm.all_gather(&report);
    let n: usize = shapes.iter().map(|s| s[0] as usize).sum();
    if n < 2 {
        return Err(EstimatorError::TooFewSamples { n });
    }
    let expected = shapes[0][1] as usize;
    if let Some(found) = shapes.iter().map(|s| s[1] as usize).find(|&c| c != expected) {
        return Err(EstimatorError::DimensionMismatch { what: "features on each rank", expected, found });
    }
    if d == 0 {
        return Err(EstimatorError::EmptyData { nrows: n, ncols: 0 });
    }
    let mut offset = 0;
    for s in &shapes {
        if s[2] == 1.0 {
            let (row, col, value) = (offset + s[3] as usize, s[4] as usize, s[5]);
            return Err(EstimatorError::NonFinite { row, col, value });
        }
        offset += s[0] as usize;
    }
    // This rank's distinct rows, and the fingerprints of every rank's, in rank order.
    let local = distinct_rows(x);
    let prints: Vec<f64> = local.iter().flat_map(|&i| fingerprint(x, i)).collect();
    let gathered = comm.all_gather(&prints);
    drop(prints);
    // The distinct rows of the whole data, in row order: (owner, place in the owner's `local`);
    // `starts[q]..starts[q + 1]` are those of rank q.
    let mut seen = std::collections::HashSet::new();
    let mut owners: Vec<(usize, usize)> = Vec::new();
    let mut starts = Vec::with_capacity(size + 1);
    for (q, block) in gathered.iter().enumerate() {
        starts.push(owners.len());
        for (k, print) in block.chunks_exact(4).enumerate() {
            let key: [u64; 4] = [print[0].to_bits(), print[1].to_bits(), print[2].to_bits(), print[3].to_bits()];
            if seen.insert(key) {
                owners.push((q, k));
            }
        }
    }
    starts.push(owners.len());
    drop((gathered, seen));
    let m = owners.len();
    if m < 2 {
        return Err(EstimatorError::SingleDistinctRow { n });
    }
    let mine = starts[me]..starts[me + 1];
    let row_of = |g: usize| x.row(local[owners[g].1]);
    if (m as u128) * (m as u128 - 1) / 2 <= pairs as u128 {
        // Few distinct rows: every rank gets them all and measures every pair.
        let send: Vec<f64> = mine.clone().flat_map(|g| row_of(g).iter().copied().collect::<Vec<_>>()).collect();
        let rows = comm.all_gather(&send).concat();
        let row = |a: usize| &rows[a * d..(a + 1) * d];
        return from_distances(n, m, percentile, pairs, rng, |a, b| row_distance(row(a).iter().copied(), row(b)));
    }
    // The pairs one process draws; this rank measures those whose first row it owns, in the
    // order of their second row.
    let drawn: Vec<(usize, usize)> = (0..pairs).map(|_| draw_pair(rng, m)).collect();
    let mut measured: Vec<(usize, usize)> =
        drawn.iter().enumerate().filter(|(_, (a, _))| mine.contains(a)).map(|(t, &(_, b))| (b, t)).collect();
    measured.sort_unstable();
    let mut distances = vec![0.0; pairs];
    let mut block = Vec::new();
    let mut next = 0;
    for q in 0..size {
        for first in (starts[q]..starts[q + 1]).step_by(BANDWIDTH_BLOCK_ROWS) {
            let end = (first + BANDWIDTH_BLOCK_ROWS).min(starts[q + 1]);
            block.clear();
            block.resize((end - first) * d, 0.0);
            if q == me {
                for (g, out) in (first..end).zip(block.chunks_exact_mut(d.max(1))) {
                    out.iter_mut().zip(row_of(g).iter()).for_each(|(o, v)| *o = *v);
                }
            }
            comm.broadcast(&mut block, q);
            while let Some(&(b, t)) = measured.get(next).filter(|(b, _)| *b < end) {
                let a = drawn[t].0;
                distances[t] = row_distance(row_of(a).iter().copied(), &block[(b - first) * d..(b - first + 1) * d]);
                next += 1;
            }
        }
    }
    drop((measured, drawn, block));
    comm.all_reduce_sum(&mut distances);
    percentile_of(n, m, distances, percentile, false)
}

/// Distinct rows each rank broadcasts at a time in [`bandwidth_estimate_sharded`].
pub const BANDWIDTH_BLOCK_ROWS: usize = 2048;

/// A 128-bit fingerprint of row `i` of `x` (entries as `f64`, `-0` as `+0`), as four 32-bit
/// integers held exactly in `f64`s (so that any transport keeps them).
fn fingerprint(x: MatRef<'_, f64>, i: usize) -> [f64; 4] {
    let hash = |salt: u64| {
        let mut hasher = DefaultHasher::new();
        hasher.write_u64(salt);
        for k in 0..x.ncols() {
            hasher.write_u64((x[(i, k)] + 0.0).to_bits());
        }
        hasher.finish()
    };
    let (h, g) = (hash(0x5354_4f4c_5231), hash(0x5354_4f4c_5232));
    [(h >> 32) as f64, (h & 0xffff_ffff) as f64, (g >> 32) as f64, (g & 0xffff_ffff) as f64]
}

/// The Euclidean distance between rows `u` and `v`, summed in coordinate order: the one
/// arithmetic of the rule, wherever the two rows are held.
fn row_distance(u: impl Iterator<Item = f64>, v: &[f64]) -> f64 {
    u.zip(v).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt()
}

/// One pair `(a, b)`, `a ≠ b`, of `m ≥ 2` distinct rows, uniformly: the draws of the rule.
fn draw_pair<R: Rng + ?Sized>(rng: &mut R, m: usize) -> (usize, usize) {
    let a = rng.random_range(0..m);
    let mut b = rng.random_range(0..m - 1);
    if b >= a {
        b += 1;
    }
    (a, b)
}

/// The indices of the distinct rows of `x`, first occurrences in row order.
fn distinct_rows(x: MatRef<'_, f64>) -> Vec<usize> {
    crate::RowGroups::of(DataRef::Dense(x)).map(|g| g.first_rows().to_vec()).unwrap_or_default()
}

/// The `p`-th percentile (`0 < p <= 100`) of the non-empty `values` with numpy's default
/// linear interpolation, by selection in $O(m)$; reorders `values`.
fn linear_percentile(values: &mut [f64], p: f64) -> f64 {
    let m = values.len();
    let h = (p / 100.0) * (m - 1) as f64;
    let lo = (h.floor() as usize).min(m - 1);
    let frac = h - lo as f64;
    let (_, &mut v_lo, upper) = values.select_nth_unstable_by(lo, f64::total_cmp);
    if frac > 0.0 && !upper.is_empty() {
        let v_hi = upper.iter().copied().fold(f64::INFINITY, f64::min);
        v_lo + frac * (v_hi - v_lo)
    } else {
        v_lo
    }
}

#[cfg(test)]
mod tests {
    use super::linear_percentile;

    #[test]
    fn percentile_matches_numpy_linear_rule() {
        // numpy.percentile([1, 2, 3, 4], 20) = 1.6; ([3, 1, 2], 50) = 2; ([5], 20) = 5
        assert!((linear_percentile(&mut [4.0, 1.0, 3.0, 2.0], 20.0) - 1.6).abs() < 1e-15);
        assert_eq!(linear_percentile(&mut [3.0, 1.0, 2.0], 50.0), 2.0);
        assert_eq!(linear_percentile(&mut [5.0], 20.0), 5.0);
        assert_eq!(linear_percentile(&mut [4.0, 1.0, 3.0, 2.0], 100.0), 4.0);
    }
}
