//! SKPCA's fit into eigenpairs for a kernel PCA model ([`KernelPca::fit_shard`] with
//! [`KpcaSolver::Skpca`]): the memory estimate, the sampler (over the distinct rows when rows
//! repeat), the iterations, the eigenpairs cut to the rank asked for, and the exact centring
//! statistics.

use rand::Rng;
use stolr_estimators::{
    Centered, ColumnSampling, DataRef, KernelSampler, RandomFourierFeatures, RandomMaclaurin, Weighted,
    kernel_row_means,
};
use stolr_lowrank::Eigenpairs;
use stolr_memory::f64_bytes;

use super::{KernelPca, KpcaWarning, SamplerKind, truncate_to_numerical_rank};
use crate::job::Shard;
use crate::kpca::distinct::{DistinctRows, LINEAR_COST_SHARE};
use crate::kpca::exact::KernelMeans;
use crate::kpca::{Skpca, SkpcaConfig, check_skpca_memory};
use crate::{Observer, SolverError, Stop, run};

#[cfg(doc)]
use super::KpcaSolver;

impl KernelPca {
    /// SKPCA on the rows of `shard` with `(config, sampler, features)`: this rank's rows of the
    /// eigenpairs, the kernel means when centred (on the rank that builds the model from every
    /// row, `all`, or each rank's entries when `local_model`), how the run stopped and the
    /// iterations run; the warnings of a rank below the one asked for go to `warnings`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fit_skpca(
        &self,
        shard: &Shard<'_>,
        all: Option<DataRef<'_>>,
        local_model: bool,
        (config, sampler, features): (&SkpcaConfig, &SamplerKind, &usize),
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
        warnings: &mut Vec<KpcaWarning>,
    ) -> Result<(Eigenpairs, Option<KernelMeans>, Stop, usize), SolverError> {
        let (comm, place) = (shard.comm, shard.place);
        let processes = comm.size();
        let name = self.solver.name();
        // Dense or sparse rows (one process); sparse ones stay sparse: the samplers' products
        // and kernel columns sum over the stored entries.
        let local = shard.data();
        // Every buffer of the run, the sampler's included, before any is allocated.
        let (n, d) = local.shape();
        stolr_memory::check_iterations(self.memory, "iterations", config.iterations)?;
        let a = sampler.draw_rank(*features);
        let sampler_bytes = if local.is_sparse() {
            // The frequencies (signs) of the stored columns only, the entries' places
            // among them, and the sparse copy a prepared kernel keeps.
            let nnz = local.stored();
            sampler
                .buffer_bytes(n, d.min(nnz), *features)
                .saturating_add(24u64.saturating_mul(nnz as u64))
                .saturating_add(local.bytes())
        } else {
            sampler.buffer_bytes(n, d, *features)
        };
        // Sharded column sampling assembles the sampled rows `(k, d)` on every rank and
        // its kernel shifts a copy of them: `16·k·d` bytes per draw.
        let sampled_rows = if processes > 1 && !sampler.is_symmetric_psd() { f64_bytes(&[2, *features, d]) } else { 0 };
        let sampler_bytes = sampler_bytes.saturating_add(sampled_rows);
        let psd = sampler.is_symmetric_psd();
        check_skpca_memory(n, place.total, a, psd, config, sampler_bytes, self.memory)?;
        // One process, features of one row each: rows that repeat are drawn once, and
        // the draws weighted by the rows' counts (the same iterates to rounding).
        let distinct = if processes == 1 && matches!(sampler, SamplerKind::Rff | SamplerKind::Maclaurin) {
            let committed = crate::skpca_memory_estimate(n, place.total, a, psd, config).saturating_add(sampler_bytes);
            DistinctRows::worth_grouping(local, LINEAR_COST_SHARE, self.rank.unwrap_or(a), self.memory, committed)
        } else {
            None
        };
        let drawn = distinct.as_ref().map_or(local, DistinctRows::data);
        let inner: Box<dyn KernelSampler + '_> = match sampler {
            // Rows shifted to their coordinate-wise median: accurate features far from the
            // origin, the same kernel estimate (the model uses the kernel, not the features).
            // Every rank shifts by one centre, rank 0's median (over every row: the
            // distinct rows are shifted by the median of all of them).
            SamplerKind::Rff if processes == 1 => {
                let all = RandomFourierFeatures::new(local, self.kernel, *features)?.centred();
                match &distinct {
                    None => Box::new(all),
                    Some(_) => {
                        let centre = all.centre().map_or_else(|| vec![0.0; d], <[f64]>::to_vec);
                        Box::new(RandomFourierFeatures::new(drawn, self.kernel, *features)?.centred_at(centre)?)
                    }
                }
            }
            SamplerKind::Rff => {
                let rff = RandomFourierFeatures::new(local, self.kernel, *features)?;
                let rff = if comm.is_root() { rff.centred() } else { rff };
                let mut centre = rff.centre().map_or_else(|| vec![0.0; d], <[f64]>::to_vec);
                comm.broadcast(&mut centre, 0);
                Box::new(rff.centred_at(centre)?)
            }
            // Sampled column indices over the global n, their rows assembled from their
            // owners (one process: the rows themselves).
            SamplerKind::Columns | SamplerKind::ColumnsSym => Box::new(
                ColumnSampling::new(local, self.kernel, *features, *sampler == SamplerKind::ColumnsSym)?
                    .sharded(comm, place)?,
            ),
            SamplerKind::Maclaurin => Box::new(RandomMaclaurin::new(drawn, self.kernel, *features)?),
        };
        // Centring by the column means over every rank's rows (sums in rank order), or
        // over every row through the counts.
        let sampler: Box<dyn KernelSampler + '_> = match (&distinct, self.center) {
            (Some(rows), center) => Box::new(Weighted::new(inner, rows.counts().to_vec(), center)?),
            (None, false) => inner,
            (None, true) => Box::new(Centered::sharded(inner, comm, place.total)),
        };
        let mut solver = Skpca::new(config.clone(), sampler)?.sharded(comm, place.first)?;
        let stop = run(&mut solver, rng, observer)?;
        let mut pairs = solver.eigenpairs()?;
        let iterations = solver.iterations_done();
        drop(solver);
        if let Some(rows) = &distinct {
            pairs = rows.eigenpairs_of_every_row(pairs);
        }
        if let Some(r) = self.rank {
            pairs.truncate(r);
        }
        let found = pairs.rank();
        truncate_to_numerical_rank(&mut pairs);
        if pairs.rank() == 0 {
            return Err(SolverError::RankCollapsed { tau: config.tau, iterations });
        }
        if let Some(r) = self.rank
            && pairs.rank() < r
        {
            warnings.push(KpcaWarning::BelowTau { requested: r, returned: pairs.rank(), tau: config.tau });
        } else if pairs.rank() < found {
            // No rank was asked for: the pairs above τ that are numerically zero.
            warnings.push(KpcaWarning::RankDeficient { requested: found, returned: pairs.rank(), solver: name });
        }
        // The centring statistics are exact: one streamed pass over K, O(n²d), on the
        // rank that builds the model from every row (rank 0; the rows themselves on one
        // process), as one process computes them.
        let means = match (self.center, all) {
            // A model in parts: each rank's entries, its rows meeting every rank's.
            (true, _) if local_model && processes > 1 => Some(crate::kpca::kernel_row_means_sharded(
                shard.dense("SKPCA's kernel means on rows split across processes")?,
                &self.kernel,
                place.total,
                comm,
            )),
            (true, Some(x)) if processes > 1 => Some(kernel_row_means(x, &self.kernel)),
            (true, _) if processes == 1 => Some(kernel_row_means(local, &self.kernel)),
            _ => None,
        };
        Ok((pairs, means, stop, iterations))
    }
}
