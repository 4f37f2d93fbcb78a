//! Tests of the Nyström kernel PCA against the dense formulas.

use super::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The straightforward dense Nyström (the `n × m` block held whole), as the solver computed
/// it before blocks: the reference the blocked solver must agree with.
fn dense_nystrom(x: MatRef<'_, f64>, kernel: &Kernel, m: usize, rank: usize, center: bool, seed: u64) -> NystromFit {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = x.nrows();
    let idx = rand::seq::index::sample(&mut rng, n, m).into_vec();
    let c = kernel.columns(x, &idx);
    let w = Mat::from_fn(m, m, |i, j| c[(idx[i], j)]);
    let (ew, uw) = sym_eigen_desc(w.as_ref()).unwrap();
    let cutoff = 1e-10 * ew[0].max(0.0);
    let kept = ew.iter().take_while(|&&v| v > cutoff).count();
    let scaled = Mat::from_fn(m, kept, |i, j| uw[(i, j)] / ew[j].sqrt());
    let mut f = &c * &scaled;
    let mut f_mean = vec![0.0; kept];
    if center {
        for (j, fm) in f_mean.iter_mut().enumerate() {
            let mean = (0..n).map(|i| f[(i, j)]).sum::<f64>() / n as f64;
            (0..n).for_each(|i| f[(i, j)] -= mean);
            *fm = mean;
        }
    }
    let gram = f.transpose() * &f;
    let (lam, v) = sym_eigen_desc(gram.as_ref()).unwrap();
    let cutoff = 1e-10 * lam[0].max(0.0);
    let r = lam.iter().take(rank).take_while(|&&l| l > cutoff).count();
    let coeffs = Mat::from_fn(kept, r, |i, j| v[(i, j)] / lam[j].sqrt());
    let mut pairs = Eigenpairs { values: lam[..r].to_vec(), vectors: &f * &coeffs };
    let signs = pairs.fix_signs();
    let v_r = Mat::from_fn(kept, r, |i, j| v[(i, j)] * signs[j]);
    let coefficients = &scaled * &v_r;
    let offset = (0..r).map(|j| (0..kept).map(|i| f_mean[i] * v_r[(i, j)]).sum()).collect();
    let landmark_rows = crate::ModelRows::Dense(Mat::from_fn(m, x.ncols(), |i, j| x[(idx[i], j)]));
    NystromFit { pairs, landmarks: idx, landmark_rows, coefficients, offset }
}

/// Three well-separated clusters in 4 dimensions with a smooth perturbation: a spectrum
/// with clear gaps at the top.
fn clusters(n: usize) -> Mat<f64> {
    Mat::from_fn(n, 4, |i, j| {
        let centre = [0.0, 3.0, -2.5][i % 3] * if j % 2 == 0 { 1.0 } else { -0.5 };
        centre + ((i * 7 + j * 13) as f64 * 0.377).sin() * 0.8
    })
}

/// The projections `k(x', L) B − c` `(m', r)` of new rows `x'` through a fit on the training rows
/// `x` (its landmarks are rows of `x`).
fn projections(f: &NystromFit, x: MatRef<'_, f64>, kernel: &Kernel, new_rows: MatRef<'_, f64>) -> Mat<f64> {
    let lm = Mat::from_fn(f.landmarks.len(), x.ncols(), |i, j| x[(f.landmarks[i], j)]);
    let mut z = kernel.cross(new_rows, lm.as_ref()) * &f.coefficients;
    for j in 0..z.ncols() {
        z.col_mut(j).iter_mut().for_each(|v| *v -= f.offset[j]);
    }
    z
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| (a[(i, j)] - b[(i, j)]).abs())).fold(0.0, f64::max)
}

fn max_abs(a: MatRef<'_, f64>) -> f64 {
    (0..a.ncols()).flat_map(|j| (0..a.nrows()).map(move |i| a[(i, j)].abs())).fold(0.0, f64::max)
}

fn config(m: usize, rank: usize, center: bool, block_rows: usize) -> NystromConfig {
    NystromConfig { block_rows, memory: MemoryBudget::UNLIMITED, ..NystromConfig::new(m, rank).center(center) }
}

/// The fit run piece by piece on uneven blocks of rows (a Dask array's chunks: the basis
/// once, the parts added in block order, the sign candidates of every block) equals the
/// one-process fit on the same landmarks, centred or not: the eigenvalues, eigenvectors,
/// coefficients and offset, to rounding. With the outlier row far out, the signs decided by
/// a block other than the first.
#[test]
fn blocks_of_rows_give_the_one_process_fit() {
    let mut x = clusters(211);
    for j in 0..4 {
        x[(150, j)] = 9.0; // an outlier row, in the fifth block
    }
    let kernel = Kernel::gaussian(1.3);
    for center in [true, false] {
        let cfg = config(30, 4, center, 64);
        let whole = nystrom_fit(x.as_ref(), &kernel, &cfg, &mut Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
        let rows = crate::ModelRows::gather(DataRef::Dense(x.as_ref()), &whole.landmarks);
        let basis = NystromBasis::new(&kernel, rows, center).unwrap();
        let cuts = [0, 37, 74, 111, 148, 185, 211];
        let block = |b: usize| DataRef::Dense(x.as_ref().subrows(cuts[b], cuts[b + 1] - cuts[b]));
        let mut total = basis.gram_part(&kernel, block(0), 64).unwrap();
        for b in 1..cuts.len() - 1 {
            total.add(&basis.gram_part(&kernel, block(b), 64).unwrap()).unwrap();
        }
        let solution = basis.solve(total, 211, 4).unwrap();
        let mut vectors = Vec::new();
        let mut candidates = Vec::new();
        for (b, &first) in cuts[..cuts.len() - 1].iter().enumerate() {
            let v = solution.eigenvectors(&basis, &kernel, block(b), 64).unwrap();
            let pairs = Eigenpairs { values: solution.values.clone(), vectors: v };
            candidates.push(pairs.sign_candidates(first));
            vectors.push(pairs.vectors);
        }
        let signs = stolr_lowrank::signs_from_candidates(&candidates, solution.values.len());
        let values = solution.values.clone();
        let (coefficients, offset) = solution.finish(&basis, &signs);
        let scale = whole.pairs.values[0];
        for (a, b) in values.iter().zip(&whole.pairs.values) {
            assert!((a - b).abs() <= 1e-12 * scale, "{a} vs {b}");
        }
        for (b, v) in vectors.iter().enumerate() {
            let mut v = v.clone();
            for (j, &sign) in signs.iter().enumerate() {
                v.col_mut(j).iter_mut().for_each(|e| *e *= sign);
            }
            let w = whole.pairs.vectors.as_ref().subrows(cuts[b], cuts[b + 1] - cuts[b]);
            assert!(max_abs_diff(v.as_ref(), w) <= 1e-10, "block {b}: {}", max_abs_diff(v.as_ref(), w));
        }
        assert!(
            max_abs_diff(coefficients.as_ref(), whole.coefficients.as_ref())
                <= 1e-10 * max_abs(whole.coefficients.as_ref())
        );
        for (a, b) in offset.iter().zip(&whole.offset) {
            assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}

#[test]
fn blocked_nystrom_agrees_with_the_dense_formula_to_1e_10() {
    let x = clusters(1100);
    let new_rows = Mat::from_fn(50, 4, |i, j| ((i * 4 + j) as f64 * 0.91).cos() * 3.0);
    let kernels = [Kernel::gaussian(2.0), Kernel::laplacian(4.0), Kernel::polynomial(4.0, 1.0, 2)];
    for kernel in kernels {
        for center in [false, true] {
            let (m, rank) = (60, 6);
            let reference = dense_nystrom(x.as_ref(), &kernel, m, rank, center, 11);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
            let fit = nystrom_fit(x.as_ref(), &kernel, &config(m, rank, center, 512), &mut rng).unwrap();
            let tag = format!("{kernel:?}, center = {center}");
            assert_eq!(fit.landmarks, reference.landmarks, "{tag}");
            assert_eq!(fit.pairs.rank(), reference.pairs.rank(), "{tag}");
            let top = reference.pairs.values[0];
            for (a, b) in fit.pairs.values.iter().zip(&reference.pairs.values) {
                assert!((a - b).abs() <= 1e-10 * b.abs(), "{tag}: eigenvalue {a} vs {b}");
                assert!(*b > 1e-6 * top, "{tag}: the test needs well-resolved eigenvalues");
            }
            let du = max_abs_diff(fit.pairs.vectors.as_ref(), reference.pairs.vectors.as_ref());
            assert!(du <= 1e-10, "{tag}: eigenvectors differ by {du}");
            // B itself is as ill-conditioned as W (entries ∝ λ_W^{-1/2}); what it defines,
            // the projection z(x) = k(x, L) B − c of new rows, is what must agree.
            let z_ref = projections(&reference, x.as_ref(), &kernel, new_rows.as_ref());
            let dz = max_abs_diff(projections(&fit, x.as_ref(), &kernel, new_rows.as_ref()).as_ref(), z_ref.as_ref());
            assert!(dz <= 1e-10 * max_abs(z_ref.as_ref()), "{tag}: projections of new rows differ by {dz}");
            // Orthonormal eigenvectors.
            let gram = fit.pairs.vectors.transpose() * &fit.pairs.vectors;
            let eye = Mat::<f64>::identity(fit.pairs.rank(), fit.pairs.rank());
            assert!(max_abs_diff(gram.as_ref(), eye.as_ref()) <= 1e-12, "{tag}");
        }
    }
}

/// Data that repeats rows (so that landmarks repeat too): the fit over the distinct rows
/// and distinct landmarks agrees with the dense formula over every row and every landmark
/// (the pseudo-inverse of the singular `W`), centred or not, with an outlier row and a
/// constant column; so do the projections of new rows through the model's `m` rows of `B`.
#[test]
fn repeated_rows_and_landmarks_agree_with_the_dense_formula() {
    let base = clusters(40);
    let mut x = Mat::from_fn(900, 5, |i, j| if j == 4 { 1.5 } else { base[((i * 31) % 97 % 40, j)] });
    for j in 0..4 {
        x[(417, j)] = 25.0;
    }
    let new_rows = Mat::from_fn(30, 5, |i, j| if j == 4 { 1.5 } else { ((i * 5 + j) as f64 * 0.73).sin() * 3.0 });
    let kernel = Kernel::gaussian(1.8);
    for center in [false, true] {
        let (m, rank) = (120, 5);
        let reference = dense_nystrom(x.as_ref(), &kernel, m, rank, center, 21);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        let fit = nystrom_fit(x.as_ref(), &kernel, &config(m, rank, center, 256), &mut rng).unwrap();
        let distinct: std::collections::BTreeSet<usize> =
            fit.landmarks.iter().map(|&i| if i == 417 { usize::MAX } else { (i * 31) % 97 % 40 }).collect();
        assert!(distinct.len() < m / 2, "the test needs repeated landmarks");
        assert_eq!(fit.coefficients.nrows(), m);
        let top = reference.pairs.values[0];
        for (a, b) in fit.pairs.values.iter().zip(&reference.pairs.values) {
            assert!((a - b).abs() <= 1e-10 * top, "center = {center}: eigenvalue {a} vs {b}");
        }
        let du = max_abs_diff(fit.pairs.vectors.as_ref(), reference.pairs.vectors.as_ref());
        assert!(du <= 1e-9, "center = {center}: eigenvectors differ by {du}");
        let z_ref = projections(&reference, x.as_ref(), &kernel, new_rows.as_ref());
        let dz = max_abs_diff(projections(&fit, x.as_ref(), &kernel, new_rows.as_ref()).as_ref(), z_ref.as_ref());
        assert!(dz <= 1e-9 * max_abs(z_ref.as_ref()), "center = {center}: projections differ by {dz}");
    }
}

#[test]
fn results_are_bitwise_independent_of_the_block_size_and_reproducible() {
    let x = clusters(1500);
    let kernel = Kernel::gaussian(1.5);
    for center in [false, true] {
        let run = |block_rows| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
            nystrom_fit(x.as_ref(), &kernel, &config(80, 7, center, block_rows), &mut rng).unwrap()
        };
        let first = run(1);
        assert_eq!(first.pairs.vectors.nrows(), 1500);
        for block_rows in [256, 700, 1024, 4096, usize::MAX] {
            assert_eq!(run(block_rows), first, "block_rows = {block_rows}, center = {center}");
        }
    }
}

#[test]
fn the_budget_is_checked_before_allocating_and_names_what_is_over() {
    let x = clusters(600);
    let kernel = Kernel::gaussian(1.5);
    let over = |limit: u64, m: usize, rank: usize, block_rows: usize| {
        let config = NystromConfig { memory: MemoryBudget::bytes(limit), block_rows, ..NystromConfig::new(m, rank) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        match nystrom_fit(x.as_ref(), &kernel, &config, &mut rng) {
            Err(SolverError::Memory(e)) => e.to_string(),
            other => panic!("expected a memory error, got {other:?}"),
        }
    };
    // m = 500: 4·500²·8 = 8 MB of m × m matrices, over a 4 MB budget.
    let message = over(4 << 20, 500, 5, DEFAULT_BLOCK_ROWS);
    assert!(message.contains("m × m landmark kernel") && message.contains("m = 500"), "{message}");
    // The default block (4096 rows, cut to the 768 that cover n = 600) of m = 100 columns
    // (twice, with the panels of F) plus d = 4: 1.25 MB, over 614 kB, while the m × m
    // matrices (326 kB) fit.
    let message = over(600 << 10, 100, 10, DEFAULT_BLOCK_ROWS);
    assert!(message.contains("row blocks") && message.contains("768 rows"), "{message}");
    // The n × r eigenvectors: 600·100·8 = 480 kB, over 450 kB, while the m × m matrices
    // (326 kB) and blocks of 256 rows (418 kB with their panels of F) fit.
    let message = over(450_000, 100, 100, 256);
    assert!(message.contains("n × r eigenvectors") && message.contains("r = 100"), "{message}");
    // Each part fits, their sum does not.
    let parts = allocations(600, 100, 10, 4, DEFAULT_BLOCK_ROWS);
    let largest = parts.iter().map(|p| p.1).max().unwrap();
    let message = over(largest, 100, 10, DEFAULT_BLOCK_ROWS);
    assert!(message.contains("together"), "{message}");
    // Within the budget: it runs.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let sum: u64 = parts.iter().map(|p| p.1).sum();
    let config = NystromConfig { memory: MemoryBudget::bytes(sum), ..NystromConfig::new(100, 10) };
    assert_eq!(nystrom_fit(x.as_ref(), &kernel, &config, &mut rng).unwrap().pairs.rank(), 10);
}

/// Four features: an outlier row (row 0, 25 times the others' scale), a duplicate of row 3
/// (row 7) and a constant last column; the rest as [`clusters`].
fn hostile(n: usize) -> Mat<f64> {
    let base = clusters(n);
    Mat::from_fn(n, 4, |i, j| match (i, j) {
        (_, 3) => 2.5,
        (0, _) => 25.0 * base[(0, j)] + 10.0,
        (7, _) => base[(3, j)],
        _ => base[(i, j)],
    })
}

fn given(x: DataRef<'_>, config: &NystromConfig, landmarks: &Landmarks, seed: u64) -> Result<NystromFit, SolverError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    nystrom_fit_landmarks(
        x,
        &Kernel::gaussian(2.0),
        config,
        landmarks,
        &mut rng,
        &SingleProcess,
        RowShard::whole(x.nrows()),
    )
}

#[test]
fn given_indices_equal_to_the_draw_give_the_same_bits_and_rows_agree() {
    let x = hostile(300);
    let kernel = Kernel::gaussian(2.0);
    for center in [false, true] {
        let config = config(40, 5, center, 128);
        let drawn = nystrom_fit(x.as_ref(), &kernel, &config, &mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap();
        let idx = rand::seq::index::sample(&mut Xoshiro256PlusPlus::seed_from_u64(9), 300, 40).into_vec();
        let indices = Landmarks::Indices(idx.clone());
        // Another seed: no draw is made, the bits are the drawn fit's.
        let by_indices = given(x.as_ref().into(), &config, &indices, 12345).unwrap();
        assert_eq!(by_indices, drawn, "center = {center}");
        assert_eq!(by_indices, given(x.as_ref().into(), &config, &indices, 1).unwrap());
        // The same landmarks as rows: the same fit to 1e-12.
        let rows = Mat::from_fn(40, 4, |i, j| x[(idx[i], j)]);
        let by_rows = given(x.as_ref().into(), &config, &Landmarks::Rows(rows.clone()), 777).unwrap();
        assert!(by_rows.landmarks.is_empty());
        assert_eq!(by_rows.landmark_rows, crate::ModelRows::Dense(rows));
        assert_eq!(by_rows.pairs.rank(), drawn.pairs.rank());
        for (a, b) in by_rows.pairs.values.iter().zip(&drawn.pairs.values) {
            assert!((a - b).abs() <= 1e-12 * b.abs(), "center = {center}: {a} vs {b}");
        }
        let du = max_abs_diff(by_rows.pairs.vectors.as_ref(), drawn.pairs.vectors.as_ref());
        assert!(du <= 1e-12, "center = {center}: eigenvectors differ by {du}");
        let db = max_abs_diff(by_rows.coefficients.as_ref(), drawn.coefficients.as_ref());
        assert!(db <= 1e-12 * max_abs(drawn.coefficients.as_ref()), "center = {center}: B differs by {db}");
    }
}

#[test]
fn given_rows_agree_with_the_dense_nystrom_matrix_to_1e_10() {
    // Landmark rows that are not training rows: K̃ = C W⁺ Cᵀ with C = K(X, L), W = K(L, L).
    let x = hostile(150);
    let kernel = Kernel::gaussian(2.0);
    let rows = Mat::from_fn(9, 4, |i, j| ((i * 5 + j * 3) as f64 * 0.71).sin() * 3.0 + if j == 3 { 2.5 } else { 0.0 });
    let (n, m, r) = (150, 9, 4);
    for center in [false, true] {
        let fit = given(x.as_ref().into(), &config(m, r, center, 64), &Landmarks::Rows(rows.clone()), 3).unwrap();
        let c = kernel.cross(x.as_ref(), rows.as_ref());
        let (ew, uw) = sym_eigen_desc(kernel.matrix(rows.as_ref()).as_ref()).unwrap();
        assert!(ew[m - 1] > 1e-8 * ew[0], "the test wants an invertible W");
        let w_inv = Mat::from_fn(m, m, |i, j| (0..m).map(|k| uw[(i, k)] * uw[(j, k)] / ew[k]).sum::<f64>());
        let mut kt = &c * &w_inv * c.transpose();
        if center {
            let h = Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)) - 1.0 / n as f64);
            kt = &h * &kt * &h;
        }
        let (lam, u) = sym_eigen_desc(kt.as_ref()).unwrap();
        assert_eq!(fit.pairs.rank(), r);
        for k in 0..r {
            let (a, b) = (fit.pairs.values[k], lam[k]);
            assert!((a - b).abs() <= 1e-10 * lam[0], "center = {center}: eigenvalue {k}: {a} vs {b}");
            assert!(lam[k] - lam[k + 1] > 1e-3 * lam[0], "the test wants separated eigenvalues");
            let sign =
                if (0..n).map(|i| u[(i, k)] * fit.pairs.vectors[(i, k)]).sum::<f64>() < 0.0 { -1.0 } else { 1.0 };
            let du = (0..n).map(|i| (sign * u[(i, k)] - fit.pairs.vectors[(i, k)]).abs()).fold(0.0, f64::max);
            assert!(du <= 1e-10, "center = {center}: eigenvector {k} differs by {du}");
        }
        // The out-of-sample map on the training rows gives U Λ^{1/2}.
        let mut z = &c * &fit.coefficients;
        for j in 0..r {
            z.col_mut(j).iter_mut().for_each(|v| *v -= fit.offset[j]);
        }
        let target = Mat::from_fn(n, r, |i, j| fit.pairs.vectors[(i, j)] * fit.pairs.values[j].sqrt());
        let dz = max_abs_diff(z.as_ref(), target.as_ref());
        assert!(dz <= 1e-10 * max_abs(target.as_ref()), "center = {center}: projections differ by {dz}");
    }
}

#[test]
fn sparse_training_rows_take_given_indices_and_dense_rows() {
    let x = hostile(200);
    let (mut ptr, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
    for i in 0..200 {
        for j in 0..4 {
            // Zero out a third of the entries so that the rows are really sparse.
            if (i + j) % 3 != 0 {
                cols.push(j);
                vals.push(x[(i, j)]);
            }
        }
        ptr.push(cols.len());
    }
    let sparse = crate::csr_from_parts((200, 4), ptr, cols, vals).unwrap();
    let dense = Mat::from_fn(200, 4, |i, j| if (i + j) % 3 != 0 { x[(i, j)] } else { 0.0 });
    let rows = Mat::from_fn(12, 4, |i, j| ((i * 2 + j) as f64 * 1.3).cos() * 2.0);
    for landmarks in [Landmarks::Indices((0..30).map(|i| (i * 7) % 200).collect()), Landmarks::Rows(rows)] {
        let config = config(landmarks.count(), 5, true, 64);
        let a = given(DataRef::Dense(dense.as_ref()), &config, &landmarks, 1).unwrap();
        let b = given(DataRef::Sparse(sparse.as_ref()), &config, &landmarks, 2).unwrap();
        for (u, v) in a.pairs.values.iter().zip(&b.pairs.values) {
            assert!((u - v).abs() <= 1e-12 * a.pairs.values[0], "{u} vs {v}");
        }
        assert!(max_abs_diff(a.pairs.vectors.as_ref(), b.pairs.vectors.as_ref()) <= 1e-10);
    }
}

#[test]
fn hostile_given_landmarks_are_typed_errors_before_any_work() {
    let x = hostile(50);
    let config = config(5, 3, true, 64);
    let mut nan = Mat::from_fn(3, 4, |i, j| (i + j) as f64);
    nan[(2, 1)] = f64::NAN;
    let cases = [
        (Landmarks::Indices(vec![0, 50]), "out of range"),
        (Landmarks::Indices(vec![4, 1, 4]), "given twice"),
        (Landmarks::Indices(vec![]), "empty"),
        (Landmarks::Rows(Mat::zeros(3, 5)), "5 columns"),
        (Landmarks::Rows(nan), "non-finite"),
        (Landmarks::Rows(Mat::zeros(0, 4)), "no landmark rows"),
    ];
    for (landmarks, what) in cases {
        match given(x.as_ref().into(), &config, &landmarks, 1) {
            Err(SolverError::InvalidConfig { name: "landmarks", reason }) => {
                assert!(reason.contains(what), "{reason}")
            }
            other => panic!("{landmarks:?}: expected InvalidConfig(landmarks), got {other:?}"),
        }
    }
    // More pairs than given landmarks.
    let two = Landmarks::Indices(vec![1, 2]);
    assert!(matches!(given(x.as_ref().into(), &config, &two, 1), Err(SolverError::InvalidRank { .. })));
}

/// A basis rebuilt from its parts (as Dask's workers rebuild it) equals the one built from the
/// landmarks, repeated landmarks included; parts of other shapes are typed errors.
#[test]
fn a_basis_rebuilt_from_its_parts_is_the_same_and_bad_parts_are_refused() {
    let base = clusters(7);
    let rows = Mat::from_fn(20, 4, |i, j| base[(i % 7, j)]);
    let kernel = Kernel::gaussian(1.2);
    for center in [false, true] {
        let basis = NystromBasis::new(&kernel, crate::ModelRows::Dense(rows.clone()), center).unwrap();
        assert_eq!(basis.scaled().nrows(), 7, "seven distinct landmarks of twenty");
        let rebuilt = NystromBasis::from_parts(
            crate::ModelRows::Dense(rows.clone()),
            basis.scaled().to_owned(),
            basis.shift().to_vec(),
            basis.max_diagonal(),
            center,
        )
        .unwrap();
        assert_eq!(rebuilt, basis);
        let bad = [
            (Mat::zeros(20, basis.kept()), basis.shift().to_vec(), 1.0),
            (basis.scaled().to_owned(), vec![0.0; 20], 1.0),
            (basis.scaled().to_owned(), basis.shift().to_vec(), f64::NAN),
        ];
        for (scaled, shift, diagonal) in bad {
            let err = NystromBasis::from_parts(crate::ModelRows::Dense(rows.clone()), scaled, shift, diagonal, center)
                .unwrap_err();
            assert!(matches!(err, SolverError::InvalidConfig { name: "basis", .. }), "{err}");
        }
    }
}
