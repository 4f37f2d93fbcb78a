//! The incremental PCA algorithm of Arora, Cotter, Livescu and Srebro (2012), the baseline of
//! \[MSG\].

use faer::Mat;
use stolr_lowrank::rank_one_eigen_update;

use crate::streaming::{StreamingPca, check_dims, check_sample};
use crate::{SolverError, SolverState};

/// Incremental PCA: `M_{t+1} = P_rank-k(M_t + x_t x_tᵀ)`, the top `k` eigenpairs of the
/// rank-one update of the previous iterate. No step size; `O(k² d)` per sample, `O(k d)`
/// memory. It starts from `M₀ = 0`, so the first `k` (linearly independent) samples fill the
/// basis.
///
/// It can converge to a wrong subspace (\[MSG\], Section 5.2: the 2-D example where it picks
/// the wrong axis with probability 5/9), which capped MSG with `K > k` avoids.
///
/// # Source
/// \[MSG\], Section 5 (the "incremental algorithm"); docs/derivations.md
/// §5.7.
#[derive(Debug, Clone)]
pub struct IncrementalPca {
    k: usize,
    basis: Mat<f64>,
    values: Vec<f64>,
    t: usize,
}

impl IncrementalPca {
    /// An empty iterate for samples of dimension `dim` and target rank `k`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `k = 0` or `k ≥ dim`.
    pub fn new(dim: usize, k: usize) -> Result<Self, SolverError> {
        check_dims(dim, k)?;
        Ok(IncrementalPca { k, basis: Mat::zeros(dim, 0), values: Vec::new(), t: 0 })
    }

    /// Eigenvalues of the iterate (sums of squared sample norms, no `1/t`), **nonincreasing**,
    /// length `≤ k`.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.values
    }
}

impl StreamingPca for IncrementalPca {
    /// Saves the basis `(d, ≤ k)`, its eigenvalues and the sample count.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        state.put_matrix("incremental-basis", self.basis.as_ref());
        state.put_vector("incremental-values", &self.values);
        state.put_usize("incremental-t", self.t);
        Ok(())
    }

    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let values = state.vector("incremental-values", None)?;
        if values.len() > self.k {
            return Err(SolverError::Checkpoint {
                reason: format!("the saved incremental PCA has {} eigenvalues, more than k = {}", values.len(), self.k),
            });
        }
        self.basis = state.matrix("incremental-basis", Some((self.basis.nrows(), values.len())))?;
        self.values = values;
        self.t = state.usize("incremental-t")?;
        Ok(())
    }

    fn dim(&self) -> usize {
        self.basis.nrows()
    }

    fn k(&self) -> usize {
        self.k
    }

    fn observe(&mut self, x: &[f64]) -> Result<(), SolverError> {
        check_sample(x, self.dim())?;
        let update = rank_one_eigen_update(self.basis.as_ref(), &self.values, x, 1.0)?;
        let keep = update.values().len().min(self.k);
        self.basis = update.basis(self.basis.as_ref(), keep)?;
        self.values = update.values()[..keep].to_vec();
        self.t += 1;
        Ok(())
    }

    fn samples_seen(&self) -> usize {
        self.t
    }

    fn iterate_rank(&self) -> usize {
        self.values.len()
    }

    fn subspace(&self) -> Mat<f64> {
        self.basis.clone()
    }
}
