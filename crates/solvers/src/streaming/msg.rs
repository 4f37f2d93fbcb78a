//! Matrix stochastic gradient (MSG) and capped MSG for streaming PCA (\[MSG\]).

use faer::{Mat, MatRef};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use stolr_lowrank::{block_eigen_update, mixture_decomposition, project_capped_rank, project_capped_simplex};

use crate::streaming::msg_basis::{BLOCK_ROWS, Block, RotatedBasis, gram_eigen_update};
use crate::streaming::{Schedule, StepSize, StreamingPca, all_finite, check_batch, check_dims, check_sample, norm_sq};
use crate::{SolverError, SolverState};

/// Configuration of [`Msg`]: plain MSG (`cap = None`) or capped MSG (`cap = Some(K)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MsgConfig {
    /// Dimension `d` of the samples.
    pub dim: usize,
    /// Target rank `k`, `1 ≤ k < d`; the iterate has trace `k`.
    pub k: usize,
    /// Rank cap `K ≥ k` of capped MSG (\[MSG\], problem (5.1)); `None` is plain MSG, whose
    /// rank may grow up to `d`.
    pub cap: Option<usize>,
    /// Step size `η_t`.
    pub step: StepSize,
}

impl MsgConfig {
    /// Default scale `c` of the step size: the `c` that capped MSG chose on the MNIST
    /// validation split of our reproduction of \[MSG\], Section 6 (grid `2⁻¹²…2⁵`, data with
    /// `E‖x‖² = 1`): `2⁻¹` for k = 4 and 8, `2⁻²` for k = 1 (see `docs/msg.md`).
    pub const DEFAULT_C: f64 = 0.5;

    /// Plain MSG with `η_t = c/(√t · mean ‖x‖²)` and `c` = [`MsgConfig::DEFAULT_C`].
    pub fn msg(dim: usize, k: usize) -> Self {
        MsgConfig { dim, k, cap: None, step: StepSize::ScaleFree { c: Self::DEFAULT_C } }
    }

    /// Capped MSG with the paper's recommended cap `K = k + 1` and the default step size.
    pub fn capped(dim: usize, k: usize) -> Self {
        MsgConfig { cap: Some(k + 1), ..Self::msg(dim, k) }
    }

    fn validate(&self) -> Result<(), SolverError> {
        check_dims(self.dim, self.k)?;
        self.step.validate()?;
        if let Some(cap) = self.cap
            && (cap < self.k || cap > self.dim)
        {
            return Err(SolverError::InvalidConfig {
                name: "cap K",
                reason: format!("must satisfy k = {} ≤ K ≤ d = {}, got {cap}", self.k, self.dim),
            });
        }
        Ok(())
    }
}

/// MSG or capped MSG: projected stochastic gradient ascent on `max E[xᵀMx]` over
/// `{0 ⪯ M ⪯ I, tr M = k}` (and `rank M ≤ K` when capped), one sample at a time.
///
/// The iterate is `M_t = U diag(σ) Uᵀ` with `U` of shape `(d, m)` orthonormal and
/// `σ` nonincreasing in `(0, 1]`, `Σσ = k`. `U` is held as `V R` (a frame `V` `(d, p)`, `p ≤ m + 8`,
/// and a small rotation `R`, folded into `V` every few samples), so a sample costs `O(m d)`
/// time on average instead of the `O(m² d)` of forming `U` each time; memory is `O(m d)`
/// (`m ≤ K` when capped). Given the rows that follow ([`StreamingPca::observe_ahead`], as
/// [`crate::StreamPass`] and [`StreamingPca::observe_batch`] give them), up to 16 rows are
/// projected together by matrix products and then update the iterate one at a time in a
/// small basis (docs/derivations.md §5.3): the same iterates up to rounding, and on MNIST
/// about a sixth more samples per second from the CLI.
///
/// The iterate starts feasible at `U₀U₀ᵀ` with `U₀` a random orthonormal `(d, k)` basis
/// (docs/derivations.md §5.3: the paper's `M₀ = 0` would make the first iterate full rank).
///
/// # Source
/// \[MSG\], Section 3 (update (3.4)), Algorithm 1 (the efficient
/// step), Lemma 3.2 (projection) and Section 5 (capped MSG); docs/derivations.md §5.2–§5.6.
#[derive(Debug, Clone)]
pub struct Msg {
    config: MsgConfig,
    basis: RotatedBasis,
    values: Vec<f64>,
    schedule: Schedule,
    work: f64,
}

impl Msg {
    /// Builds the solver at the feasible start `U₀U₀ᵀ`, `U₀ = qr(G)`, `G` a `(d, k)` standard
    /// Gaussian matrix drawn from `rng`.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `k = 0` or `k ≥ d`; [`SolverError::InvalidConfig`]
    /// for `K < k`, `K > d` or a step scale `c ≤ 0`.
    pub fn new<R: Rng + ?Sized>(config: MsgConfig, rng: &mut R) -> Result<Self, SolverError> {
        config.validate()?;
        let gaussian = Mat::from_fn(config.dim, config.k, |_, _| rng.sample::<f64, _>(StandardNormal));
        let (basis, _) = stolr_lowrank::thin_qr(gaussian.as_ref());
        Ok(Msg {
            config,
            basis: RotatedBasis::new(basis),
            values: vec![1.0; config.k],
            schedule: Schedule::default(),
            work: 0.0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MsgConfig {
        &self.config
    }

    /// Eigenvalues `σ` of the iterate, **nonincreasing**, in `(0, 1]`, summing to `k`;
    /// length `k_t`.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.values
    }

    /// Eigenvectors of the iterate, shape `(d, k_t)`, orthonormal, in the order of
    /// [`Msg::eigenvalues`] (formed from the frame and its rotation, `O(d k_t p)`).
    pub fn basis(&self) -> Mat<f64> {
        self.basis.leading(self.values.len())
    }

    /// The paper's runtime proxy `Σ_{s≤t} k_s²` (\[MSG\], Section 6), with `k_s` the rank
    /// of the iterate the `s`-th update started from.
    pub fn work(&self) -> f64 {
        self.work
    }

    /// A rank-`k` projection drawn from the mixture decomposition of the current iterate
    /// (Lemma 3.1): returns `U_S`, shape `(d, k)`, orthonormal, with `E[U_S U_Sᵀ] = M_t`.
    ///
    /// The paper rounds the average `M̄ = (1/T)Σ M_t`; that average is not low-rank, so we
    /// round the last iterate instead (the experiments of Section 6 score the last iterate's
    /// top-`k` eigenvectors, as [`StreamingPca::subspace`] does).
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if the eigenvalues have drifted off the capped simplex.
    pub fn round<R: Rng + ?Sized>(&self, rng: &mut R) -> Result<Mat<f64>, SolverError> {
        let corners = mixture_decomposition(&self.values, self.config.k, 1e-8)?;
        let draw: f64 = rng.random();
        let mut acc = 0.0;
        let chosen = corners
            .iter()
            .find(|c| {
                acc += c.weight;
                draw < acc
            })
            .unwrap_or_else(|| corners.last().expect("a decomposition has at least one corner"));
        let basis = self.basis();
        Ok(Mat::from_fn(self.config.dim, self.config.k, |i, j| basis[(i, chosen.indices[j])]))
    }
}

impl Msg {
    /// The projection of the updated eigenvalues `values` (nonincreasing) onto the feasible set
    /// (capped: of the top `K`), without the eigenvalues projected to zero.
    fn project(&self, values: &[f64]) -> Result<Vec<f64>, SolverError> {
        let d = self.config.dim;
        let mut projected = match self.config.cap {
            Some(cap) => project_capped_rank(values, d, cap, self.config.k as f64)?,
            None => project_capped_simplex(values, d - values.len(), self.config.k as f64)?,
        }
        .values;
        // The start is feasible, so tr(M + ηxxᵀ) ≥ k and the shift S ≤ 0: implicit zero
        // eigenvalues stay at zero (up to rounding, which we drop).
        let keep = projected.iter().take_while(|&&v| v > 0.0).count();
        projected.truncate(keep);
        Ok(projected)
    }
}

impl StreamingPca for Msg {
    /// Saves the eigenvectors as their frame `(d, p)` (`msg-basis`) and rotation `(p, m)`
    /// (`msg-rotation`; `(p + b, m)` with an open block of `b` rows, saved as `msg-block-*`),
    /// the eigenvalues of `M_t`, the schedule and the work count, so that a resumed run
    /// repeats the same bits.
    fn save_state(&self, state: &mut SolverState) -> Result<(), SolverError> {
        let (frame, rotation, block) = self.basis.parts();
        state.put_matrix("msg-basis", frame);
        state.put_matrix("msg-rotation", rotation);
        if let Some(block) = block {
            let b = block.roots.len();
            state.put_matrix("msg-block-rows", MatRef::from_row_major_slice(&block.rows, b, self.config.dim));
            state.put_vector("msg-block-roots", &block.roots);
            state.put_vector("msg-block-norms", &block.norms);
            state.put_matrix("msg-block-inside", block.inside.as_ref());
            state.put_matrix("msg-block-factor", block.factor.as_ref());
            state.put_usize("msg-block-next", block.next);
        }
        state.put_vector("msg-values", &self.values);
        state.put_f64("msg-work", self.work);
        self.schedule.save(state, "msg");
        Ok(())
    }

    /// Restores what [`StreamingPca::save_state`] wrote; a state without `msg-rotation` (saved
    /// before the basis was held as a frame and a rotation) has the eigenvectors themselves in
    /// `msg-basis`.
    fn restore_state(&mut self, state: &SolverState) -> Result<(), SolverError> {
        let values = state.vector("msg-values", None)?;
        let cap = self.config.cap.unwrap_or(self.config.dim);
        if values.len() > cap || values.iter().any(|v| !(v.is_finite() && (0.0..=1.0).contains(v))) {
            return Err(SolverError::Checkpoint {
                reason: "the saved MSG eigenvalues are not in [0, 1] or too many".into(),
            });
        }
        let m = values.len();
        let d = self.config.dim;
        let basis = if state.has("msg-rotation") {
            let rotation = state.matrix("msg-rotation", None)?;
            let block = if state.has("msg-block-rows") { Some(restore_block(state, d)?) } else { None };
            let b = block.as_ref().map_or(0, |block| block.roots.len());
            let p = rotation.nrows().saturating_sub(b);
            // Orthonormal columns: at least m rows (inside a block the rank may have grown past
            // the frame's p columns, by one a row).
            if rotation.ncols() != m || rotation.nrows() < m.max(b) || rotation.nrows() > d {
                return Err(SolverError::Checkpoint {
                    reason: format!(
                        "the saved MSG rotation is {} × {}, expected (p + {b}) × {m} with {m} ≤ p + {b} ≤ d",
                        rotation.nrows(),
                        rotation.ncols()
                    ),
                });
            }
            if let Some(block) = &block
                && block.inside.nrows() != p
            {
                return Err(SolverError::Checkpoint {
                    reason: format!("the saved MSG block has {} frame rows, expected {p}", block.inside.nrows()),
                });
            }
            RotatedBasis::from_parts(state.matrix("msg-basis", Some((d, p)))?, rotation, block)
        } else {
            RotatedBasis::new(state.matrix("msg-basis", Some((d, m)))?)
        };
        let work = state.f64("msg-work")?;
        self.schedule = Schedule::load(state, "msg")?;
        self.basis = basis;
        self.values = values;
        self.work = work;
        Ok(())
    }

    fn dim(&self) -> usize {
        self.config.dim
    }

    fn k(&self) -> usize {
        self.config.k
    }

    /// One MSG step `M ← P(M + η_t x xᵀ)`: the rank-one eigen-update, then the projection of
    /// the eigenvalues (capped: of the top `K`), dropping eigenpairs projected to zero.
    fn observe(&mut self, x: &[f64]) -> Result<(), SolverError> {
        self.observe_ahead(x, &[])
    }

    /// Up to 15 rows after `x` while no block is open, none inside one.
    fn lookahead(&self) -> usize {
        if self.basis.in_block() { 0 } else { BLOCK_ROWS - 1 }
    }

    /// [`StreamingPca::observe`] of `x`; when `x` is not the next row of an open block and
    /// rows follow, `x` and the finite rows after it (up to 16 in all) open a block: their
    /// projections on the basis are taken together (`O(d b m)` in matrix products, module
    /// docs of the basis), and this and the next calls update the iterate from them.
    fn observe_ahead(&mut self, x: &[f64], upcoming: &[&[f64]]) -> Result<(), SolverError> {
        let d = self.config.dim;
        // The open block's next row (the same bits) was checked when the block opened.
        if !self.basis.expects(x) {
            check_sample(x, d)?;
            self.basis.end_block();
            if !upcoming.is_empty() {
                let mut rows = Vec::with_capacity(BLOCK_ROWS);
                rows.push(x);
                rows.extend(
                    upcoming.iter().take(BLOCK_ROWS - 1).take_while(|r| r.len() == d && all_finite(r)).copied(),
                );
                let mut schedule = self.schedule;
                let etas: Vec<f64> = rows.iter().map(|r| schedule.next(self.config.step, norm_sq(r))).collect();
                self.basis.start_block(&rows, &etas);
            }
        }
        let mut schedule = self.schedule;
        let eta = schedule.next(self.config.step, norm_sq(x));
        let update = self.basis.prepare(&self.values, x, eta)?;
        let projected = self.project(&update.values)?;
        self.basis.commit(&update, projected.len());
        self.work += (self.values.len() * self.values.len()) as f64;
        self.values = projected;
        self.schedule = schedule;
        Ok(())
    }

    /// The rows of `batch` `(b, d)` one at a time, each told the (up to 15) rows after it, so
    /// that they are taken in blocks as by [`StreamingPca::observe_ahead`]. Every row is
    /// checked before any is used.
    fn observe_batch(&mut self, batch: MatRef<'_, f64>) -> Result<(), SolverError> {
        let d = self.config.dim;
        check_batch(batch, d)?;
        let n = batch.nrows();
        // A window of the next rows, row-major (16 d doubles).
        let mut window = Vec::with_capacity(BLOCK_ROWS * d);
        for i in 0..n {
            let ahead = if self.lookahead() > 0 { (n - i).min(BLOCK_ROWS) } else { 1 };
            window.clear();
            for r in i..i + ahead {
                window.extend((0..d).map(|j| batch[(r, j)]));
            }
            if ahead == 1 {
                self.observe_ahead(&window, &[])?;
            } else {
                let rows: Vec<&[f64]> = window.chunks_exact(d.max(1)).collect();
                self.observe_ahead(rows[0], &rows[1..])?;
            }
        }
        Ok(())
    }

    /// One mini-batch step `M ← P(M + Σᵢ η_{t+i} xᵢ xᵢᵀ)` for the rows `xᵢ` of `batch`
    /// `(b, d)`: each sample gets the step size it would get one at a time (the schedule
    /// advances sample by sample), the `b` terms are added at once by a rank-`b` eigen-update
    /// (capped MSG: through the Gram matrix of the batch and the basis, `O(d b (m + b))` and an
    /// `(m + b)`-dimensional eigenproblem, forming only the `K` kept eigenvectors; plain MSG, or
    /// a kept eigenvalue below `1e-6` of the largest: [`stolr_lowrank::block_eigen_update`],
    /// `O(d (m + b)²)`), and the eigenvalues are projected once. It differs from `b` calls of
    /// [`StreamingPca::observe`] only by skipping the `b − 1` projections in between; a batch of
    /// one row is that call. The work count adds `b m²`.
    fn observe_minibatch(&mut self, batch: MatRef<'_, f64>) -> Result<(), SolverError> {
        if batch.nrows() <= 1 {
            return self.observe_batch(batch);
        }
        check_batch(batch, self.config.dim)?;
        let mut schedule = self.schedule;
        let mut row = vec![0.0; self.config.dim];
        let etas: Vec<f64> = (0..batch.nrows())
            .map(|i| {
                row.iter_mut().enumerate().for_each(|(j, r)| *r = batch[(i, j)]);
                schedule.next(self.config.step, norm_sq(&row))
            })
            .collect();
        self.basis.fold();
        let (u, _, _) = self.basis.parts();
        // Capped MSG keeps at most K eigenvectors: the Gram route forms only those (the QR
        // route when one of them is too small for it, and for plain MSG, which keeps many).
        let gram = match self.config.cap {
            Some(_) => {
                let update = gram_eigen_update(u, &self.values, batch, &etas)?;
                let projected = self.project(&update.values)?;
                update.basis(u, &self.values, batch, &etas, projected.len()).map(|basis| (projected, basis))
            }
            None => None,
        };
        let (projected, basis) = match gram {
            Some(done) => done,
            None => {
                let update = block_eigen_update(u, &self.values, batch, &etas)?;
                let projected = self.project(update.values())?;
                let basis = update.basis(projected.len())?;
                (projected, basis)
            }
        };
        self.basis.replace(basis);
        self.work += (batch.nrows() * self.values.len() * self.values.len()) as f64;
        self.values = projected;
        self.schedule = schedule;
        Ok(())
    }

    fn samples_seen(&self) -> usize {
        self.schedule.t
    }

    fn iterate_rank(&self) -> usize {
        self.values.len()
    }

    fn subspace(&self) -> Mat<f64> {
        self.basis.leading(self.config.k.min(self.values.len()))
    }
}

/// The open block of a saved MSG state (`msg-block-*`), checked: `b ≤ 16` rows of length `d`,
/// finite, positive `√η` and norms, a `(p, b)` projection and a `(b, b)` upper triangular
/// factor with a positive diagonal, and `next < b`.
fn restore_block(state: &SolverState, d: usize) -> Result<Block, SolverError> {
    let rows = state.matrix("msg-block-rows", None)?;
    let b = rows.nrows();
    let roots = state.vector("msg-block-roots", Some(b))?;
    let norms = state.vector("msg-block-norms", Some(b))?;
    let inside = state.matrix("msg-block-inside", None)?;
    let factor = state.matrix("msg-block-factor", Some((b, b)))?;
    let next = state.usize("msg-block-next")?;
    // `state.matrix` has refused NaN and ±∞ in the matrices.
    let positive = |v: &f64| v.is_finite() && *v > 0.0;
    let triangular = (0..b).all(|j| factor[(j, j)] > 0.0 && (j + 1..b).all(|i| factor[(i, j)] == 0.0));
    if b == 0
        || b > BLOCK_ROWS
        || rows.ncols() != d
        || next >= b
        || inside.ncols() != b
        || !roots.iter().all(positive)
        || !norms.iter().all(positive)
        || !triangular
    {
        return Err(SolverError::Checkpoint { reason: "the saved MSG block is damaged".into() });
    }
    let flat = (0..b).flat_map(|i| (0..d).map(move |j| (i, j))).map(|(i, j)| rows[(i, j)]).collect();
    Ok(Block { rows: flat, roots, norms, inside, factor, next })
}
