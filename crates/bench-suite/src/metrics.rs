//! Quality metrics of kernel PCA results against the exact kernel matrix.

use faer::{Mat, MatRef};
use stolr_estimators::Kernel;
use stolr_lowrank::{Eigenpairs, frobenius};

/// Rows of `K` formed at a time by the streaming metrics (memory `8·BLOCK·n` bytes).
const BLOCK: usize = 512;

/// `‖K − U_r diag(λ_r) U_rᵀ‖_F / n`, the `K^r` error of \[SKPCA\], Fig. 1(c) and 2(c), for the
/// first `r` of the given eigenpairs (all of them if fewer), where `K` is the kernel matrix of
/// the rows of `x` `(n, d)` (centred, `HKH`, when `center`). `K` is streamed in blocks of rows
/// and never held: time `O(n²(d + r))`, memory `O(n·(r + 512))`. The eigenvectors need not be
/// orthonormal (docs/derivations.md §1.7, second formula).
///
/// # Panics
/// If the eigenvectors do not have `n` rows.
///
/// # References
/// \[SKPCA\], "Experimental Results"; docs/derivations.md §1.7, §2.8.
pub fn kernel_residual(x: MatRef<'_, f64>, kernel: &Kernel, center: bool, pairs: &Eigenpairs, r: usize) -> f64 {
    kernel_residuals(x, kernel, center, &[pairs], r)[0]
}

/// [`kernel_residual`] of several sets of eigenpairs of the same data (e.g. the snapshots of
/// one run, or the results of several methods) in **one** streamed pass over `K`: the kernel is
/// evaluated once for all of them. Entry `j` of the result belongs to `sets[j]`. Time
/// `O(n²(d + Σ_j r_j))`, memory `O(n·(Σ_j r_j + 512))`; call it on chunks of `sets` to bound the
/// memory.
///
/// # Panics
/// If some set's eigenvectors do not have `n` rows.
///
/// # References
/// \[SKPCA\], "Experimental Results"; docs/derivations.md §1.7, §2.8.
pub fn kernel_residuals(x: MatRef<'_, f64>, kernel: &Kernel, center: bool, sets: &[&Eigenpairs], r: usize) -> Vec<f64> {
    let n = x.nrows();
    let ranks: Vec<usize> = sets
        .iter()
        .map(|p| {
            assert_eq!(p.dim(), n, "eigenvectors must have one row per sample");
            r.min(p.rank())
        })
        .collect();
    let width: usize = ranks.iter().sum();
    // All the eigenvectors side by side, so that each block of K multiplies them in one product.
    let mut u_all = Mat::<f64>::zeros(n, width);
    let mut col = 0;
    for (p, &rj) in sets.iter().zip(&ranks) {
        u_all.as_mut().subcols_mut(col, rj).copy_from(p.vectors.subcols(0, rj));
        col += rj;
    }
    let means = if center { Some(row_means(x, kernel)) } else { None };
    let mut ku = Mat::<f64>::zeros(n, width);
    let mut k_norm_sq = 0.0;
    for start in (0..n).step_by(BLOCK) {
        let rows = BLOCK.min(n - start);
        let block = kernel_block(x, kernel, start, rows, means.as_ref());
        k_norm_sq += block.squared_norm_l2();
        let prod = &block * &u_all;
        ku.as_mut().subrows_mut(start, rows).copy_from(&prod);
    }
    let mut out = Vec::with_capacity(sets.len());
    let mut col = 0;
    for (p, &rj) in sets.iter().zip(&ranks) {
        let u = u_all.subcols(col, rj);
        let res = frobenius::residual_sq_from_products(k_norm_sq, u, &p.values[..rj], ku.subcols(col, rj))
            .expect("shapes agree by construction");
        out.push(res.sqrt() / n as f64);
        col += rj;
    }
    out
}

/// Row means of `K` and their mean, `(K1/n, 1ᵀK1/n²)`.
struct Means {
    rows: Vec<f64>,
    all: f64,
}

fn row_means(x: MatRef<'_, f64>, kernel: &Kernel) -> Means {
    let n = x.nrows();
    let mut rows = Vec::with_capacity(n);
    for start in (0..n).step_by(BLOCK) {
        let len = BLOCK.min(n - start);
        let block = kernel.cross(x.subrows(start, len), x);
        rows.extend((0..len).map(|i| (0..n).map(|j| block[(i, j)]).sum::<f64>() / n as f64));
    }
    let all = rows.iter().sum::<f64>() / n as f64;
    Means { rows, all }
}

/// Rows `start..start+len` of `K` (or of `HKH`).
fn kernel_block(x: MatRef<'_, f64>, kernel: &Kernel, start: usize, len: usize, means: Option<&Means>) -> Mat<f64> {
    let mut block = kernel.cross(x.subrows(start, len), x);
    if let Some(m) = means {
        for j in 0..x.nrows() {
            for i in 0..len {
                block[(i, j)] += m.all - m.rows[start + i] - m.rows[j];
            }
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use stolr_estimators::centered_kernel_matrix;
    use stolr_lowrank::sym_eigen_desc;

    #[test]
    fn streaming_residual_equals_dense() {
        let n = 700; // more than one block
        let x = Mat::from_fn(n, 3, |i, j| ((i * 37 + j * 11) % 101) as f64 / 30.0);
        let kernel = Kernel::gaussian(0.8);
        for center in [false, true] {
            let mut k = kernel.matrix(x.as_ref());
            if center {
                k = centered_kernel_matrix(&k);
            }
            let (values, vectors) = sym_eigen_desc(k.as_ref()).unwrap();
            let pairs = Eigenpairs { values, vectors };
            for r in [1, 10] {
                let u = pairs.vectors.subcols(0, r);
                let ul = Mat::from_fn(n, r, |i, j| u[(i, j)] * pairs.values[j]);
                let direct = (&k - &ul * u.transpose()).norm_l2() / n as f64;
                let streamed = kernel_residual(x.as_ref(), &kernel, center, &pairs, r);
                assert!((direct - streamed).abs() < 1e-9 * (1.0 + direct), "{direct} vs {streamed}");
            }
            // Several sets in one pass equal one pass each.
            let mut other = pairs.clone();
            other.truncate(4);
            let both = kernel_residuals(x.as_ref(), &kernel, center, &[&pairs, &other], 10);
            assert_eq!(both.len(), 2);
            assert!((both[0] - kernel_residual(x.as_ref(), &kernel, center, &pairs, 10)).abs() < 1e-12);
            assert!((both[1] - kernel_residual(x.as_ref(), &kernel, center, &other, 10)).abs() < 1e-12);
        }
    }
}
