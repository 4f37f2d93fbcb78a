//! Kernel PCA parameters: one entry point that fits any of the four solvers into a
//! [`KernelPcaModel`].

use faer::{Mat, MatRef};
use rand::Rng;
use stolr_datasets::{Standardization, standardize};
use stolr_estimators::{
    Centered, ColumnSampling, Kernel, KernelSampler, RandomFourierFeatures, RandomMaclaurin, kernel_row_means,
};
use stolr_lowrank::Eigenpairs;
use stolr_memory::{MemoryBudget, f64_bytes};

use crate::kpca::exact::exact_fit;
use crate::kpca::{
    ExactKpcaConfig, ExactOperator, KernelCentering, KernelPcaModel, Kha, KhaConfig, NystromConfig, Skpca, SkpcaConfig,
    check_skpca_memory, nystrom_fit,
};
use crate::{Fit, Observer, SolverError, Stop, run};

/// The unbiased kernel estimator that feeds SKPCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerKind {
    /// Random Fourier features (cos/sin pairs), `2·features` columns per draw; Gaussian and
    /// Laplacian kernels.
    Rff,
    /// Uniform column sampling with replacement, `features` columns per draw.
    Columns,
    /// Symmetric column sampling, `2·features` columns per draw.
    ColumnsSym,
    /// Random Maclaurin features, `features` columns per draw; polynomial kernel.
    Maclaurin,
}

impl SamplerKind {
    /// Every sampler, in the order of their names.
    pub const ALL: [SamplerKind; 4] =
        [SamplerKind::Rff, SamplerKind::Columns, SamplerKind::ColumnsSym, SamplerKind::Maclaurin];

    /// The name as the CLI spells it: `rff`, `columns`, `columns-sym`, `maclaurin`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Rff => "rff",
            SamplerKind::Columns => "columns",
            SamplerKind::ColumnsSym => "columns-sym",
            SamplerKind::Maclaurin => "maclaurin",
        }
    }

    /// Columns `a` of one draw with `features` features (or sampled columns): `2·features` for
    /// rff and columns-sym, `features` otherwise (saturating).
    pub fn draw_rank(self, features: usize) -> usize {
        match self {
            SamplerKind::Rff | SamplerKind::ColumnsSym => features.saturating_mul(2),
            SamplerKind::Columns | SamplerKind::Maclaurin => features,
        }
    }

    /// Whether the draws are symmetric PSD (`ζζᵀ`): rff and maclaurin.
    pub fn is_symmetric_psd(self) -> bool {
        matches!(self, SamplerKind::Rff | SamplerKind::Maclaurin)
    }

    /// Estimated bytes of the sampler's own buffers for `n` rows of `d` features, besides the
    /// draw that SKPCA's estimate counts ([`crate::skpca_memory_estimate`]): rff its `d × k`
    /// frequencies and a `512 × k` projection block per worker thread; column sampling the
    /// `n × k` kernel columns, their `k × d` rows and a `n × k` scratch; random Maclaurin its
    /// `d × t` Rademacher vectors and the `n × t` projections, `t` the sum of the features'
    /// orders (about `k`, bounded here by `2k`). Saturates instead of wrapping.
    pub fn buffer_bytes(self, n: usize, d: usize, features: usize) -> u64 {
        let k = features;
        match self {
            SamplerKind::Rff => {
                let workers = faer::get_global_parallelism().degree().max(1);
                f64_bytes(&[d, k]).saturating_add(f64_bytes(&[workers, 512, k]))
            }
            SamplerKind::Columns | SamplerKind::ColumnsSym => f64_bytes(&[2, n, k]).saturating_add(f64_bytes(&[k, d])),
            SamplerKind::Maclaurin => f64_bytes(&[2, d + n, k]),
        }
    }
}

impl std::str::FromStr for SamplerKind {
    type Err = String;

    /// The sampler named `rff`, `columns`, `columns-sym` or `maclaurin`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
            format!("unknown sampler '{s}' (one of {})", names.join(", "))
        })
    }
}

/// Which kernel PCA solver [`KernelPca`] fits with.
#[derive(Debug, Clone, PartialEq)]
pub enum KpcaSolver {
    /// Exact eigenpairs ([`crate::exact_kpca`]): the dense kernel matrix when it fits the
    /// memory budget, the matrix-free block eigensolver otherwise, or as `operator` forces.
    Exact {
        /// Relative tolerance of the eigensolver.
        tolerance: f64,
        /// Dense, matrix-free, or chosen by the budget.
        operator: ExactOperator,
    },
    /// Exact eigenpairs of the Nyström approximation on `landmarks` uniform landmarks
    /// ([`crate::nystrom_kpca`]).
    Nystrom {
        /// Number of landmarks `m`, `rank ≤ m ≤ n`.
        landmarks: usize,
    },
    /// SKPCA ([`Skpca`]) fed by `sampler` with `features` features (or columns) per draw.
    Skpca {
        /// τ, iterations, rank cap.
        config: SkpcaConfig,
        /// The unbiased estimator.
        sampler: SamplerKind,
        /// Features (or columns) per draw.
        features: usize,
    },
    /// The Kernel Hebbian Algorithm ([`Kha`]); its `rank` and `center` come from
    /// [`KernelPca`].
    Kha {
        /// Step size η.
        eta: f64,
        /// Steps `T`.
        iterations: usize,
        /// Scale of the initial coefficients.
        init_scale: f64,
    },
}

impl KpcaSolver {
    /// The exact solver with tolerance `1e-10`, dense when the kernel matrix fits the budget.
    pub fn exact() -> Self {
        KpcaSolver::Exact { tolerance: ExactKpcaConfig::new(1).tolerance, operator: ExactOperator::Auto }
    }

    /// The name as the CLI spells it: `exact`, `nystrom`, `skpca`, `kha`.
    pub fn name(&self) -> &'static str {
        match self {
            KpcaSolver::Exact { .. } => "exact",
            KpcaSolver::Nystrom { .. } => "nystrom",
            KpcaSolver::Skpca { .. } => "skpca",
            KpcaSolver::Kha { .. } => "kha",
        }
    }
}

/// Everything a kernel PCA fit produced: the model, the training eigenpairs (eigenvectors
/// `(n, r)` over the training rows; the model of a Nyström fit keeps only the landmarks) and
/// how the run ended.
#[derive(Debug, Clone)]
pub struct KernelPcaFit {
    /// The model, for new rows.
    pub model: KernelPcaModel,
    /// Eigenvalues (nonincreasing) and eigenvectors `(n, r)` of the training kernel matrix.
    pub pairs: Eigenpairs,
    /// Why an iterative solver stopped (`None` for exact and Nyström).
    pub stop: Option<Stop>,
    /// Iterations run (0 for exact and Nyström).
    pub iterations: usize,
    /// For the exact solver, which operator ran (`Dense` or `MatrixFree`); `None` otherwise.
    pub exact_operator: Option<ExactOperator>,
}

/// Kernel PCA parameters: `rank` components of the kernel matrix of `kernel`, optionally
/// centred in feature space and after standardizing the features, by one of the solvers of
/// [`KpcaSolver`]. [`Fit::fit`] returns a [`KernelPcaModel`] (see its docs for the
/// out-of-sample formula of each solver and an example).
///
/// `rank` truncates the result; SKPCA returns every eigenpair above τ when `rank` is `None`,
/// the other solvers need it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPca {
    /// Number of components `r` (SKPCA: at most; `None`: all above τ).
    pub rank: Option<usize>,
    /// The kernel.
    pub kernel: Kernel,
    /// Centre in feature space (decompose `HKH`), as scikit-learn's `KernelPCA` does.
    pub center: bool,
    /// Standardize every feature (mean 0, population standard deviation 1) before the kernel;
    /// the statistics are kept in the model.
    pub standardize: bool,
    /// The solver.
    pub solver: KpcaSolver,
    /// The memory budget every size-dependent allocation of the fit is checked against before
    /// it is made (default: 80 % of the memory available at the first fit).
    pub memory: MemoryBudget,
}

impl KernelPca {
    /// `rank` components of `kernel` by `solver`, uncentred, without standardization.
    pub fn new(rank: usize, kernel: Kernel, solver: KpcaSolver) -> Self {
        Self { rank: Some(rank), kernel, center: false, standardize: false, solver, memory: MemoryBudget::default() }
    }

    /// Sets feature-space centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Sets standardization.
    pub fn standardize(mut self, standardize: bool) -> Self {
        self.standardize = standardize;
        self
    }

    fn rank_for(&self, what: &'static str) -> Result<usize, SolverError> {
        self.rank.ok_or(SolverError::InvalidConfig { name: "rank", reason: format!("the {what} solver needs a rank") })
    }

    /// Fits on rows that are already standardized (or not meant to be), recording
    /// `standardization` in the model; returns the model, the training eigenpairs and how the
    /// run ended.
    ///
    /// # Errors
    /// As [`Fit::fit`].
    pub fn fit_prepared(
        &self,
        x: MatRef<'_, f64>,
        standardization: Option<Standardization>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<KernelPcaFit, SolverError> {
        let name = self.solver.name();
        // The solvers on the training rows give eigenpairs, the kernel means when they have
        // them, and how the run ended; the model is built from those below.
        let mut exact_operator = None;
        let (pairs, means, stop, iterations) = match &self.solver {
            KpcaSolver::Exact { tolerance, operator } => {
                let config = ExactKpcaConfig {
                    rank: self.rank_for("exact")?,
                    center: self.center,
                    memory: self.memory,
                    tolerance: *tolerance,
                    operator: *operator,
                };
                let (pairs, means, ran) = exact_fit(x, &self.kernel, &config)?;
                exact_operator = Some(ran);
                (pairs, means, None, 0)
            }
            KpcaSolver::Nystrom { landmarks } => {
                let config = NystromConfig {
                    memory: self.memory,
                    ..NystromConfig::new(*landmarks, self.rank_for("nystrom")?).center(self.center)
                };
                let fit = nystrom_fit(x, &self.kernel, &config, rng)?;
                let rows = Mat::from_fn(fit.landmarks.len(), x.ncols(), |i, j| x[(fit.landmarks[i], j)]);
                let centering = if self.center { KernelCentering::Offset(fit.offset) } else { KernelCentering::None };
                let values = fit.pairs.values.clone();
                let model =
                    KernelPcaModel::new(name, self.kernel, standardization, rows, fit.coefficients, values, centering)?;
                return Ok(KernelPcaFit { model, pairs: fit.pairs, stop: None, iterations: 0, exact_operator: None });
            }
            KpcaSolver::Skpca { config, sampler, features } => {
                // Every buffer of the run, the sampler's included, before any is allocated.
                let (n, d) = x.shape();
                stolr_memory::check_iterations(self.memory, "iterations", config.iterations)?;
                let a = sampler.draw_rank(*features);
                let sampler_bytes = sampler.buffer_bytes(n, d, *features);
                check_skpca_memory(n, a, sampler.is_symmetric_psd(), config, sampler_bytes, self.memory)?;
                let inner: Box<dyn KernelSampler + '_> = match sampler {
                    SamplerKind::Rff => Box::new(RandomFourierFeatures::new(x, self.kernel, *features)?),
                    SamplerKind::Columns => Box::new(ColumnSampling::new(x, self.kernel, *features, false)?),
                    SamplerKind::ColumnsSym => Box::new(ColumnSampling::new(x, self.kernel, *features, true)?),
                    SamplerKind::Maclaurin => Box::new(RandomMaclaurin::new(x, self.kernel, *features)?),
                };
                let sampler = if self.center { Box::new(Centered::new(inner)) } else { inner };
                let mut solver = Skpca::new(config.clone(), sampler)?;
                let stop = run(&mut solver, rng, observer)?;
                let mut pairs = solver.eigenpairs()?;
                if let Some(r) = self.rank {
                    pairs.truncate(r);
                }
                // The centring statistics are exact: one streamed pass over K, O(n²d).
                let means = self.center.then(|| kernel_row_means(x, &self.kernel));
                (pairs, means, Some(stop), solver.iterations_done())
            }
            KpcaSolver::Kha { eta, iterations, init_scale } => {
                let config = KhaConfig {
                    rank: self.rank_for("kha")?,
                    eta: *eta,
                    iterations: *iterations,
                    center: self.center,
                    init_scale: *init_scale,
                };
                // The coefficients A (n, r), their update and the eigenvectors (n, r), plus
                // the row-major copy of the data (n, d).
                let (n, d) = x.shape();
                stolr_memory::check_iterations(self.memory, "iterations", config.iterations)?;
                self.memory.check(
                    format!("KHA's n × r coefficients (n = {n}, rank = {})", config.rank),
                    stolr_memory::f64_bytes(&[3, n, config.rank]).saturating_add(stolr_memory::f64_bytes(&[n, d])),
                )?;
                let mut solver = Kha::new(x, self.kernel, config, rng)?;
                let stop = run(&mut solver, rng, observer)?;
                let pairs = solver.eigenpairs()?;
                let means = self.center.then(|| {
                    let (m, all) = solver.kernel_means();
                    (m.to_vec(), all)
                });
                (pairs, means, Some(stop), solver.iterations_done())
            }
        };
        let model = KernelPcaModel::from_training_eigenpairs(
            name,
            self.kernel,
            standardization,
            stolr_estimators::to_owned(x),
            &pairs,
            KernelCentering::from_training_means(means),
        )?;
        Ok(KernelPcaFit { model, pairs, stop, iterations, exact_operator })
    }
}

impl Fit for KernelPca {
    type Model = KernelPcaModel;

    /// Standardizes a copy of `x` when asked, then fits with the chosen solver.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] / [`SolverError::InvalidRank`] for impossible parameters
    /// (`rank` missing, 0 or above `n`; landmarks outside `[rank, n]`; τ ≤ 0; ...),
    /// [`SolverError::Estimator`] for empty or non-finite data, [`SolverError::Memory`] for an
    /// exact or Nyström fit or SKPCA's buffers ([`Skpca::check_memory`]) over the budget,
    /// [`SolverError::RankCollapsed`] when SKPCA's τ is above every eigenvalue, and the solvers'
    /// numerical errors.
    fn fit(
        &self,
        x: MatRef<'_, f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<KernelPcaModel, SolverError> {
        if self.standardize {
            crate::error::check_data(x)?;
            let mut owned = stolr_estimators::to_owned(x);
            let stats = standardize(&mut owned);
            Ok(self.fit_prepared(owned.as_ref(), Some(stats), rng, observer)?.model)
        } else {
            Ok(self.fit_prepared(x, None, rng, observer)?.model)
        }
    }
}
