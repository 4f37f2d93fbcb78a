//! The inverse $(\lambda I + V D V^\top)^{-1}$ kept in Woodbury form, with $O(p^2)$ updates when
//! one weight changes, a column leaves or a column enters: the low-rank state of SLKL.
//!
//! # References
//! \[SLKL\] (Machart et al.), (22)–(27), Theorems 2–3 and (30);
//! docs/derivations.md §6.8–§6.9 (checked in `tests/suite/woodbury.rs`).

use faer::{Mat, MatRef};
use stolr_comm::{Communicator, SingleProcess};

use crate::LowRankError;
use crate::error::{check_finite, check_finite_mat, check_shape};
use crate::spd::spd_inverse;
use crate::tall_products::tall_inner;

/// Below this, the Sherman–Morrison denominator `1 + δ Σ_jj` of a weight change (which lies in
/// `(μ_i b_i, ∞)` in exact arithmetic) has lost too many digits to cancellation; the state is
/// then rebuilt from scratch instead.
const DENOMINATOR_GUARD: f64 = 1e-6;

/// The two quadratic forms of one column `k` (length `n`) that SLKL's derivatives need, with
/// $G = (\lambda I + V D V^\top)^{-1}$.
///
/// # References
/// docs/derivations.md §6.6 ((20)–(21)) and §6.8 ("Any i ∈ J", "Active i").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnQuadratics {
    /// $k^\top G y$ (SLKL: $k_i^\top \alpha$ with $\alpha = G y$).
    pub k_g_y: f64,
    /// $k^\top G k \ge 0$ (clamped at 0 against rounding).
    pub k_g_k: f64,
}

/// The products of a column `k` (length `n`) with the current state, computed by
/// [`WoodburyInverse::probe`] in $O(np + p^2)$. Reused by [`WoodburyInverse::push_probed`] to
/// append `k` without recomputing them; a probe is tied to the state it was computed from and
/// goes stale at the next update.
///
/// # References
/// docs/derivations.md §6.8 ("Any i ∈ J") and §6.9, Case 4.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// $q = V^\top k$, length `p`.
    pub q: Vec<f64>,
    /// $u = \Sigma q$, length `p`.
    pub u: Vec<f64>,
    /// $k^\top y$.
    pub k_y: f64,
    /// $k^\top k$.
    pub k_k: f64,
    /// $k^\top G y = (k^\top y - q^\top \beta)/\lambda$ and
    /// $k^\top G k = (k^\top k - q^\top u)/\lambda$.
    pub quadratics: ColumnQuadratics,
    generation: u64,
}

impl Default for Probe {
    /// An empty probe that no state accepts (its generation is never reached): the reusable
    /// buffers for [`WoodburyInverse::probe_from_products`].
    fn default() -> Self {
        Self {
            q: Vec::new(),
            u: Vec::new(),
            k_y: 0.0,
            k_k: 0.0,
            quadratics: ColumnQuadratics { k_g_y: 0.0, k_g_k: 0.0 },
            generation: u64::MAX,
        }
    }
}

/// The inverse $G = (\lambda I + V D V^\top)^{-1}$, of size `n × n`, kept as
/// $G = (I - V \Sigma V^\top)/\lambda$ with $\Sigma = (\lambda D^{-1} + V^\top V)^{-1}$ (\[SLKL\],
/// (22)–(23), Woodbury's identity), together with one tracked right-hand side `y`.
///
/// `V` has shape `(n, p)` (SLKL: the active kernel columns $k_i$, unnormalised) and
/// $D = \mathrm{diag}(d)$ with `d_j > 0` (SLKL: $d_j = \mu_i / K_{ii}$). For `y` the state keeps
/// $v_y = V^\top y$ and $\beta = \Sigma v_y$, so that $G y = (y - V\beta)/\lambda$ and
/// $\lambda\, y^\top G y = y^\top y - v_y^\top \beta$.
///
/// Updates (docs/derivations.md §6.9), each followed by $\beta \leftarrow \Sigma v_y$ in $O(p^2)$:
/// - [`set_weight`](Self::set_weight): `d_j` changes, Sherman–Morrison on Σ, (25), $O(p^2)$;
/// - [`remove`](Self::remove): column `j` leaves, limit of (25) then delete row/column `j`, (26),
///   $O(p^2 + n)$ (the last column moves into slot `j`);
/// - [`push`](Self::push): a column enters, bordered (block) inverse, (27) and (30),
///   $O(np + p^2)$; the $O(np)$ part is $q = V^\top k$, unavoidable unless a [`Probe`] of the same
///   column is at hand ([`push_probed`](Self::push_probed), $O(n + p^2)$).
///
/// When a Sherman–Morrison denominator or a pivot has lost its digits to cancellation, and on
/// [`refresh`](Self::refresh), Σ is rebuilt from scratch by a Cholesky factorization in
/// $O(np^2 + p^3)$. Memory: $O(np + p^2 + n)$ (`V`, Σ and `y`).
///
/// **Rows sharded across ranks** ([`WoodburyInverse::sharded`]): each rank holds its rows of
/// `y` and of `V` (`n` is then the local row count); every sum over the rows ($y^\top y$,
/// $V^\top k$, $k^\top y$, $k^\top k$, $V^\top V$, $V^\top y$) is formed on the local rows and
/// added across ranks by [`Communicator::all_reduce_sum`] in rank order, so Σ, $v_y$, β and every
/// quantity of size `p` are the same bits on every rank, and so are the decisions taken from
/// them (a rebuild instead of an in-place update). A [`probe`](Self::probe) sends one buffer of
/// `p + 2` doubles, a [`refresh`](Self::refresh) one of `p(p+1)/2 + p`; the other updates send
/// nothing. The methods that reduce are collective: every rank calls them in the same order.
/// With [`SingleProcess`] (what [`WoodburyInverse::new`] uses) nothing is sent.
///
/// # References
/// \[SLKL\], (22)–(27), Theorems 2–3, (30); docs/derivations.md §6.8–§6.9.
#[derive(Debug, Clone)]
pub struct WoodburyInverse<'c> {
    comm: &'c dyn Communicator,
    lambda: f64,
    y: Vec<f64>,
    yty: f64,
    /// `V`, column-major `(n, p)`.
    v: Vec<f64>,
    d: Vec<f64>,
    sigma: Mat<f64>,
    vty: Vec<f64>,
    beta: Vec<f64>,
    generation: u64,
    updates_since_refresh: usize,
}

/// The parts of a [`WoodburyInverse`] that its updates change, saved bit for bit by a
/// checkpoint ([`WoodburyInverse::parts`]) and put back by [`WoodburyInverse::restore_parts`];
/// `λ` and `y` are the state's own and not part of it.
#[derive(Debug, Clone, PartialEq)]
pub struct WoodburyParts {
    /// The columns `V`, `(n, p)`.
    pub v: Mat<f64>,
    /// The weights `d`, length `p`, positive.
    pub d: Vec<f64>,
    /// $\Sigma = (\lambda D^{-1} + V^\top V)^{-1}$ as maintained by the updates, `(p, p)`.
    pub sigma: Mat<f64>,
    /// $v_y = V^\top y$, length `p`.
    pub vty: Vec<f64>,
    /// $\beta = \Sigma v_y$, length `p`.
    pub beta: Vec<f64>,
    /// The update counter (the generation a [`Probe`] is checked against).
    pub generation: u64,
    /// Updates since Σ was last rebuilt.
    pub updates_since_refresh: usize,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ac, bc) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `out = Σ x` (length `p`), column by column of the symmetric Σ, reusing `out`'s buffer.
fn sigma_mul_into(sigma: &Mat<f64>, x: &[f64], out: &mut Vec<f64>) {
    out.clear();
    out.resize(sigma.nrows(), 0.0);
    for (l, &xl) in x.iter().enumerate() {
        for (o, s) in out.iter_mut().zip(sigma.col_as_slice(l)) {
            *o += s * xl;
        }
    }
}

fn check_weight(d: f64) -> Result<(), LowRankError> {
    if d.is_finite() && d > 0.0 {
        Ok(())
    } else {
        Err(LowRankError::InvalidParameter {
            name: "d",
            reason: format!("weights must be positive and finite, got {d}"),
        })
    }
}

impl<'c> WoodburyInverse<'c> {
    /// The state for `V` with no columns (`p = 0`), i.e. $G = I/\lambda$, tracking `y` (length
    /// `n`), on one process.
    ///
    /// # Errors
    /// [`LowRankError::InvalidParameter`] unless `lambda` is positive and finite;
    /// [`LowRankError::NonFinite`] for NaN/∞ in `y`.
    pub fn new(lambda: f64, y: &[f64]) -> Result<Self, LowRankError> {
        Self::sharded(lambda, y, &SingleProcess)
    }

    /// [`WoodburyInverse::new`] for rows sharded across the ranks of `comm`: `y` is this rank's
    /// rows of the tracked right-hand side (length `n` = the local row count), and the columns
    /// added later are this rank's rows of them (see the type's docs). Collective ($y^\top y$,
    /// one double).
    ///
    /// # Errors
    /// As [`WoodburyInverse::new`] (a non-finite `y` is seen only by the rank holding it; the
    /// caller must then stop every rank).
    pub fn sharded(lambda: f64, y: &[f64], comm: &'c dyn Communicator) -> Result<Self, LowRankError> {
        if !(lambda.is_finite() && lambda > 0.0) {
            return Err(LowRankError::InvalidParameter {
                name: "lambda",
                reason: format!("must be positive and finite, got {lambda}"),
            });
        }
        check_finite("y", y.iter().copied())?;
        let mut yty = [dot(y, y)];
        comm.all_reduce_sum(&mut yty);
        Ok(Self {
            comm,
            lambda,
            y: y.to_vec(),
            yty: yty[0],
            v: Vec::new(),
            d: Vec::new(),
            sigma: Mat::zeros(0, 0),
            vty: Vec::new(),
            beta: Vec::new(),
            generation: 0,
            updates_since_refresh: 0,
        })
    }

    /// The state for the columns `v` `(n, p)` and weights `d` (length `p`, positive), tracking
    /// `y` (length `n`), built from scratch: $\Sigma = (\lambda D^{-1} + V^\top V)^{-1}$ by Cholesky,
    /// $O(np^2 + p^3)$.
    ///
    /// # Errors
    /// As [`WoodburyInverse::new`]; [`LowRankError::ShapeMismatch`] if `v` does not have `n`
    /// rows or `d` has not `p` entries; [`LowRankError::NonFinite`] for NaN/∞ in `v`;
    /// [`LowRankError::InvalidParameter`] for a weight that is not positive and finite;
    /// [`LowRankError::NotPositiveDefinite`] if the Cholesky factorization fails.
    pub fn from_columns(lambda: f64, y: &[f64], v: MatRef<'_, f64>, d: &[f64]) -> Result<Self, LowRankError> {
        let mut state = Self::new(lambda, y)?;
        let n = y.len();
        check_shape("V", (n, d.len()), (v.nrows(), v.ncols()))?;
        check_finite_mat("V", v)?;
        for &w in d {
            check_weight(w)?;
        }
        state.v = Vec::with_capacity(n * d.len());
        for j in 0..v.ncols() {
            state.v.extend((0..n).map(|i| v[(i, j)]));
        }
        state.d = d.to_vec();
        state.refresh()?;
        Ok(state)
    }

    /// Size `n` of `G` (length of `y`).
    pub fn n(&self) -> usize {
        self.y.len()
    }

    /// Number of columns `p` of `V`.
    pub fn p(&self) -> usize {
        self.d.len()
    }

    /// The ridge `λ > 0`.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// The tracked right-hand side `y`, length `n`.
    pub fn y(&self) -> &[f64] {
        &self.y
    }

    /// The columns `V`, shape `(n, p)`.
    pub fn columns(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(&self.v, self.n(), self.p())
    }

    /// Column `j` of `V`, length `n`.
    ///
    /// # Errors
    /// [`LowRankError::IndexOutOfRange`] if `j >= p`.
    pub fn column(&self, j: usize) -> Result<&[f64], LowRankError> {
        self.check_index(j)?;
        let n = self.n();
        Ok(&self.v[j * n..(j + 1) * n])
    }

    /// The weights `d` (diagonal of `D`), length `p`, all positive.
    pub fn weights(&self) -> &[f64] {
        &self.d
    }

    /// $\Sigma = (\lambda D^{-1} + V^\top V)^{-1}$, shape `(p, p)`, symmetric positive definite.
    pub fn sigma(&self) -> MatRef<'_, f64> {
        self.sigma.as_ref()
    }

    /// $v_y = V^\top y$, length `p`.
    pub fn vty(&self) -> &[f64] {
        &self.vty
    }

    /// $\beta = \Sigma V^\top y$, length `p`. For SLKL these are the coefficients of the sparse
    /// predictor, $c = \beta$ (docs/derivations.md §6.8).
    pub fn beta(&self) -> &[f64] {
        &self.beta
    }

    /// Number of in-place updates since Σ was last built from scratch.
    pub fn updates_since_refresh(&self) -> usize {
        self.updates_since_refresh
    }

    /// A copy of the parts the updates change (for a checkpoint).
    pub fn parts(&self) -> WoodburyParts {
        let (n, p) = (self.n(), self.p());
        WoodburyParts {
            v: Mat::from_fn(n, p, |i, j| self.v[j * n + i]),
            d: self.d.clone(),
            sigma: self.sigma.clone(),
            vty: self.vty.clone(),
            beta: self.beta.clone(),
            generation: self.generation,
            updates_since_refresh: self.updates_since_refresh,
        }
    }

    /// Puts back parts saved by [`WoodburyInverse::parts`] of a state with the same `λ` and
    /// `y`, bit for bit (Σ is not rebuilt).
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] unless `V` is `(n, p)`, Σ `(p, p)` and `d`, `v_y`, `β`
    /// have `p` entries; [`LowRankError::NonFinite`] for NaN/∞; [`LowRankError::InvalidParameter`]
    /// for a weight that is not positive. On error the state is unchanged.
    pub fn restore_parts(&mut self, parts: WoodburyParts) -> Result<(), LowRankError> {
        let n = self.n();
        let p = parts.d.len();
        check_shape("V", (n, p), parts.v.shape())?;
        check_shape("Sigma", (p, p), parts.sigma.shape())?;
        check_shape("V'y", (p, 1), (parts.vty.len(), 1))?;
        check_shape("beta", (p, 1), (parts.beta.len(), 1))?;
        check_finite_mat("V", parts.v.as_ref())?;
        check_finite_mat("Sigma", parts.sigma.as_ref())?;
        check_finite("V'y", parts.vty.iter().copied())?;
        check_finite("beta", parts.beta.iter().copied())?;
        for &w in &parts.d {
            check_weight(w)?;
        }
        self.v = (0..p).flat_map(|j| (0..n).map(move |i| (j, i))).map(|(j, i)| parts.v[(i, j)]).collect();
        self.d = parts.d;
        self.sigma = parts.sigma;
        self.vty = parts.vty;
        self.beta = parts.beta;
        self.generation = parts.generation;
        self.updates_since_refresh = parts.updates_since_refresh;
        Ok(())
    }

    fn check_index(&self, j: usize) -> Result<(), LowRankError> {
        if j < self.p() {
            Ok(())
        } else {
            Err(LowRankError::IndexOutOfRange { what: "column", index: j, len: self.p() })
        }
    }

    fn check_len(&self, what: &'static str, x: &[f64]) -> Result<(), LowRankError> {
        check_shape(what, (self.n(), 1), (x.len(), 1))?;
        check_finite(what, x.iter().copied())
    }

    /// $V^\top x$ over this rank's rows (not reduced), length `p`, for `x` of length `n`.
    fn vt_local(&self, x: &[f64]) -> Vec<f64> {
        let (n, p) = (self.n(), self.p());
        if p == 0 {
            return Vec::new();
        }
        let out = tall_inner(self.columns(), MatRef::from_column_major_slice(x, n, 1), false);
        (0..p).map(|j| out[(j, 0)]).collect()
    }

    /// $\Sigma x$, length `p`.
    fn sigma_mul(&self, x: &[f64]) -> Vec<f64> {
        let mut out = Vec::new();
        sigma_mul_into(&self.sigma, x, &mut out);
        out
    }

    /// $(x - V w)/\lambda$, length `n`.
    fn residual_over_lambda(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
        let n = self.n();
        let mut out = x.to_vec();
        for (j, &wj) in w.iter().enumerate() {
            for (o, vij) in out.iter_mut().zip(&self.v[j * n..(j + 1) * n]) {
                *o -= vij * wj;
            }
        }
        let inv = 1.0 / self.lambda;
        out.iter_mut().for_each(|o| *o *= inv);
        out
    }

    /// $G x = (x - V \Sigma V^\top x)/\lambda$ for `x` of length `n`; result of length `n`
    /// (sharded: this rank's rows of `x` and of the result; collective, `p` doubles).
    /// Cost $O(np + p^2)$.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `x.len() != n`; [`LowRankError::NonFinite`] for NaN/∞.
    pub fn apply(&self, x: &[f64]) -> Result<Vec<f64>, LowRankError> {
        self.check_len("x", x)?;
        let mut vtx = self.vt_local(x);
        self.comm.all_reduce_sum(&mut vtx);
        let w = self.sigma_mul(&vtx);
        Ok(self.residual_over_lambda(x, &w))
    }

    /// $\alpha = G y = (y - V\beta)/\lambda$, length `n` (the KRR dual variable of \[SLKL\], (15);
    /// sharded: this rank's rows). Cost $O(np)$.
    pub fn alpha(&self) -> Vec<f64> {
        self.residual_over_lambda(&self.y, &self.beta)
    }

    /// $\lambda\, y^\top G y = y^\top y - v_y^\top \beta$ in $O(p)$: the first term of SLKL's
    /// objective (14) (docs/derivations.md §6.8, "Objective").
    pub fn lambda_y_g_y(&self) -> f64 {
        self.yty - dot(&self.vty, &self.beta)
    }

    /// The products of a column `k` (length `n`) with the state: $q = V^\top k$, $u = \Sigma q$,
    /// $k^\top y$, $k^\top k$, $k^\top G y$ and $k^\top G k$ (docs/derivations.md §6.8, "Any i ∈
    /// J"). Sharded: `k` is this rank's rows of the column; $q$, $k^\top y$ and $k^\top k$ are
    /// added across ranks in one buffer of `p + 2` doubles (collective). Cost $O(np + p^2)$.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `k.len() != n`; [`LowRankError::NonFinite`] for NaN/∞.
    pub fn probe(&self, k: &[f64]) -> Result<Probe, LowRankError> {
        self.check_len("k", k)?;
        let mut q = self.vt_local(k);
        q.extend([dot(k, &self.y), dot(k, k)]);
        self.comm.all_reduce_sum(&mut q);
        let k_k = q.pop().expect("two sums were pushed");
        let k_y = q.pop().expect("two sums were pushed");
        let u = self.sigma_mul(&q);
        let quadratics = ColumnQuadratics {
            k_g_y: (k_y - dot(&q, &self.beta)) / self.lambda,
            k_g_k: (k_k - dot(&q, &u)).max(0.0) / self.lambda,
        };
        Ok(Probe { q, u, k_y, k_k, quadratics, generation: self.generation })
    }

    /// [`probe`](Self::probe) of a column `k` whose products with the state were formed
    /// elsewhere (e.g. from a Gram matrix of all candidate columns): on entry `probe.q` holds
    /// $q = V^\top k$ (length `p`, in the order of the columns of `V`), and `k_y`, `k_k` are
    /// $k^\top y$ and $k^\top k$, all already summed over every rank's rows. Fills `u`, the
    /// quadratics and the generation of `probe` as [`probe`](Self::probe) would (the same
    /// formulas), reusing its buffers; sends nothing. Cost $O(p^2)$. The column itself is needed
    /// only if it is then appended ([`push_probed`](Self::push_probed)).
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `probe.q` has not `p` entries;
    /// [`LowRankError::NonFinite`] for NaN/∞ in `q`, `k_y` or `k_k`.
    pub fn probe_from_products(&self, probe: &mut Probe, k_y: f64, k_k: f64) -> Result<(), LowRankError> {
        check_shape("q", (self.p(), 1), (probe.q.len(), 1))?;
        check_finite("q", probe.q.iter().copied().chain([k_y, k_k]))?;
        sigma_mul_into(&self.sigma, &probe.q, &mut probe.u);
        probe.k_y = k_y;
        probe.k_k = k_k;
        probe.quadratics = ColumnQuadratics {
            k_g_y: (k_y - dot(&probe.q, &self.beta)) / self.lambda,
            k_g_k: (k_k - dot(&probe.q, &probe.u)).max(0.0) / self.lambda,
        };
        probe.generation = self.generation;
        Ok(())
    }

    /// $k_j^\top G y$ and $k_j^\top G k_j$ for the column $k_j$ at position `j` of `V`, in $O(1)$:
    /// $k_j^\top G y = \beta_j/d_j$ and $k_j^\top G k_j = (1 - \lambda \Sigma_{jj}/d_j)/d_j$, which
    /// follow from $V^\top V = \Sigma^{-1} - \lambda D^{-1}$ (docs/derivations.md §6.8, "Active i",
    /// with $d_j = \mu_i/K_{ii}$). The second suffers cancellation when $\lambda\Sigma_{jj}/d_j$ is
    /// close to 1; it is clamped at 0, and a caller that needs it positive can fall back to
    /// [`probe`](Self::probe) of [`column`](Self::column)`(j)`.
    ///
    /// # Errors
    /// [`LowRankError::IndexOutOfRange`] if `j >= p`.
    pub fn active_quadratics(&self, j: usize) -> Result<ColumnQuadratics, LowRankError> {
        self.check_index(j)?;
        let d = self.d[j];
        Ok(ColumnQuadratics {
            k_g_y: self.beta[j] / d,
            k_g_k: ((1.0 - self.lambda * self.sigma[(j, j)] / d) / d).max(0.0),
        })
    }

    fn after_update(&mut self) {
        sigma_mul_into(&self.sigma, &self.vty, &mut self.beta);
        self.generation += 1;
        self.updates_since_refresh += 1;
    }

    /// Changes the weight `d_j` to `d_new > 0` (\[SLKL\], Case 2, (25)): $\Sigma^{-1}$ changes by
    /// $\delta e_j e_j^\top$ with $\delta = \lambda(1/d_\mathrm{new} - 1/d_j)$, so by
    /// Sherman–Morrison $\Sigma' = \Sigma - \frac{\delta}{1 + \delta\Sigma_{jj}} \Sigma_{:,j}\Sigma_{j,:}$.
    /// Cost $O(p^2)$ (a rebuild, $O(np^2 + p^3)$, if the denominator has lost its digits).
    ///
    /// # Errors
    /// [`LowRankError::IndexOutOfRange`] if `j >= p`; [`LowRankError::InvalidParameter`] if
    /// `d_new` is not positive and finite; [`LowRankError::NotPositiveDefinite`] if a rebuild
    /// fails. On error the state is unchanged, except after a failed rebuild.
    pub fn set_weight(&mut self, j: usize, d_new: f64) -> Result<(), LowRankError> {
        self.check_index(j)?;
        check_weight(d_new)?;
        let d_old = self.d[j];
        if d_new == d_old {
            return Ok(());
        }
        let delta = self.lambda * (1.0 / d_new - 1.0 / d_old);
        let s = self.sigma.col_as_slice(j).to_vec();
        let denom = 1.0 + delta * s[j];
        self.d[j] = d_new;
        if !(denom > DENOMINATOR_GUARD && denom.is_finite()) {
            return self.refresh();
        }
        let c = delta / denom;
        self.rank_one_downdate(&s, c);
        self.after_update();
        Ok(())
    }

    /// $\Sigma \leftarrow \Sigma - c\, s s^\top$, exactly symmetric.
    fn rank_one_downdate(&mut self, s: &[f64], c: f64) {
        for (l, &sl) in s.iter().enumerate() {
            for (x, &si) in self.sigma.col_as_slice_mut(l).iter_mut().zip(s) {
                *x -= c * (si * sl);
            }
        }
    }

    /// Removes column `j` of `V` (its weight goes to 0; \[SLKL\], Case 3, (26)): the limit
    /// $\delta \to \infty$ of (25), $\Sigma - \Sigma_{:,j}\Sigma_{j,:}/\Sigma_{jj}$, with row and column
    /// `j` deleted. The **last column moves into slot `j`** (swap-remove); returns `Some(p - 1)`,
    /// its old position, if a column moved, `None` if `j` was the last one. Cost $O(p^2 + n)$.
    ///
    /// # Errors
    /// [`LowRankError::IndexOutOfRange`] if `j >= p`; [`LowRankError::NotPositiveDefinite`] if a
    /// rebuild (taken when $\Sigma_{jj}$ is not positive) fails.
    pub fn remove(&mut self, j: usize) -> Result<Option<usize>, LowRankError> {
        self.check_index(j)?;
        let p = self.p();
        let s = self.sigma.col_as_slice(j).to_vec();
        let pivot = s[j];
        let exact = pivot > 0.0 && pivot.is_finite();
        if exact {
            self.rank_one_downdate(&s, 1.0 / pivot);
        }
        // Swap-remove column j of V, entry j of d and v_y, row and column j of Σ.
        let last = p - 1;
        let n = self.n();
        if j != last {
            self.v.copy_within(last * n..p * n, j * n);
        }
        self.v.truncate(last * n);
        self.d.swap_remove(j);
        self.vty.swap_remove(j);
        let map = |a: usize| if a == j { last } else { a };
        let sigma = &self.sigma;
        self.sigma = Mat::from_fn(last, last, |a, b| sigma[(map(a), map(b))]);
        if exact {
            self.after_update();
        } else {
            self.refresh()?;
        }
        Ok((j != last).then_some(last))
    }

    /// Appends the column `k` (length `n`) with weight `d_new > 0` (\[SLKL\], Case 4, (27), and
    /// the block inverse (30)): with $q = V^\top k$, $u = \Sigma q$ and the Schur complement
    /// $s = \lambda/d_\mathrm{new} + k^\top k - q^\top u = \lambda(1/d_\mathrm{new} + k^\top G k) > 0$,
    /// $\Sigma' = \begin{pmatrix}\Sigma + uu^\top/s & -u/s \\ -u^\top/s & 1/s\end{pmatrix}$.
    /// The new column is at position `p` (the old `p`). Cost $O(np + p^2)$.
    ///
    /// # Errors
    /// [`LowRankError::ShapeMismatch`] if `k.len() != n`; [`LowRankError::NonFinite`] for NaN/∞;
    /// [`LowRankError::InvalidParameter`] if `d_new` is not positive and finite.
    pub fn push(&mut self, k: &[f64], d_new: f64) -> Result<(), LowRankError> {
        check_weight(d_new)?;
        let probe = self.probe(k)?;
        self.push_probed(k, d_new, &probe)
    }

    /// [`push`](Self::push) with the products of `k` already computed by
    /// [`probe`](Self::probe) on the current state. Cost $O(n + p^2)$.
    ///
    /// # Errors
    /// As [`push`](Self::push); [`LowRankError::InvalidParameter`] (`probe`) if the probe was
    /// computed before the last update (stale) or for a column of another length.
    pub fn push_probed(&mut self, k: &[f64], d_new: f64, probe: &Probe) -> Result<(), LowRankError> {
        check_weight(d_new)?;
        self.check_len("k", k)?;
        if probe.generation != self.generation || probe.q.len() != self.p() {
            return Err(LowRankError::InvalidParameter {
                name: "probe",
                reason: "computed before the last update of the state; probe the column again".into(),
            });
        }
        let p = self.p();
        let s = self.lambda / d_new + (probe.k_k - dot(&probe.q, &probe.u)).max(0.0);
        let inv = 1.0 / s;
        let u = &probe.u;
        let sigma = &self.sigma;
        self.sigma = Mat::from_fn(p + 1, p + 1, |a, b| match (a < p, b < p) {
            (true, true) => sigma[(a, b)] + (u[a] * u[b]) * inv,
            (true, false) => -u[a] * inv,
            (false, true) => -u[b] * inv,
            (false, false) => inv,
        });
        self.v.extend_from_slice(k);
        self.d.push(d_new);
        self.vty.push(probe.k_y);
        self.after_update();
        Ok(())
    }

    /// Rebuilds Σ, $v_y$ and β from `V`, `d` and `y`: $\Sigma = (\lambda D^{-1} + V^\top V)^{-1}$ by
    /// Cholesky. Cost $O(np^2 + p^3)$. docs/derivations.md §6.9 advises this every ~$p^2$ updates.
    /// Sharded: the lower triangle of $V^\top V$ and $V^\top y$ are added across ranks in one
    /// buffer of `p(p+1)/2 + p` doubles (collective).
    ///
    /// # Errors
    /// [`LowRankError::NotPositiveDefinite`] if the Cholesky factorization fails.
    pub fn refresh(&mut self) -> Result<(), LowRankError> {
        let p = self.p();
        let cols = self.columns();
        let mut core = tall_inner(cols, cols, true);
        self.vty = self.vt_local(&self.y);
        if self.comm.size() > 1 {
            let mut buf: Vec<f64> =
                (0..p).flat_map(|i| (0..=i).map(move |j| (i, j))).map(|(i, j)| core[(i, j)]).collect();
            buf.extend_from_slice(&self.vty);
            self.comm.all_reduce_sum(&mut buf);
            let mut sums = buf.into_iter();
            for i in 0..p {
                for j in 0..=i {
                    core[(i, j)] = sums.next().expect("p(p+1)/2 + p sums");
                }
            }
            self.vty = sums.collect();
        }
        for j in 0..p {
            core[(j, j)] += self.lambda / self.d[j];
        }
        self.sigma = spd_inverse(core.as_ref(), "Woodbury core λD⁻¹ + VᵀV")?;
        self.after_update();
        self.updates_since_refresh = 0;
        Ok(())
    }

    /// The dense $G = (I - V\Sigma V^\top)/\lambda$, shape `(n, n)`. For tests on small inputs
    /// only, on one process (sharded: the diagonal block of this rank's rows).
    pub fn to_dense(&self) -> Mat<f64> {
        let n = self.n();
        let cols = self.columns();
        let vs = cols * &self.sigma;
        let mut g = vs * cols.transpose() * (-1.0 / self.lambda);
        for i in 0..n {
            g[(i, i)] += 1.0 / self.lambda;
        }
        g
    }
}
