//! Unif, the third regression baseline of SLKL (\[SLKL\], Table 2): kernel ridge regression with
//! the uniform combination of the `M` rank-1 Nyström kernels of the landmarks. One code path
//! serves one process and training rows sharded across the ranks of a communicator (one process
//! is the single-process communicator): each rank forms its rows of the landmark kernel
//! columns, the `M × M` Gram matrix of the columns and their products with the targets are
//! added across ranks in rank order, and the common weight's Newton steps and the `M × M` solve
//! are replicated, so that every rank holds the same model.

use faer::{Mat, MatRef};
use stolr_comm::{Communicator, RowShard, SingleProcess, rows_by_index};
use stolr_estimators::{DataRef, Kernel};
use stolr_lowrank::{spd_solve, sym_eigen_desc, tall_inner};
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::error::{agree_on_rows, check_landmarks, check_regression, check_shard};
use crate::krr::KernelExpansion;
use crate::krr::baselines::check_lambda;
use crate::krr::landmarks::landmark_diagonal;
use crate::{ModelRows, SolverError};

/// How Unif chooses the common weight μ_i = c of the `M` rank-1 kernels.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum UniformWeight {
    /// The best common weight for SLKL's objective (14) with the same λ and ν:
    /// $c^* = \arg\min_{c \ge 0} F(c\mathbf 1)$, found exactly (default). Without the ν term the
    /// objective decreases in `c` without bound, so ν is what makes the choice well posed.
    #[default]
    Optimal,
    /// A given weight `c > 0`.
    Fixed(f64),
}

/// Configuration of [`unif`].
#[derive(Debug, Clone, PartialEq)]
pub struct UnifConfig {
    /// Ridge λ > 0 of (14) (default 1).
    pub lambda: f64,
    /// Penalty ν > 0 of (14), as given to SLKL (default 0.05).
    pub nu: f64,
    /// How the common weight is chosen (default [`UniformWeight::Optimal`]).
    pub weight: UniformWeight,
}

impl Default for UnifConfig {
    fn default() -> Self {
        Self { lambda: 1.0, nu: 0.05, weight: UniformWeight::Optimal }
    }
}

impl UnifConfig {
    /// Checks λ, ν and a fixed weight (positive and finite).
    pub(crate) fn validate(&self) -> Result<(), SolverError> {
        check_lambda(self.lambda)?;
        if !(self.nu.is_finite() && self.nu > 0.0) {
            return Err(SolverError::InvalidConfig {
                name: "nu",
                reason: format!("the sparsity penalty must be positive and finite, got {}", self.nu),
            });
        }
        if let UniformWeight::Fixed(c) = self.weight
            && !(c.is_finite() && c > 0.0)
        {
            return Err(SolverError::InvalidConfig {
                name: "weight",
                reason: format!("the uniform weight must be positive and finite, got {c}"),
            });
        }
        Ok(())
    }
}

/// The Unif baseline fitted by [`unif`].
#[derive(Debug, Clone, PartialEq)]
pub struct UnifModel {
    /// $f(x) = \sum_{i \in J} c_i \kappa(x, x_i)$, $c = \beta$ as for SLKL (docs/derivations.md
    /// §6.8); empty when the weight is 0.
    pub expansion: KernelExpansion,
    /// The common weight `c = μ_i` of every landmark with $K_{ii} > 0$.
    pub weight: f64,
    /// $F(c\mathbf 1)$ of (14) (the ν term counts the landmarks with $K_{ii} > 0$); with the
    /// intercept, of the centred columns and targets.
    pub objective: f64,
    /// The unpenalized intercept $b = \bar y - \sum_i c_i \bar k_i$ (0 without; [`unif`] has
    /// none): the predictor is the expansion plus `b`.
    pub intercept: f64,
}

/// Unif: KRR with the kernel $K_\mu = c \sum_{i \in J} k_i k_i^\top / K_{ii}$ (uniform weights on
/// the `M` rank-1 Nyström kernels of the landmarks `J`, e.g. SLKL's), i.e.
/// $\alpha = (\lambda I + K_\mu)^{-1} y$ and the predictor $f(x) = \sum_j \alpha_j k_\mu(x_j, x)$.
///
/// Sparse rows `x` ([`DataRef`]) stay sparse: the kernel columns are summed over the stored
/// entries and the centres kept in CSR form.
///
/// The common weight `c` follows `config.weight`. For [`UniformWeight::Optimal`], with
/// $\Psi = [k_i/\sqrt{K_{ii}}]$ `(n, M)`, $\Psi^\top\Psi = \sum_k e_k w_k w_k^\top$ and
/// $t_k = (w_k^\top \Psi^\top y)^2$, the objective along the ray is
/// $F(c\mathbf 1) = y^\top y - c\sum_k t_k/(\lambda + c e_k) + \nu M c$, convex in `c`; its
/// derivative is increasing and concave, so Newton's method from `c = 0` converges monotonically
/// to the root ($c^* = 0$, the zero predictor, if $F'(0) = \nu M - \|\Psi^\top y\|^2/\lambda \ge 0$).
/// The coefficients are then $\beta = (\lambda D^{-1} + V^\top V)^{-1} V^\top y$ with
/// $V = \left[k_i\right]$ and $D = \mathrm{diag}(c/K_{ii})$ (Woodbury's identity, docs/derivations.md §6.8),
/// one `M × M` Cholesky solve, and $F = y^\top y - (V^\top y)^\top\beta + \nu M c$.
/// Landmarks with $K_{ii} = 0$ are left out. Time $O(nMd + nM^2 + M^3)$, memory $O(nM)$ (one
/// `n × M` block of kernel columns; checked against the default [`MemoryBudget`]).
///
/// # Errors
/// [`SolverError::InvalidConfig`] unless λ and ν are positive and finite, for a fixed weight
/// that is not positive and finite, for empty or out-of-range `landmarks`;
/// [`SolverError::Estimator`], [`SolverError::ShapeMismatch`], [`SolverError::NonFiniteTarget`]
/// for bad data; [`SolverError::Memory`] over the budget; [`SolverError::LowRank`] if a dense
/// factorization fails.
///
/// # References
/// \[SLKL\], Section 5.2 and Table 2 ("Unif": "the kernel obtained
/// with uniform weights on the rank-1 approximations selected for SLKL"; the value is not
/// given); docs/derivations.md §6.14.
pub fn unif<'x>(
    x: impl Into<DataRef<'x>>,
    y: &[f64],
    kernel: &Kernel,
    config: &UnifConfig,
    landmarks: &[usize],
) -> Result<UnifModel, SolverError> {
    unif_fit(x.into(), y, kernel, config, landmarks, false, None, MemoryBudget::default())
}

/// [`unif`] with or without an unpenalized intercept, on one process. With `intercept`, every
/// rank-1 column $k_i$ is centred over the training rows, $\tilde k_i = k_i - \bar k_i\mathbf 1$
/// (so the kernel is $C K_\mu C$, $C = I - \mathbf 1\mathbf 1^\top/n$), the targets too, and
/// $b = \bar y - \sum_i c_i \bar k_i$: the KRR with kernel $K_\mu$ and an unpenalized `b`, as
/// for SLKL ([`crate::Slkl::with_intercept`]).
///
/// With sample `weights` $w$ (checked by the caller) the loss is
/// $\sum_i w_i (y_i - f(x_i))^2$: the centring uses the weighted means
/// ($\bar k_i$ and $\bar y$ with weights $w$) and every row `r` of the (centred) columns and
/// targets is multiplied by $\sqrt{w_r}$ before the solve, which is then unchanged.
///
/// # Errors
/// As [`unif`], with `memory` the budget.
#[allow(clippy::too_many_arguments)]
pub(crate) fn unif_fit(
    x: DataRef<'_>,
    y: &[f64],
    kernel: &Kernel,
    config: &UnifConfig,
    landmarks: &[usize],
    intercept: bool,
    weights: Option<&[f64]>,
    memory: MemoryBudget,
) -> Result<UnifModel, SolverError> {
    let whole = RowShard::whole(x.nrows());
    unif_fit_sharded(x, y, weights, kernel, config, landmarks, intercept, memory, &SingleProcess, whole)
}

/// [`unif_fit`] on training rows sharded across the ranks of `comm`: `x` `(shard.rows, d)`
/// and `y` are this rank's rows `shard.first..shard.first + shard.rows` of the
/// `n = shard.total` training rows; `landmarks` are global row indices, the same on every rank.
/// Every rank returns the same model. See [`UnifSystem`] for what travels between the ranks.
/// With the [`SingleProcess`] communicator and the whole shard this is [`unif_fit`]; with `P`
/// ranks it differs from it by the rounding of the rank-ordered sums.
///
/// # Errors
/// As [`unif`]; those of [`UnifSystem::new`] (every one collective: the same error kind on
/// every rank, or [`SolverError::InvalidConfig`] (`rows`) on the ranks whose rows were fine
/// when another's were not).
#[allow(clippy::too_many_arguments)]
pub(crate) fn unif_fit_sharded(
    x: DataRef<'_>,
    y: &[f64],
    weights: Option<&[f64]>,
    kernel: &Kernel,
    config: &UnifConfig,
    landmarks: &[usize],
    intercept: bool,
    memory: MemoryBudget,
    comm: &dyn Communicator,
    shard: RowShard,
) -> Result<UnifModel, SolverError> {
    if comm.size() == 1 {
        // One process: the data's errors first, as before the sharded path existed.
        check_regression(x, y)?;
    }
    kernel.validate()?;
    config.validate()?;
    let system = UnifSystem::new(x, y, weights, kernel, landmarks, intercept, memory, comm, shard)?;
    system.solve(kernel, config)
}

/// Unif's `M`-sized system on the landmarks `J`: everything the weight rule and the solve need,
/// summed over the training rows of every rank. Built once ([`UnifSystem::new`], collective)
/// and solved for any λ, ν or weight ([`UnifSystem::solve`], no communication): a
/// cross-validation of ν builds one per fold.
///
/// **What travels** (sharded rows): the landmark rows `(M, d)` are assembled on every rank from
/// their owners ([`rows_by_index`], `M·d` doubles, exact); with the intercept, the local sums
/// $[\sum_i w_i y_i, \sum_i w_i, \sum_i w_i k_{il}]$ are added across ranks in rank order
/// (`M + 2` doubles) and divided on every rank; then the lower triangle of $V^\top V$,
/// $V^\top \tilde y$ and $\tilde y^\top\tilde y$ of the centred (and $\sqrt w$-scaled) kept
/// columns `V` and targets $\tilde y$, one buffer of `M(M+1)/2 + M + 1` doubles. A landmark's
/// diagonal entry $K_{ii}$ is evaluated on its assembled row, the same bits on every rank, and
/// its own entry in its column is set to it (as [`Kernel::columns`] does).
#[derive(Debug, Clone)]
pub(crate) struct UnifSystem {
    /// The rows of the kept landmarks ($K_{ii} > 0$), in the order of `J`: the centres.
    centers: ModelRows,
    /// Their diagonal entries $K_{ii}$.
    diag: Vec<f64>,
    /// The (weighted) column means $\bar k_i$ of the kept columns; 0 without the intercept.
    means: Vec<f64>,
    /// The (weighted) target mean $\bar y$; 0 without the intercept.
    mean: f64,
    /// The lower triangle of $V^\top V$ `(k, k)` (the upper triangle is zero).
    gram: Mat<f64>,
    /// $V^\top\tilde y$, length `k`.
    vty: Vec<f64>,
    /// $\tilde y^\top\tilde y$.
    yty: f64,
}

impl UnifSystem {
    /// The system of the landmarks `landmarks` (global indices) on this rank's rows `x`, `y`
    /// (and `weights`, one process only, checked by the caller). Collective; every rank holds
    /// the same system. Memory: this rank's `rows × M` kernel columns, the kernel's prepared
    /// copy of the rows (two of `rows × d` dense, or of the stored entries), the landmark rows
    /// and four `M × M` matrices (for the solve), checked against `memory` with the largest
    /// row count of any rank (the same verdict on every rank) before anything is allocated.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmarks`) for empty or out-of-range `landmarks`
    /// (over the global `n`), (`shard`) if `x` or `y` do not have `shard.rows` rows (on that
    /// rank); the data's errors ([`SolverError::Estimator`], [`SolverError::NonFiniteTarget`]
    /// with the global row index) on the rank holding the rows, and
    /// [`SolverError::InvalidConfig`] (`rows`) on the others; [`SolverError::Memory`];
    /// [`SolverError::SparseUnsupported`] for sparse rows and [`SolverError::NotDistributed`]
    /// for float32 rows or sample weights on more than one rank.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        x: DataRef<'_>,
        y: &[f64],
        weights: Option<&[f64]>,
        kernel: &Kernel,
        landmarks: &[usize],
        intercept: bool,
        memory: MemoryBudget,
        comm: &dyn Communicator,
        shard: RowShard,
    ) -> Result<Self, SolverError> {
        let (p, m, d) = (comm.size(), landmarks.len(), x.ncols());
        if p > 1 {
            let not_distributed = |what: &str| SolverError::NotDistributed { what: what.into(), processes: p };
            match x {
                DataRef::Sparse(_) => {
                    return Err(SolverError::SparseUnsupported {
                        what: "uniform on rows split across processes".into(),
                    });
                }
                DataRef::DenseF32(_) => return Err(not_distributed("uniform on float32 rows")),
                DataRef::Dense(_) if weights.is_some() => return Err(not_distributed("uniform with sample weights")),
                DataRef::Dense(_) => {}
            }
        }
        check_shard(x.nrows(), y.len(), shard)?;
        check_landmarks(landmarks, shard.total)?;
        // The rows are checked by the rank holding them; every rank learns the verdict.
        let rows_ok = if shard.rows > 0 || p == 1 { check_regression(x, y) } else { Ok(()) };
        agree_on_rows(comm, shard, rows_ok)?;
        let rows = if p == 1 {
            x.nrows()
        } else {
            comm.all_gather(&[x.nrows() as f64]).iter().map(|r| r[0] as usize).max().unwrap_or(0)
        };
        let prepared = if x.is_sparse() { 2 * x.bytes() } else { f64_bytes(&[2, rows, d]) };
        memory.check(
            format!(
                "Unif's {rows} × {m} landmark kernel columns, the {m} landmark rows and 4 {m} × {m} matrices (M = {m})"
            ),
            f64_bytes(&[rows, m]) + prepared + f64_bytes(&[m, d + 1]) + f64_bytes(&[4, m, m]),
        )?;
        let landmark_rows = match x {
            DataRef::Dense(local) => ModelRows::Dense(rows_by_index(comm, local, shard, landmarks)),
            // Sparse and float32 rows (one process): in the form of `x` (float32 as float64).
            DataRef::Sparse(_) | DataRef::DenseF32(_) => ModelRows::gather(x, landmarks),
        };
        let diag = landmark_diagonal(kernel, &landmark_rows);
        let mut cols = if x.nrows() == 0 { Mat::zeros(0, m) } else { kernel.cross(x, landmark_rows.data()) };
        for (l, &i) in landmarks.iter().enumerate() {
            if shard.contains(i) {
                cols[(i - shard.first, l)] = diag[l];
            }
        }
        let kept: Vec<usize> = (0..m).filter(|&l| diag[l] > 0.0 && diag[l].is_finite()).collect();
        let k = kept.len();
        let (mean, means) = if intercept {
            // [Σ w y, Σ w, Σ w k_l for the kept l], in row order, added across ranks.
            let mut sums = vec![0.0; k + 2];
            match weights {
                None => {
                    sums[0] = y.iter().sum::<f64>();
                    for (j, &l) in kept.iter().enumerate() {
                        sums[j + 2] = cols.col(l).iter().sum::<f64>();
                    }
                }
                Some(w) => {
                    sums[0] = (0..y.len()).map(|i| w[i] * y[i]).sum::<f64>();
                    sums[1] = w.iter().sum::<f64>();
                    for (j, &l) in kept.iter().enumerate() {
                        sums[j + 2] = (0..y.len()).map(|i| w[i] * cols[(i, l)]).sum::<f64>();
                    }
                }
            }
            comm.all_reduce_sum(&mut sums);
            // Without weights the total weight is n.
            let total = if weights.is_some() { sums[1] } else { shard.total as f64 };
            (sums[0] / total, sums[2..].iter().map(|s| s / total).collect())
        } else {
            (0.0, vec![0.0; k])
        };
        // The kept columns, centred and scaled by √w, moved left in place: column l ≥ j is read
        // before column j is written.
        let scale: Option<Vec<f64>> = weights.map(|w| w.iter().map(|v| v.sqrt()).collect());
        for (j, &l) in kept.iter().enumerate() {
            for i in 0..x.nrows() {
                let v = cols[(i, l)] - means[j];
                cols[(i, j)] = scale.as_ref().map_or(v, |s| s[i] * v);
            }
        }
        cols.truncate(x.nrows(), k);
        let yt: Vec<f64> = (0..y.len())
            .map(|i| {
                let v = y[i] - mean;
                scale.as_ref().map_or(v, |s| s[i] * v)
            })
            .collect();
        let mut gram = tall_inner(cols.as_ref(), cols.as_ref(), true);
        let vty = tall_inner(cols.as_ref(), MatRef::from_column_major_slice(&yt, yt.len(), 1), false);
        drop(cols);
        let mut buf: Vec<f64> = (0..k).flat_map(|i| (0..=i).map(move |j| (i, j))).map(|(i, j)| gram[(i, j)]).collect();
        buf.extend((0..k).map(|j| vty[(j, 0)]));
        buf.push(yt.iter().map(|v| v * v).sum::<f64>());
        comm.all_reduce_sum(&mut buf);
        let mut sums = buf.into_iter();
        let mut next = || sums.next().expect("k(k+1)/2 + k + 1 sums");
        for i in 0..k {
            for j in 0..=i {
                gram[(i, j)] = next();
            }
        }
        let vty: Vec<f64> = (0..k).map(|_| next()).collect();
        let yty = next();
        let centers = ModelRows::gather(landmark_rows.data(), &kept);
        let diag = kept.iter().map(|&l| diag[l]).collect();
        Ok(Self { centers, diag, means, mean, gram, vty, yty })
    }

    /// The number of kept landmarks ($K_{ii} > 0$).
    pub(crate) fn kept(&self) -> usize {
        self.diag.len()
    }

    /// The Unif model for `config` (checked by the caller): the common weight (given, or the
    /// Newton root of [`unif`]), then β from one `k × k` Cholesky solve. No communication: the
    /// same bits on every rank.
    ///
    /// # Errors
    /// [`SolverError::LowRank`] if a dense factorization fails.
    pub(crate) fn solve(&self, kernel: &Kernel, config: &UnifConfig) -> Result<UnifModel, SolverError> {
        let (lambda, k) = (config.lambda, self.kept());
        let c = match config.weight {
            UniformWeight::Fixed(c) => c,
            UniformWeight::Optimal => {
                optimal_uniform_weight(self.gram.as_ref(), &self.vty, &self.diag, lambda, config.nu)?
            }
        };
        if c == 0.0 || k == 0 {
            let expansion = KernelExpansion::new(*kernel, ModelRows::gather(self.centers.data(), &[]), Vec::new())?;
            return Ok(UnifModel { expansion, weight: c, objective: self.yty, intercept: self.mean });
        }
        // Σ⁻¹ = λD⁻¹ + VᵀV with D = diag(c / K_ii): its lower triangle.
        let mut core = self.gram.clone();
        for (j, &kjj) in self.diag.iter().enumerate() {
            core[(j, j)] += lambda / (c / kjj);
        }
        let beta =
            spd_solve(core.as_ref(), MatRef::from_column_major_slice(&self.vty, k, 1), "Unif's core λD⁻¹ + VᵀV")?;
        let beta: Vec<f64> = (0..k).map(|j| beta[(j, 0)]).collect();
        let fitted: f64 = self.vty.iter().zip(&beta).map(|(v, b)| v * b).sum();
        let objective = self.yty - fitted + config.nu * k as f64 * c;
        let intercept = self.mean - beta.iter().zip(&self.means).map(|(b, m)| b * m).sum::<f64>();
        let expansion = KernelExpansion::new(*kernel, self.centers.clone(), beta)?;
        Ok(UnifModel { expansion, weight: c, objective, intercept })
    }
}

/// $\arg\min_{c \ge 0} F(c\mathbf 1)$ (see [`unif`]) from the lower triangle of $V^\top V$
/// `gram` `(k, k)`, $V^\top y$ `vty` and the diagonal entries `diag` of the kept landmarks:
/// $\Psi^\top\Psi = D_K^{-1/2} V^\top V D_K^{-1/2}$ and $\Psi^\top y = D_K^{-1/2} V^\top y$.
fn optimal_uniform_weight(
    gram: MatRef<'_, f64>,
    vty: &[f64],
    diag: &[f64],
    lambda: f64,
    nu: f64,
) -> Result<f64, SolverError> {
    let m = diag.len();
    if m == 0 {
        return Ok(0.0);
    }
    let root: Vec<f64> = diag.iter().map(|d| d.sqrt()).collect();
    // The lower triangle is all sym_eigen_desc reads.
    let psi_gram = Mat::from_fn(m, m, |i, j| if i >= j { gram[(i, j)] / (root[i] * root[j]) } else { 0.0 });
    let r: Vec<f64> = (0..m).map(|i| vty[i] / root[i]).collect();
    let (e, w) = sym_eigen_desc(psi_gram.as_ref())?;
    let cutoff = 1e-12 * e.first().copied().unwrap_or(0.0).max(0.0);
    // (e_k, t_k) for the numerically nonzero directions; t_k = 0 in exact arithmetic otherwise.
    let terms: Vec<(f64, f64)> = (0..m)
        .filter(|&k| e[k] > cutoff)
        .map(|k| {
            let proj: f64 = (0..m).map(|i| w[(i, k)] * r[i]).sum();
            (e[k], proj * proj)
        })
        .collect();
    let slope = |c: f64| {
        nu * m as f64 - terms.iter().map(|&(ek, tk)| lambda * tk / ((lambda + c * ek) * (lambda + c * ek))).sum::<f64>()
    };
    let curvature =
        |c: f64| terms.iter().map(|&(ek, tk)| 2.0 * lambda * tk * ek / (lambda + c * ek).powi(3)).sum::<f64>();
    let mut c = 0.0;
    if slope(c) >= 0.0 {
        return Ok(0.0);
    }
    // F' is increasing and concave: Newton from the left stays left of the root and increases.
    for _ in 0..500 {
        let (g, h) = (slope(c), curvature(c));
        if !(g < 0.0 && h > 0.0) {
            break;
        }
        let next = c - g / h;
        if !(next.is_finite()) || next <= c * (1.0 + 1e-15) {
            c = if next.is_finite() { next.max(c) } else { c };
            break;
        }
        c = next;
    }
    Ok(c)
}
