//! The Gram matrix of SLKL's `M` candidate columns and of the targets, formed once, so that
//! the probe of a coordinate costs $O(p^2)$ instead of a kernel column ($O(nd)$) and its
//! products with the `p` active columns ($O(np)$).
//!
//! Every quantity a probe needs from a column $k_l$ is an inner product of two fixed vectors:
//! $q = V^\top k_l$ (the active columns are other landmarks' columns), $k_l^\top y$ and
//! $k_l^\top k_l$. With $C = [K_J\ y]^\top [K_J\ y]$, `(M + 1, M + 1)`, they are read off `C`
//! (docs/derivations.md §6.8, "Any i ∈ J", with the sums over the rows done once); the
//! formulas of [`WoodburyInverse::probe`](stolr_lowrank::WoodburyInverse::probe) are then
//! unchanged, so the run agrees with the per-probe products up to their rounding. The columns
//! are the ones the solver uses (centred, scaled by the square roots of the sample weights),
//! formed row block by row block (on the fly: never more than one block of them at once).

use faer::reborrow::*;
use faer::{Mat, MatMut};
use stolr_comm::all_reduce_lower;
use stolr_lowrank::{Probe, gram_blocks_bytes, gram_of_row_blocks};

use stolr_memory::MemoryBudget;

use super::Slkl;
use crate::SolverError;

/// Rows per block of the Gram matrix's accumulation.
const GRAM_BLOCK_ROWS: usize = 256;

/// Bytes SLKL's Gram matrix needs for `m` landmarks: the accumulation over row blocks
/// ([`gram_blocks_bytes`] of width `m + 1`), the buffer of its sum across ranks
/// (`(m + 1)(m + 2)/2` doubles) and a row-major copy of the landmark rows (`m·d`).
pub(super) fn gram_bytes(m: usize, d: usize) -> u64 {
    let w = m as u64 + 1;
    gram_blocks_bytes(m + 1, GRAM_BLOCK_ROWS)
        .saturating_add(8u64.saturating_mul(w.saturating_mul(w + 1) / 2))
        .saturating_add(8u64.saturating_mul(m as u64).saturating_mul(d as u64))
}

/// How [`Slkl`]'s probe of a coordinate was formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probed {
    /// Active coordinate: no probe to reuse.
    No,
    /// From the column, which is in the column buffer.
    Column,
    /// From the Gram matrix; the column was not formed.
    Products,
}

impl Slkl<'_> {
    /// Sets the memory budget (default [`MemoryBudget::default`]) that the Gram matrix of the
    /// `M` landmark columns and the targets, $[K_J\ y]^\top [K_J\ y]$, is checked against when
    /// the first [`update`](Self::update) or [`set_weight`](Self::set_weight) forms it: about $8(M+1)^2(L + 2) + 8 \cdot 256 (M+1) L$
    /// bytes with `L ≤ 4` accumulation lanes (`stolr_lowrank::gram_blocks_bytes`), formed in
    /// $O(nM^2)$ (plus the `nM` kernel values on the fly). With it, the products a probe needs are
    /// read off it and an inactive landmark costs $O(p^2)$ instead of $O(nd + np)$; when it
    /// does not fit on every rank, each probe computes them from the column instead (the same
    /// results up to rounding). Call it before the first update to take effect.
    pub fn set_memory_budget(&mut self, memory: MemoryBudget) {
        self.memory = memory;
    }

    /// Whether the Gram matrix of the landmark columns is in use (see
    /// [`Slkl::set_memory_budget`]): `false` before the first update or
    /// [`set_weight`](Self::set_weight) and when it did not fit.
    pub fn uses_gram(&self) -> bool {
        self.gram.is_some()
    }

    /// Forms the Gram matrix at the first call if it fits the memory budget
    /// ([`Slkl::set_memory_budget`]) on every rank (one collective sum of a flag, then the
    /// lower triangle of `C` summed across ranks); later calls do nothing. Cost $O(nM^2)$ (+
    /// `nM` kernel values on the fly), memory [`gram_bytes`].
    pub(super) fn ensure_gram(&mut self) {
        if self.gram_checked {
            return;
        }
        self.gram_checked = true;
        let (m, d) = (self.mu.len(), self.d);
        let fits = self.memory.check("", gram_bytes(m, d)).is_ok();
        let mut agreed = [if fits { 1.0 } else { 0.0 }];
        self.comm.all_reduce_sum(&mut agreed);
        if agreed[0] < self.comm.size() as f64 {
            return;
        }
        let mut gram = self.local_gram();
        all_reduce_lower(self.comm, &mut gram);
        self.gram = Some(gram);
    }

    /// $[K_J\ y]^\top [K_J\ y]$ over this rank's rows (lower triangle; the upper is zero), the
    /// columns as [`Slkl::fill_column`] forms them and `y` the Woodbury state's targets.
    fn local_gram(&self) -> Mat<f64> {
        let (m, d, rows) = (self.mu.len(), self.d, self.shard.rows);
        let y = self.state.y();
        let means = self.centring.as_ref().map(|(_, means)| means.as_slice());
        let mean = |l: usize| means.map_or(0.0, |means| means[l]);
        let scale = self.scale.as_deref();
        let kernel = self.kernel;
        // Row-major landmark rows for the dense on-the-fly columns.
        let landmarks: Vec<f64> = match (&self.rows, self.landmark_rows.dense()) {
            (Some(_), Some(lr)) => (0..m).flat_map(|l| (0..d).map(move |c| lr[(l, c)])).collect(),
            _ => Vec::new(),
        };
        let (columns, dense_rows, sparse_rows) =
            (self.columns.as_ref(), self.rows.as_deref(), self.sparse_rows.as_ref());
        let landmark_rows = &self.landmark_rows;
        let fill = |start: usize, mut block: MatMut<'_, f64>| {
            let len = block.nrows();
            if let Some(cols) = columns {
                for l in 0..m {
                    let src = &cols.col_as_slice(l)[start..start + len];
                    block.rb_mut().col_mut(l).iter_mut().zip(src).for_each(|(b, v)| *b = *v);
                }
            } else if let Some(x) = dense_rows {
                for l in 0..m {
                    let (xi, mu) = (&landmarks[l * d..(l + 1) * d], mean(l));
                    let mut col = block.rb_mut().col_mut(l);
                    for i in 0..len {
                        let r = start + i;
                        let v = kernel.eval(&x[r * d..(r + 1) * d], xi) - mu;
                        col[i] = match scale {
                            Some(s) => v * s[r],
                            None => v,
                        };
                    }
                }
            } else if let Some(x) = sparse_rows {
                let k = kernel.cross(x.data().subrows(start, len), landmark_rows.data());
                for l in 0..m {
                    let mu = mean(l);
                    let mut col = block.rb_mut().col_mut(l);
                    for i in 0..len {
                        let v = k[(i, l)] - mu;
                        col[i] = match scale {
                            Some(s) => v * s[start + i],
                            None => v,
                        };
                    }
                }
            }
            block.rb_mut().col_mut(m).iter_mut().zip(&y[start..start + len]).for_each(|(b, v)| *b = *v);
        };
        gram_of_row_blocks(rows, m + 1, GRAM_BLOCK_ROWS, fill)
    }

    /// Fills `probe` for landmark `l` (index into `J`) from the Gram matrix: $q_j = k_{a_j}^\top
    /// k_l$ for the active landmarks $a_j$ in their Woodbury order, $k_l^\top y$ and $k_l^\top
    /// k_l$, then [`WoodburyInverse::probe_from_products`](stolr_lowrank::WoodburyInverse::probe_from_products).
    /// Returns `false` (and leaves `probe` alone) without a Gram matrix. Cost $O(p^2)$, no
    /// allocation once `probe`'s buffers have grown to `p`; sends nothing.
    pub(super) fn gram_probe(&self, l: usize, probe: &mut Probe) -> Result<bool, SolverError> {
        let Some(gram) = &self.gram else {
            return Ok(false);
        };
        let entry = |a: usize, b: usize| if a >= b { gram[(a, b)] } else { gram[(b, a)] };
        probe.q.clear();
        probe.q.extend(self.active.iter().map(|&a| entry(a, l)));
        let m = self.mu.len();
        self.state.probe_from_products(probe, entry(m, l), entry(l, l))?;
        Ok(true)
    }
}
