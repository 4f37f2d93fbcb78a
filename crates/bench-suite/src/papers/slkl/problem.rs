//! The regression problems of \[SLKL\] and the random streams of its reproduction.

use faer::Mat;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_datasets::{Dataset, TrainTest, generate, random_split, read_abalone, read_housing};
use stolr_estimators::{DEFAULT_BANDWIDTH_PAIRS, DEFAULT_BANDWIDTH_PERCENTILE, Kernel, bandwidth_rule};
use stolr_solvers::{
    KernelExpansion, Observer, Slkl, SlklConfig, SlklModel, log_grid, mean_squared_error, random_folds, run,
};

use crate::BenchError;
use crate::runner::{DataDir, stream};

/// λ of every experiment (\[SLKL\], Section 5).
pub(super) const LAMBDA: f64 = 1.0;

/// The purposes random draws are made for; with a run and a variant they name a stream
/// ([`rng`]).
pub(super) const RNG_DATA: u64 = 1;
pub(super) const RNG_SPLIT: u64 = 2;
pub(super) const RNG_SIGMA: u64 = 3;
pub(super) const RNG_LANDMARKS: u64 = 4;
pub(super) const RNG_COORDINATES: u64 = 5;
pub(super) const RNG_NU: u64 = 6;

/// The generator for one purpose, run and variant: stream 0 of the seed
/// `purpose·1 000 003 + run·1009 + variant`. Every random choice of the reproduction comes
/// from one of these.
pub(super) fn rng(purpose: u64, run: usize, variant: usize) -> Xoshiro256PlusPlus {
    stream(purpose * 1_000_003 + run as u64 * 1009 + variant as u64, 0)
}

/// One of \[SLKL\]'s regression sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Data {
    Sinc,
    Boston,
    Abalone,
}

impl Data {
    pub(super) fn name(self) -> &'static str {
        match self {
            Data::Sinc => "sinc",
            Data::Boston => "boston",
            Data::Abalone => "abalone",
        }
    }

    /// The M of Table 2 (docs/derivations.md §6.14's suggested defaults); quick mode keeps two.
    pub(super) fn landmarks(self, quick: bool) -> Vec<usize> {
        match (self, quick) {
            (Data::Boston, false) => vec![25, 50, 100, 200],
            (Data::Boston, true) => vec![25, 100],
            (_, false) => vec![50, 100, 200, 500],
            (_, true) => vec![50, 200],
        }
    }

    /// Test-set size of the random split (Table 1).
    pub(super) fn test_size(self) -> usize {
        match self {
            Data::Sinc => 1000,
            Data::Boston => 156,
            Data::Abalone => 1177,
        }
    }

    /// The file of a UCI set inside the data folder.
    pub(super) fn file(self) -> Option<&'static str> {
        match self {
            Data::Sinc => None,
            Data::Boston => Some("boston_housing/housing.data"),
            Data::Abalone => Some("abalone/abalone.data"),
        }
    }
}

/// A training and a test set ready for the solvers, with the kernel width.
pub(super) struct Problem {
    pub(super) x: Mat<f64>,
    pub(super) y: Vec<f64>,
    pub(super) xt: Mat<f64>,
    pub(super) yt: Vec<f64>,
    pub(super) sigma: f64,
}

impl Problem {
    pub(super) fn kernel(&self) -> Kernel {
        Kernel::gaussian(self.sigma)
    }
}

/// The full file of a UCI set, read once (`None` for sinc, which is generated).
pub(super) fn read_full(data: Data, dir: &DataDir) -> Result<Option<Dataset>, BenchError> {
    let Some(file) = data.file() else { return Ok(None) };
    let path = dir.require(data.name(), file)?;
    Ok(Some(match data {
        Data::Boston => read_housing(&path, stolr_memory::MemoryBudget::default())?,
        _ => read_abalone(&path, stolr_memory::MemoryBudget::default())?,
    }))
}

/// Run `run`'s problem: new sinc data, or a new standardized split of `full`.
pub(super) fn problem(data: Data, full: Option<&Dataset>, run: usize) -> Result<Problem, BenchError> {
    let (tt, sigma): (TrainTest, Option<f64>) = match full {
        None => (generate::sinc(1000, data.test_size(), &mut rng(RNG_DATA, run, 0))?, Some(1.0)),
        Some(full) => {
            let split = random_split(full.n(), data.test_size(), &mut rng(RNG_SPLIT, run, 0))?;
            let mut tt = split.apply(full)?;
            tt.standardize()?;
            (tt, None)
        }
    };
    let sigma = match sigma {
        Some(s) => s,
        None => bandwidth_rule(
            tt.train.x.as_ref(),
            DEFAULT_BANDWIDTH_PERCENTILE,
            DEFAULT_BANDWIDTH_PAIRS,
            &mut rng(RNG_SIGMA, run, 0),
        )?,
    };
    let targets = |d: &Dataset| -> Result<Vec<f64>, BenchError> {
        Ok(d.targets().ok_or_else(|| BenchError::Invalid(format!("{}: numeric targets needed", data.name())))?.to_vec())
    };
    let (y, yt) = (targets(&tt.train)?, targets(&tt.test)?);
    Ok(Problem { x: tt.train.x, y, xt: tt.test.x, yt, sigma })
}

/// SLKL's configuration for ν and M landmarks (λ = 1, the solver's other defaults).
pub(super) fn slkl_config(nu: f64, m: usize) -> SlklConfig {
    SlklConfig { lambda: LAMBDA, nu, landmarks: m, ..SlklConfig::default() }
}

/// Runs `solver` to its stop on the solver loop, its coordinates drawn from `rng`, telling
/// `observer` about every update; the model at the end.
pub(super) fn fit_slkl(
    solver: &mut Slkl,
    rng: &mut dyn Rng,
    observer: &mut dyn Observer,
) -> Result<SlklModel, BenchError> {
    let stop = run(solver, rng, observer)?;
    Ok(solver.model(stop)?)
}

/// Test MSE of `e` on `p`.
pub(super) fn predict_mse(e: &KernelExpansion, p: &Problem) -> Result<f64, BenchError> {
    let pred: Vec<f64> = e.predict(p.xt.as_ref())?.iter().copied().collect();
    Ok(mean_squared_error(&pred, &p.yt))
}

/// The ν grid: 10⁻⁴…10¹, two points per decade (one in quick mode).
pub(super) fn nu_grid(quick: bool) -> Vec<f64> {
    log_grid(-4, 1, if quick { 1 } else { 2 })
}

/// Folds of every cross-validation (ν of SLKL and Unif, λ of KRR_n).
pub(super) const FOLDS: usize = 5;

/// The cross-validation folds of `p`'s training set, shared by every validation on it.
pub(super) fn folds(p: &Problem) -> Result<Vec<usize>, BenchError> {
    Ok(random_folds(p.x.nrows(), FOLDS, &mut rng(RNG_NU, 0, 0))?)
}
