//! The solvers every front end offers, by name: the one registration point of a solver's name
//! (as the CLI's `--solver` and Python's `solver=` spell it), its one-line description, and the
//! configuration it starts from. The command-line tool lists these values in its help and
//! parses them; the Python package parses the same names; the fitted models record them.
//!
//! Adding a solver is its own file in its family, one entry here, and the arm that builds it
//! (`KpcaMethod::solver` in `kpca/fit.rs`, `PcaMethod::batch` in `pca/fit.rs`,
//! `PcaMethod::streaming` in `streaming/job.rs`, `KrrMethod::solver` in `krr/fit.rs`).

use stolr_estimators::KernelFamily;

/// A closed set of named choices: every value, its name and its one-line description.
pub trait Named: Copy + PartialEq + 'static {
    /// What the values are, for messages (`kernel PCA solver`, `kernel`).
    const WHAT: &'static str;
    /// Every value, in the order of the help text.
    const ALL: &'static [Self];
    /// The name as the CLI and Python spell it.
    fn name(self) -> &'static str;
    /// One line on what it is, for the CLI's help.
    fn about(self) -> &'static str;
    /// Other names accepted for it (scikit-learn's, for a kernel); none by default.
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }

    /// The value named `name` (or one of its aliases).
    ///
    /// # Errors
    /// A message naming every value, for an unknown name.
    fn parse(name: &str) -> Result<Self, String> {
        Self::ALL.iter().copied().find(|v| v.name() == name || v.aliases().contains(&name)).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
            format!("unknown {} '{name}' (one of {})", Self::WHAT, names.join(", "))
        })
    }
}

/// The kernel PCA solvers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KpcaMethod {
    /// SKPCA: stochastic proximal gradient descent with shrinkage.
    Skpca,
    /// Exact eigenpairs: the dense kernel matrix or the matrix-free operator, by memory and
    /// estimated cost ([`crate::OperatorChoice::decide`]).
    Exact,
    /// Exact eigenpairs on the dense kernel matrix, whatever the estimated cost.
    ExactDense,
    /// Exact eigenpairs without the kernel matrix.
    ExactMatrixFree,
    /// Exact eigenpairs of the Nyström approximation.
    Nystrom,
    /// The Kernel Hebbian Algorithm.
    Kha,
    /// Nyström from a stream: reservoir-sampled landmarks, memory independent of `n`.
    StreamingNystrom,
    /// Random Fourier features fed to capped MSG, from a stream.
    StreamingRff,
}

impl Named for KpcaMethod {
    const WHAT: &'static str = "kernel PCA solver";
    const ALL: &'static [Self] = &[
        Self::Skpca,
        Self::Exact,
        Self::ExactDense,
        Self::ExactMatrixFree,
        Self::Nystrom,
        Self::Kha,
        Self::StreamingNystrom,
        Self::StreamingRff,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Skpca => "skpca",
            Self::Exact => "exact",
            Self::ExactDense => "exact-dense",
            Self::ExactMatrixFree => "exact-matrix-free",
            Self::Nystrom => "nystrom",
            Self::Kha => "kha",
            Self::StreamingNystrom => "streaming-nystrom",
            Self::StreamingRff => "streaming-rff",
        }
    }

    fn about(self) -> &'static str {
        match self {
            Self::Skpca => "Stochastic proximal gradient descent with shrinkage ([SKPCA] Algorithm 1)",
            Self::Exact => {
                "Exact eigenpairs: the dense kernel matrix (memory 8·n² bytes) when it fits --memory-limit and is \
                 estimated faster, else the matrix-free solver (report.json says which ran and why)"
            }
            Self::ExactDense => {
                "Exact eigenpairs on the dense kernel matrix (memory 8·n² bytes, refused over --memory-limit), whatever \
                 the estimated cost"
            }
            Self::ExactMatrixFree => {
                "Exact eigenpairs without the kernel matrix: a tiled kernel operator and a block Krylov–Schur \
                 eigensolver (memory O(n·(d + rank)), time O(n²·d) per block product)"
            }
            Self::Nystrom => "Exact eigenpairs of the Nyström approximation with --landmarks columns",
            Self::Kha => "The Kernel Hebbian Algorithm (constant step --eta, --iterations steps; memory O(n·rank))",
            Self::StreamingNystrom => {
                "Nyström from a stream (two passes, --landmarks reservoir-sampled; memory O(m² + m·d), independent of n)"
            }
            Self::StreamingRff => {
                "Random Fourier features (--features frequencies) fed to capped MSG from a stream (memory O(D·(d + rank)))"
            }
        }
    }
}

/// The PCA solvers, batch and streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcaMethod {
    /// SVRG-PCA with Barzilai–Borwein steps.
    SvrgBb,
    /// Shamir's block VR-PCA.
    VrPca,
    /// The Gram-matrix eigendecomposition.
    Exact,
    /// Matrix stochastic gradient, one pass.
    Msg,
    /// Capped MSG, one pass.
    CappedMsg,
    /// The incremental algorithm, one pass.
    Incremental,
    /// Oja's rule with QR, one pass.
    Oja,
}

impl Named for PcaMethod {
    const WHAT: &'static str = "PCA solver";
    const ALL: &'static [Self] =
        &[Self::SvrgBb, Self::VrPca, Self::Exact, Self::Msg, Self::CappedMsg, Self::Incremental, Self::Oja];

    fn name(self) -> &'static str {
        match self {
            Self::SvrgBb => "svrg-bb",
            Self::VrPca => "vr-pca",
            Self::Exact => "exact",
            Self::Msg => "msg",
            Self::CappedMsg => "capped-msg",
            Self::Incremental => "incremental",
            Self::Oja => "oja",
        }
    }

    fn about(self) -> &'static str {
        match self {
            Self::SvrgBb => "SVRG on the exact-penalty objective with Barzilai–Borwein steps ([SVRG-PCA])",
            Self::VrPca => "Shamir's block VR-PCA",
            Self::Exact => "Gram-matrix eigendecomposition (covariance for tall data, X Xᵀ otherwise)",
            Self::Msg => "Matrix stochastic gradient, one pass over a stream ([MSG])",
            Self::CappedMsg => "Capped MSG with rank cap K = rank + 1 (or --cap), one pass over a stream ([MSG])",
            Self::Incremental => "The incremental algorithm of Arora et al. (2012), one pass over a stream",
            Self::Oja => "Stochastic power method (Oja's rule with QR), one pass over a stream",
        }
    }
}

/// The kernel ridge regression solvers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KrrMethod {
    /// SLKL: a sparse conical combination of rank-1 Nyström kernels.
    Slkl,
    /// KRR_n on all training points.
    Krr,
    /// KRR_M on the landmarks only.
    KrrSubset,
    /// Nyström KRR over the span of the landmark kernel functions.
    Nystrom,
    /// Unif: uniform weights on the rank-1 kernels.
    Uniform,
}

impl Named for KrrMethod {
    const WHAT: &'static str = "kernel ridge regression solver";
    const ALL: &'static [Self] = &[Self::Slkl, Self::Krr, Self::KrrSubset, Self::Nystrom, Self::Uniform];

    fn name(self) -> &'static str {
        match self {
            Self::Slkl => "slkl",
            Self::Krr => "krr",
            Self::KrrSubset => "krr-subset",
            Self::Nystrom => "nystrom",
            Self::Uniform => "uniform",
        }
    }

    fn about(self) -> &'static str {
        match self {
            Self::Slkl => {
                "Stochastic low-rank kernel learning ([SLKL]): sparse conical combination of M rank-1 Nyström \
                 kernels, fitted by coordinate descent"
            }
            Self::Krr => {
                "KRR_n: kernel ridge regression on all n training points (dense n × n Cholesky; memory about 16·n² \
                 bytes)"
            }
            Self::KrrSubset => "KRR_M: kernel ridge regression on the M landmarks only",
            Self::Nystrom => {
                "Nyström KRR: ridge regression over the span of M landmark kernel functions, fitted on all n points; \
                 memory O(M² + n·d) (direct solve or preconditioned conjugate gradients)"
            }
            Self::Uniform => "Unif: KRR with uniform weights on the M rank-1 kernels (the best common weight for ν)",
        }
    }
}

/// The kernel families are those the kernel registry of `stolr-estimators` declares
/// (`kernels/mod.rs`): their names, formulas and aliases come from each kernel's own file.
impl Named for KernelFamily {
    const WHAT: &'static str = "kernel";
    const ALL: &'static [Self] = KernelFamily::ALL;

    fn name(self) -> &'static str {
        KernelFamily::name(self)
    }

    fn about(self) -> &'static str {
        KernelFamily::about(self)
    }

    /// scikit-learn's names: `rbf` for the Gaussian, `poly` for the polynomial kernel.
    fn aliases(self) -> &'static [&'static str] {
        KernelFamily::aliases(self)
    }
}

#[cfg(test)]
mod tests {
    use stolr_estimators::Kernel;

    use crate::SolverError;

    use super::*;

    fn round_trip<T: Named + std::fmt::Debug>() {
        for &v in T::ALL {
            assert_eq!(T::parse(v.name()), Ok(v));
            assert!(!v.about().is_empty());
        }
        let names: std::collections::HashSet<&str> = T::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names.len(), T::ALL.len(), "{}: names are distinct", T::WHAT);
        let err = T::parse("nope").unwrap_err();
        assert!(err.contains(T::WHAT) && T::ALL.iter().all(|v| err.contains(v.name())), "{err}");
    }

    #[test]
    fn every_name_parses_back_and_an_unknown_one_lists_them() {
        round_trip::<KpcaMethod>();
        round_trip::<PcaMethod>();
        round_trip::<KrrMethod>();
        round_trip::<KernelFamily>();
        assert_eq!(KernelFamily::parse("rbf"), Ok(KernelFamily::Gaussian));
        assert_eq!(KernelFamily::parse("poly"), Ok(KernelFamily::Polynomial));
    }

    #[test]
    fn a_kernel_family_rebuilds_its_kernel_from_its_parameters() {
        let kernels = [Kernel::gaussian(2.0), Kernel::laplacian(0.5), Kernel::polynomial(3.0, 1.0, 4)];
        for k in kernels {
            let family = k.family();
            assert_eq!(Named::name(family), k.name());
            let rebuilt = family.kernel(|p| Ok::<f64, SolverError>(k.parameter(p.name).expect(p.name)));
            assert_eq!(rebuilt.unwrap(), k);
        }
    }

    #[test]
    fn a_kernel_refuses_a_fractional_degree_and_a_missing_or_bad_parameter() {
        #[derive(Debug, PartialEq)]
        enum E {
            Missing(&'static str),
            Invalid(&'static str),
        }
        impl From<stolr_estimators::EstimatorError> for E {
            fn from(e: stolr_estimators::EstimatorError) -> Self {
                match e {
                    stolr_estimators::EstimatorError::InvalidKernel { parameter, .. } => E::Invalid(parameter),
                    other => panic!("{other}"),
                }
            }
        }
        let poly = |p: &stolr_estimators::Parameter| Ok::<f64, E>(if p.name == "degree" { 2.5 } else { 1.0 });
        assert_eq!(KernelFamily::Polynomial.kernel(poly), Err(E::Invalid("degree")));
        assert_eq!(KernelFamily::Gaussian.kernel(|p| Err::<f64, E>(E::Missing(p.name))), Err(E::Missing("sigma")));
        assert_eq!(KernelFamily::Laplacian.kernel(|_| Ok::<f64, E>(-1.0)), Err(E::Invalid("sigma")));
    }
}
