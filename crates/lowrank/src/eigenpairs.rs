//! Eigenpairs: the common output of every PCA and kernel PCA solver.

use faer::Mat;

/// Eigenpairs `(λ_i, u_i)`, eigenvalues in **nonincreasing** order.
///
/// `values` has length `r`; `vectors` has shape `(n, r)` and holds `u_i` in column `i`. The
/// solvers return orthonormal eigenvectors whose signs are fixed by [`Eigenpairs::fix_signs`]
/// (largest absolute entry positive), so outputs are reproducible.
#[derive(Debug, Clone, PartialEq)]
pub struct Eigenpairs {
    /// Eigenvalues `λ_1 ≥ … ≥ λ_r`, length `r`.
    pub values: Vec<f64>,
    /// Eigenvectors as columns, shape `(n, r)`.
    pub vectors: Mat<f64>,
}

impl Eigenpairs {
    /// Number of pairs `r`.
    pub fn rank(&self) -> usize {
        self.values.len()
    }

    /// Dimension `n` of the eigenvectors.
    pub fn dim(&self) -> usize {
        self.vectors.nrows()
    }

    /// Keeps the first `r` pairs (all of them if `r ≥ rank`).
    pub fn truncate(&mut self, r: usize) {
        if r < self.rank() {
            self.values.truncate(r);
            self.vectors = self.vectors.subcols(0, r).to_owned();
        }
    }

    /// Flips the sign of each eigenvector so that its entry of largest absolute value is
    /// positive (the first such entry on ties). Returns the sign applied to each column (±1),
    /// so that quantities derived from the eigenvectors can be flipped alike.
    pub fn fix_signs(&mut self) -> Vec<f64> {
        let mut signs = vec![1.0; self.vectors.ncols()];
        for (j, applied) in signs.iter_mut().enumerate() {
            let col = self.vectors.col(j);
            let mut best = 0.0_f64;
            let mut sign = 1.0;
            for i in 0..col.nrows() {
                let v = col[i];
                if v.abs() > best {
                    best = v.abs();
                    sign = v.signum();
                }
            }
            if sign < 0.0 {
                *applied = -1.0;
                for i in 0..self.vectors.nrows() {
                    self.vectors[(i, j)] = -self.vectors[(i, j)];
                }
            }
        }
        signs
    }

    /// [`Eigenpairs::fix_signs`] for eigenvectors whose rows are sharded across the ranks of
    /// `comm`: this rank holds rows `first..first + n_local` of every eigenvector. Each rank finds
    /// its entry of largest absolute value per column (the first on ties), the candidates are
    /// gathered, and the largest wins, the one of lowest global row on ties: the rule of
    /// [`Eigenpairs::fix_signs`] over the whole column, so the signs do not depend on the number
    /// of ranks. Returns the signs applied (±1, the same on every rank). Collective: `2r`
    /// numbers per rank are gathered.
    pub fn fix_signs_sharded(&mut self, comm: &dyn stolr_comm::Communicator, first: usize) -> Vec<f64> {
        let all = comm.all_gather(&self.sign_candidates(first));
        let signs = signs_from_candidates(&all, self.vectors.ncols());
        self.apply_signs(&signs);
        signs
    }

    /// The sign candidates of [`Eigenpairs::fix_signs_sharded`] for a block of rows of the
    /// eigenvectors (rows `first..first + n_b` of the whole columns): per column, the largest
    /// absolute value in the block (the first on ties), its sign and its global row, `3r`
    /// numbers (`[0, 1, ∞]` for a column of zeros or an empty block).
    pub fn sign_candidates(&self, first: usize) -> Vec<f64> {
        let r = self.vectors.ncols();
        let mut local = Vec::with_capacity(3 * r);
        for j in 0..r {
            let col = self.vectors.col(j);
            let (mut best, mut sign, mut row) = (0.0_f64, 1.0, f64::INFINITY);
            for i in 0..col.nrows() {
                if col[i].abs() > best {
                    (best, sign, row) = (col[i].abs(), col[i].signum(), (first + i) as f64);
                }
            }
            local.extend([best, sign, row]);
        }
        local
    }

    /// Multiplies column `j` of the eigenvectors by `signs[j]` (`±1`) where it is negative.
    pub fn apply_signs(&mut self, signs: &[f64]) {
        for (j, &sign) in signs.iter().enumerate() {
            if sign < 0.0 {
                self.vectors.col_mut(j).iter_mut().for_each(|v| *v = -*v);
            }
        }
    }

    /// Kernel PCA projections of the training points, shape `(n, r)`: column `i` is
    /// `sqrt(λ_i) u_i`, the projection of every training point onto the `i`-th principal axis in
    /// feature space (`Σ_j α_ij κ(x_j, ·)` with `α_i = u_i / sqrt(λ_i)`; docs/derivations.md §2.1).
    /// Negative eigenvalues, which the solvers never return, would be clamped to zero.
    pub fn projections(&self) -> Mat<f64> {
        let scale: Vec<f64> = self.values.iter().map(|v| v.max(0.0).sqrt()).collect();
        Mat::from_fn(self.dim(), self.rank(), |i, j| self.vectors[(i, j)] * scale[j])
    }

    /// Dense reconstruction `U diag(λ) Uᵀ`, shape `(n, n)`. For tests on small inputs only.
    pub fn to_dense(&self) -> Mat<f64> {
        let u = self.vectors.as_ref();
        let scaled = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)] * self.values[j]);
        &scaled * u.transpose()
    }
}

/// The signs (`±1`, length `r`) that [`Eigenpairs::fix_signs_sharded`] applies, from every
/// block's [`Eigenpairs::sign_candidates`] (`3r` numbers each, blocks in any order): per
/// column the largest candidate wins, the one of lowest global row on ties, so the signs are
/// those of [`Eigenpairs::fix_signs`] on the whole columns. A part shorter than `3r` numbers
/// counts as empty.
pub fn signs_from_candidates(parts: &[Vec<f64>], r: usize) -> Vec<f64> {
    let mut signs = vec![1.0; r];
    for (j, applied) in signs.iter_mut().enumerate() {
        let (mut best, mut sign, mut row) = (0.0_f64, 1.0, f64::INFINITY);
        for part in parts.iter().filter(|p| p.len() >= 3 * r) {
            let (b, s, i) = (part[3 * j], part[3 * j + 1], part[3 * j + 2]);
            if b > best || (b == best && b > 0.0 && i < row) {
                (best, sign, row) = (b, s, i);
            }
        }
        if sign < 0.0 {
            *applied = -1.0;
        }
    }
    signs
}
