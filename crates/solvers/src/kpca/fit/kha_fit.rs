//! KHA's fit into a kernel PCA model ([`KernelPca::fit_shard`] with [`KpcaSolver::Kha`]): the
//! memory estimate, the iterations, the Rayleigh–Ritz step, and the model on rank 0 or in parts.

use rand::Rng;
use stolr_comm::gather_rows;
use stolr_model::Standardization;

use super::{KernelPca, KernelPcaFit, KpcaWarning, Rows, gather_pairs, local_entries, unreachable_on_one_process};
use crate::ModelRows;
use crate::job::Shard;
use crate::kpca::{KernelCentering, KernelPcaModel, Kha, KhaConfig};
use crate::{Observer, SolverError, run};

#[cfg(doc)]
use super::KpcaSolver;

impl KernelPca {
    /// KHA on the rows of `shard` (one process: dense or sparse, kept sparse; several: dense,
    /// [`Kha::new_sharded`]), ended by its Rayleigh–Ritz step; the eigenvectors and the model's
    /// coefficients gathered to rank 0, which builds the model on `all` (its copy of every
    /// row). `None` on the other ranks.
    pub(super) fn fit_kha(
        &self,
        shard: &Shard<'_>,
        rows: Rows<'_>,
        standardization: Option<Standardization>,
        (eta, iterations, init_scale): (f64, usize, f64),
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<Option<KernelPcaFit>, SolverError> {
        let (comm, place, x) = (shard.comm, shard.place, shard.data());
        let name = self.solver.name();
        let mut warnings = Vec::new();
        let config = KhaConfig {
            rank: self.rank_for(name)?,
            eta,
            iterations,
            center: self.center,
            init_scale,
            ..KhaConfig::new(1, 1)
        };
        // The coefficients A (n, r), their update, and the Rayleigh–Ritz step's n × r
        // blocks (H A, K̃ H A and its scaled copy, the SVD's basis, Q, K̃ Q, the
        // eigenvectors, K̃ U and the model coefficients), plus the row-major copy of the
        // data (n, d), the kernel operator of the Rayleigh–Ritz products and the row
        // means (its prepared rows, two more n × d copies) and a 256-row block of K. On
        // several ranks, also the gathered copy of every row (n × d).
        let (n, d) = (place.total, x.ncols());
        stolr_memory::check_iterations(self.memory, "iterations", config.iterations)?;
        let workers = stolr_estimators::KernelOperator::workers(faer::get_global_parallelism());
        // The copy of the rows in their form (sparse: the stored entries) and the operator's
        // prepared rows (counted as the dense operator's: an upper bound for sparse rows).
        let operator_bytes = if x.is_sparse() {
            x.bytes().saturating_mul(2).saturating_add(stolr_memory::f64_bytes(&[4, n]))
        } else if comm.size() > 1 {
            stolr_estimators::KernelOperator::bytes(n, d).saturating_add(stolr_memory::f64_bytes(&[2, n, d]))
        } else {
            stolr_estimators::KernelOperator::bytes(n, d)
        };
        self.memory.check(
            format!("KHA's n × r coefficients and Rayleigh–Ritz step (n = {n}, rank = {})", config.rank),
            stolr_memory::f64_bytes(&[11, n, config.rank])
                .saturating_add(x.bytes())
                .saturating_add(operator_bytes)
                .saturating_add(stolr_estimators::KernelOperator::apply_bytes(
                    n,
                    config.rank,
                    stolr_estimators::DEFAULT_TILE,
                    workers,
                ))
                .saturating_add(stolr_memory::f64_bytes(&[256, n])),
        )?;
        let rank = config.rank;
        let tolerance = config.tolerance;
        let mut solver = Kha::new_sharded(x, self.kernel, config, rng, comm, place)?;
        let stop = run(&mut solver, rng, observer)?;
        let ritz = solver.ritz()?;
        let iterations = solver.iterations_done();
        if ritz.pairs.rank() < rank {
            warnings.push(KpcaWarning::RankDeficient { requested: rank, returned: ritz.pairs.rank(), solver: name });
        }
        let max_residual = ritz.residuals.iter().copied().fold(0.0, f64::max);
        if !ritz.converged {
            warnings.push(KpcaWarning::NotConverged { solver: name, iterations, max_residual, tolerance });
        }
        let centering = KernelCentering::from_training_means(self.center.then(|| {
            let (m, all) = solver.kernel_means();
            (m.to_vec(), all)
        }));
        drop(solver);
        // This rank's part (its rows, coefficients and entries of the kernel means), or every
        // row's on rank 0.
        let (pairs, coefficients, x, centering) = match rows {
            Rows::Local => {
                let centering = match centering {
                    KernelCentering::Training { column_means, grand_mean } => {
                        KernelCentering::Training { column_means: local_entries(column_means, place), grand_mean }
                    }
                    other => other,
                };
                (ritz.pairs, ritz.coefficients, x, centering)
            }
            Rows::Gathered(all) => {
                let coefficients = gather_rows(comm, ritz.coefficients.as_ref(), 0);
                let (Some(pairs), Some(coefficients)) = (gather_pairs(comm, ritz.pairs), coefficients) else {
                    return Ok(None);
                };
                let x =
                    if comm.size() == 1 { x } else { all.ok_or_else(|| unreachable_on_one_process("rank 0's rows"))? };
                (pairs, coefficients, x, centering)
            }
        };
        let values = pairs.values.clone();
        let model = KernelPcaModel::new(
            name,
            self.kernel,
            standardization,
            ModelRows::copy_of(x),
            coefficients,
            values,
            centering,
        )?;
        let local_model = matches!(rows, Rows::Local);
        let model = if local_model && comm.size() > 1 { model.into_rank_part(place.total, comm)? } else { model };
        Ok(Some(KernelPcaFit {
            model,
            pairs,
            stop: Some(stop),
            iterations,
            exact_operator: None,
            converged: Some(ritz.converged),
            max_residual: Some(max_residual),
            warnings,
        }))
    }
}
