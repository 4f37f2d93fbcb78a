//! \[SKPCA\]'s datasets, what the paper reports on them, and the constants of its figures.

use std::path::Path;

use faer::Mat;
use stolr_datasets::{read_libsvm, read_magic};
use stolr_model::standardize;

use crate::BenchError;
use crate::runner::{Options, OutDir};

/// How a dataset file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Libsvm,
    Magic,
}

impl Format {
    pub(super) fn name(self) -> &'static str {
        match self {
            Format::Libsvm => "libsvm",
            Format::Magic => "magic",
        }
    }

    pub(super) fn parse(s: &str) -> Result<Self, BenchError> {
        match s {
            "libsvm" => Ok(Format::Libsvm),
            "magic" => Ok(Format::Magic),
            other => Err(BenchError::Invalid(format!("unknown format {other} (libsvm or magic)"))),
        }
    }
}

/// A dataset of \[SKPCA\] and what the paper reports on it.
pub(super) struct PaperDataset {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    /// Figure number in the paper.
    pub(super) figure: u32,
    pub(super) file: &'static str,
    pub(super) format: Format,
    pub(super) standardize: bool,
    /// The two thresholds of panels (a) and (b), smaller first.
    pub(super) taus: [f64; 2],
    /// rank(K̂) the paper reports for them.
    pub(super) paper_ranks: [usize; 2],
    /// Exact eigenpairs computed for K̂ (more than rank(K̂) at the smaller τ).
    pub(super) target_pairs: usize,
    /// Iterations of panels (a)/(b) per τ (outer) and k (inner, in the order of `FEATURES`):
    /// full run, quick run. Chosen so that the rank has levelled off and the runs fit the time
    /// budget: the k = 50 runs cost about 3× more per iteration and settle sooner.
    pub(super) iterations: [[usize; 2]; 2],
    pub(super) quick_iterations: [[usize; 2]; 2],
    /// SKPCA iterations of panel (c): full run, quick run.
    pub(super) iterations_c: usize,
    pub(super) quick_iterations_c: usize,
    /// The factor the paper divided the Baseline time by in panel (c).
    pub(super) baseline_divisor: f64,
    /// The paper's statement about SKPCA against Nyström in panel (c).
    pub(super) paper_crossing: &'static str,
}

pub(super) const DATASETS: [PaperDataset; 2] = [
    PaperDataset {
        name: "mushrooms",
        title: "Mushrooms",
        figure: 1,
        file: "mushrooms/mushrooms",
        format: Format::Libsvm,
        standardize: false,
        taus: [1.0, 10.0],
        paper_ranks: [158, 55],
        target_pairs: 170,
        iterations: [[200, 100], [300, 300]],
        quick_iterations: [[100, 50], [200, 150]],
        iterations_c: 1500,
        quick_iterations_c: 600,
        baseline_divisor: 2.0,
        paper_crossing: "SKPCA outperforms Nyström after 10 seconds",
    },
    PaperDataset {
        name: "magic",
        title: "Magic",
        figure: 2,
        file: "magic04/magic04.data",
        format: Format::Magic,
        standardize: true,
        taus: [10.0, 100.0],
        paper_ranks: [89, 17],
        target_pairs: 100,
        iterations: [[150, 80], [150, 100]],
        quick_iterations: [[60, 40], [60, 40]],
        iterations_c: 1000,
        quick_iterations_c: 500,
        baseline_divisor: 20.0,
        paper_crossing: "similar behaviours (no time given)",
    },
];

/// Fourier components of panels (a) and (b).
pub(super) const FEATURES: [usize; 2] = [5, 50];
/// Panel (c): `K₅₀`, τ = 10 (rank(K̂) ≥ 50 on both datasets), k = 50.
pub(super) const RANK_C: usize = 50;
pub(super) const TAU_C: f64 = 10.0;
pub(super) const FEATURES_C: usize = 50;
/// KHA's constant step (\[SKPCA\], "Experimental Setting").
pub(super) const KHA_ETA: f64 = 0.05;
/// Slopes are fitted over t ≥ this.
pub(super) const FIT_FROM: f64 = 10.0;
/// The paper's reference curve `REF_C / t`.
pub(super) const REF_C: f64 = 0.03;

/// The data matrix of the file `path` in `format`, standardized if asked.
pub(super) fn load(path: &Path, format: Format, standardized: bool) -> Result<Mat<f64>, BenchError> {
    let data = match format {
        Format::Libsvm => read_libsvm(path, stolr_memory::MemoryBudget::default()),
        Format::Magic => read_magic(path, stolr_memory::MemoryBudget::default()),
    }?;
    let mut x = data.x;
    if standardized {
        standardize(&mut x);
    }
    Ok(x)
}

/// τ as the figures and tables print it.
pub(super) fn fmt_tau(tau: f64) -> String {
    format!("{tau}")
}

/// What this run does.
pub(super) struct Settings {
    pub(super) quick: bool,
    /// Seeds of panels (a)/(b).
    pub(super) seeds: usize,
    /// SKPCA seeds of panel (c).
    pub(super) seeds_c: u64,
    /// KHA's time budget in panel (c) is SKPCA's time, at most this many seconds.
    pub(super) kha_max_seconds: f64,
    /// Nyström landmark counts of panel (c), besides the equal-memory one.
    pub(super) landmarks: Vec<usize>,
    pub(super) datasets: Vec<&'static PaperDataset>,
    pub(super) out: OutDir,
}

impl Settings {
    /// The settings of a run with `opts` on `datasets`; creates the output folder.
    ///
    /// # Errors
    /// [`BenchError::Io`] if the output folder cannot be created.
    pub(super) fn new(opts: &Options, datasets: Vec<&'static PaperDataset>) -> Result<Self, BenchError> {
        let quick = opts.quick;
        Ok(Self {
            quick,
            seeds: opts.seeds_or(2, 10),
            seeds_c: 1,
            kha_max_seconds: if quick { 10.0 } else { 30.0 },
            landmarks: if quick { vec![100, 500] } else { vec![100, 250, 500, 1000] },
            datasets,
            out: OutDir::create(&opts.out)?,
        })
    }

    pub(super) fn iterations(&self, ds: &PaperDataset, tau_index: usize, k_index: usize) -> usize {
        if self.quick { ds.quick_iterations[tau_index][k_index] } else { ds.iterations[tau_index][k_index] }
    }

    pub(super) fn iterations_c(&self, ds: &PaperDataset) -> usize {
        if self.quick { ds.quick_iterations_c } else { ds.iterations_c }
    }
}
