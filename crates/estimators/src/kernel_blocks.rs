//! The cross-kernel matrix between many rows and a few fixed rows, produced in row panels and
//! handed to the caller in a fixed order, so that it is never held whole.

use faer::{Mat, Par};
use rayon::prelude::*;

use crate::EstimatorError;
use crate::kernels::{Kernel, KernelEvaluation, PreparedKernel};
use crate::sparse::DataRef;

/// Rows of `X` per panel of [`CrossKernelPanels`]: the unit in which the cross kernel is
/// evaluated and in which callers accumulate, whatever the block size.
pub const PANEL_ROWS: usize = 256;

/// The cross-kernel matrix $C_{ij} = \kappa(x_i, y_j)$ of the rows of `x` `(n, d)` against a few
/// fixed rows `y` `(m, d)` (e.g. Nyström landmarks), delivered as transposed row panels
/// $C_{P,:}^\top$ `(m, |P|)` of [`PANEL_ROWS`] rows of `x` each, panel after panel in row order.
///
/// Panels are evaluated a block at a time: the panels of one block are computed in parallel
/// (one panel per task, each on one thread, following `faer::get_global_parallelism()`), then
/// handed to the caller in order. Every panel is computed by the same sequential code whatever
/// the block size and the number of threads, so its bits depend on neither; a caller that
/// accumulates panel after panel gets results independent of the block size, bit for bit.
///
/// `y` is prepared once as [`Kernel::cross`] prepares its first argument (Gaussian: shifted to
/// the coordinate-wise median of `y`, with the distances the expansion $\|x\|^2 + \|y\|^2 -
/// 2x^\top y$ could cancel recomputed directly, see [`KernelEvaluation`]); `x` is only read, a
/// panel at a time, and never copied whole. Memory: $8\,m\,(2d + b)$ bytes for a block of `b`
/// rows, plus $16\,d \cdot$ [`PANEL_ROWS`] per panel in flight.
///
/// # References
/// docs/derivations.md §1.5 (Nyström: the `n × m` block `C = K[:, I]`); \[SKPCA\], "Experimental
/// Setting" (Nyström baseline).
pub struct CrossKernelPanels<'a> {
    x: DataRef<'a>,
    prepared: PreparedKernel,
    m: usize,
}

impl<'a> CrossKernelPanels<'a> {
    /// Prepares the fixed rows `y` `(m, d)` against the rows of `x` `(n, d)`: $O(m d)$.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`] for invalid kernel parameters;
    /// [`EstimatorError::DimensionMismatch`] if `x` and `y` have different numbers of columns.
    pub fn new<'y>(
        kernel: &Kernel,
        x: impl Into<DataRef<'a>>,
        y: impl Into<DataRef<'y>>,
    ) -> Result<Self, EstimatorError> {
        Self::with_evaluation(kernel, KernelEvaluation::Expanded, x, y)
    }

    /// [`CrossKernelPanels::new`] with the kernel values evaluated as `evaluation` says
    /// ([`KernelEvaluation::Direct`]: a direct loop over the coordinates for every entry).
    ///
    /// # Errors
    /// As [`CrossKernelPanels::new`].
    pub fn with_evaluation<'y>(
        kernel: &Kernel,
        evaluation: KernelEvaluation,
        x: impl Into<DataRef<'a>>,
        y: impl Into<DataRef<'y>>,
    ) -> Result<Self, EstimatorError> {
        let (x, y) = (x.into(), y.into());
        kernel.validate()?;
        if x.ncols() != y.ncols() {
            return Err(EstimatorError::DimensionMismatch {
                what: "features of the fixed rows (one per column of the data)",
                expected: x.ncols(),
                found: y.ncols(),
            });
        }
        Ok(Self { x, prepared: PreparedKernel::with_evaluation(*kernel, y, evaluation), m: y.nrows() })
    }

    /// Number of rows `n` of `x`.
    pub fn n(&self) -> usize {
        self.x.nrows()
    }

    /// Number of fixed rows `m`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// `block_rows` rounded up to a whole number (at least one) of [`PANEL_ROWS`]: the rows
    /// [`CrossKernelPanels::for_each_block`] evaluates at once.
    pub fn rounded_block_rows(block_rows: usize) -> usize {
        block_rows.max(1).div_ceil(PANEL_ROWS).saturating_mul(PANEL_ROWS)
    }

    /// Evaluates every panel of `x` and hands it over, blocks of
    /// [`Self::rounded_block_rows`]`(block_rows)` rows in row order: for each block, first
    /// `map(panel)` on every panel of the block in parallel (right after the panel's kernel is
    /// evaluated, on the same thread), then `consume(panels)` once, with the block's panels in
    /// row order. [`Panel::kernel`] holds $C^\top$ `(m, len)` for rows `first_row ..
    /// first_row + len` (`len = PANEL_ROWS` except in the last panel of `x`); `map` may overwrite
    /// it and write what it derives into [`Panel::scratch`]. The buffers are reused from block to
    /// block. Stops at, and returns, the first error of `consume`.
    ///
    /// `map` should run sequentially (`Par::Seq`): the parallelism is across panels. Time
    /// $O(n\,m\,d)$ kernel evaluations; memory `8·m·block_rows` bytes of kernel panels plus the
    /// scratch `map` allocates (the caller should check both against its budget first).
    ///
    /// When a front end's stop hook reports a request ([`crate::interrupt`]: Ctrl-C in Python),
    /// the pass stops before the next block and returns `Ok`: the front end that asked discards
    /// the incomplete result. Without a hook it always runs to the end.
    ///
    /// # Errors
    /// The first error `consume` returns.
    pub fn for_each_block<E>(
        &self,
        block_rows: usize,
        map: impl Fn(&mut Panel) + Sync,
        consume: impl FnMut(&mut [Panel]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_block_reusing(block_rows, &mut Vec::new(), map, consume)
    }

    /// [`Self::for_each_block`] with the panels (and their scratch) taken from `panels` and
    /// left there for the next call: a caller that evaluates many small `x` against the same
    /// `m` fixed rows (a stream read block by block) allocates and zeroes them once, not once
    /// per call. Panels of another shape are replaced; the results are the same bits.
    ///
    /// # Errors
    /// The first error `consume` returns.
    pub fn for_each_block_reusing<E>(
        &self,
        block_rows: usize,
        panels: &mut Vec<Panel>,
        map: impl Fn(&mut Panel) + Sync,
        mut consume: impl FnMut(&mut [Panel]) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = self.n();
        let block = Self::rounded_block_rows(block_rows).min(n.next_multiple_of(PANEL_ROWS));
        let wanted = block / PANEL_ROWS;
        panels.retain(|p| p.kernel.nrows() == self.m && p.kernel.ncols() == PANEL_ROWS);
        while panels.len() < wanted {
            panels.push(Panel { first_row: 0, kernel: Mat::zeros(self.m, PANEL_ROWS), scratch: Mat::new() });
        }
        let parallel = faer::get_global_parallelism().degree() > 1;
        for start in (0..n).step_by(block.max(1)) {
            if crate::interrupt::poll() {
                // A stop was requested (Ctrl-C): the pass ends here and the front end that
                // asked discards the incomplete result.
                return Ok(());
            }
            let count = (n - start).min(block).div_ceil(PANEL_ROWS);
            let fill = |(p, panel): (usize, &mut Panel)| {
                panel.first_row = start + p * PANEL_ROWS;
                let rows = self.x.subrows(panel.first_row, PANEL_ROWS.min(n - panel.first_row));
                self.prepared.cross_into(rows, &mut panel.kernel, Par::Seq);
                map(panel);
            };
            let used = &mut panels[..count];
            if parallel && count > 1 {
                used.par_iter_mut().enumerate().for_each(fill);
            } else {
                used.iter_mut().enumerate().for_each(fill);
            }
            consume(used)?;
        }
        Ok(())
    }
}

/// One panel of [`CrossKernelPanels`]: rows `first_row .. first_row + kernel.ncols()` of `x`.
#[derive(Debug)]
pub struct Panel {
    /// Index of the panel's first row in `x`.
    pub first_row: usize,
    /// $C^\top$ for the panel's rows, shape `(m, len)`, `len ≤ PANEL_ROWS`.
    pub kernel: Mat<f64>,
    /// Free for the caller's `map` (empty at first, kept from block to block).
    pub scratch: Mat<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, d: usize, seed: f64) -> Mat<f64> {
        Mat::from_fn(n, d, |i, j| ((i * d + j) as f64 * seed).sin() * 2.0 + (j as f64) * 0.1)
    }

    #[test]
    fn panels_tile_the_cross_kernel_in_order_for_every_kernel_and_block_size() {
        let x = data(700, 5, 0.37);
        let y = data(9, 5, 0.71);
        let kernels = [Kernel::gaussian(1.3), Kernel::laplacian(2.0), Kernel::polynomial(5.0, 1.0, 3)];
        for kernel in kernels {
            let dense = kernel.cross(x.as_ref(), y.as_ref());
            let mut first: Option<Mat<f64>> = None;
            for block_rows in [1, 256, 300, 512, 4096] {
                let panels = CrossKernelPanels::new(&kernel, x.as_ref(), y.as_ref()).unwrap();
                let mut c = Mat::<f64>::zeros(700, 9);
                let mut next = 0;
                // `map` doubles each panel into its scratch; `consume` reads both.
                let map = |panel: &mut Panel| {
                    panel.scratch = Mat::from_fn(9, panel.kernel.ncols(), |j, i| 2.0 * panel.kernel[(j, i)])
                };
                panels
                    .for_each_block(block_rows, map, |block| {
                        for panel in block.iter() {
                            assert_eq!((panel.first_row, panel.kernel.nrows()), (next, 9));
                            for i in 0..panel.kernel.ncols() {
                                for j in 0..9 {
                                    assert_eq!(panel.scratch[(j, i)], 2.0 * panel.kernel[(j, i)]);
                                    c[(next + i, j)] = panel.kernel[(j, i)];
                                }
                            }
                            next += panel.kernel.ncols();
                        }
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                assert_eq!(next, 700);
                let err = (0..700)
                    .flat_map(|i| (0..9).map(move |j| (i, j)))
                    .map(|(i, j)| (c[(i, j)] - dense[(i, j)]).abs())
                    .fold(0.0, f64::max);
                let scale = (0..700).map(|i| dense[(i, 0)].abs()).fold(1.0, f64::max);
                assert!(err <= 1e-12 * scale, "{kernel:?}: {err}");
                match &first {
                    None => first = Some(c),
                    Some(f) => assert_eq!(f, &c, "{kernel:?}: block size {block_rows} changed the bits"),
                }
            }
        }
    }

    #[test]
    fn reused_panels_give_the_bits_of_fresh_ones_for_row_blocks_of_any_length() {
        let x = data(1500, 4, 0.53);
        let y = data(7, 4, 0.19);
        let kernel = Kernel::gaussian(0.9);
        let collect = |panels: &CrossKernelPanels<'_>, reused: Option<&mut Vec<Panel>>| {
            let mut out = Vec::new();
            let consume = |block: &mut [Panel]| {
                for panel in block.iter() {
                    out.extend(panel.kernel.col_iter().flat_map(|c| c.iter().copied().collect::<Vec<_>>()));
                }
                Ok::<(), ()>(())
            };
            match reused {
                Some(r) => panels.for_each_block_reusing(512, r, |_| {}, consume).unwrap(),
                None => panels.for_each_block(512, |_| {}, consume).unwrap(),
            }
            out
        };
        // Blocks of 700, 300 (a short last panel shrinks one kept panel) and 500 rows, as a
        // stream read in pieces gives them, against fresh panels for each piece.
        let mut reused = Vec::new();
        for (start, len) in [(0, 700), (700, 300), (1000, 500)] {
            let panels = CrossKernelPanels::new(&kernel, x.subrows(start, len), y.as_ref()).unwrap();
            let fresh = collect(&panels, None);
            assert_eq!(fresh.len(), len * 7);
            assert_eq!(collect(&panels, Some(&mut reused)), fresh, "rows {start}..{}", start + len);
        }
        // Panels for another number of fixed rows are replaced, not misused.
        let panels = CrossKernelPanels::new(&kernel, x.subrows(0, 300), y.subrows(0, 3)).unwrap();
        assert_eq!(collect(&panels, Some(&mut reused)), collect(&panels, None));
    }

    #[test]
    fn consume_errors_stop_the_pass_and_shapes_are_checked() {
        let x = data(600, 3, 0.2);
        let panels = CrossKernelPanels::new(&Kernel::gaussian(1.0), x.as_ref(), x.subrows(0, 4)).unwrap();
        let mut calls = 0;
        let out = panels.for_each_block(
            256,
            |_| {},
            |_| {
                calls += 1;
                Err("stop")
            },
        );
        assert_eq!((out, calls), (Err("stop"), 1));
        let wide = data(4, 5, 0.3);
        assert!(matches!(
            CrossKernelPanels::new(&Kernel::gaussian(1.0), x.as_ref(), wide.as_ref()),
            Err(EstimatorError::DimensionMismatch { expected: 3, found: 5, .. })
        ));
        assert!(matches!(
            CrossKernelPanels::new(&Kernel::gaussian(-1.0), x.as_ref(), x.as_ref()),
            Err(EstimatorError::InvalidKernel { .. })
        ));
    }
}
