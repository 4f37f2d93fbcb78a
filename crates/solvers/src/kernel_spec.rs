//! The kernel of a job as a front end states it: a family and the parameters the user gave,
//! the others left to their defaults.

use stolr_estimators::{
    Bandwidth, DEFAULT_BANDWIDTH_PAIRS, DataRef, EstimatorError, Kernel, KernelFamily, ParameterDefault,
    bandwidth_estimate, bandwidth_estimate_sharded,
};

use crate::job::Shard;

use crate::SolverError;

/// The kernel of a job: its family and the parameters given by name. A parameter not given
/// takes its default ([`ParameterDefault`], declared in the kernel's own file): the bandwidth
/// σ of the Gaussian and Laplacian kernels is chosen from the data (the job's bandwidth rule),
/// the polynomial kernel's scale is the number of features `d`, its offset 1 and its degree 2.
///
/// # Example
/// ```
/// use stolr_solvers::{KernelFamily, KernelSpec};
///
/// let spec = KernelSpec::new(KernelFamily::Polynomial).with("degree", 3.0).unwrap();
/// let kernel = spec.resolve(4, || -> Result<f64, stolr_solvers::SolverError> { unreachable!() }).unwrap();
/// assert_eq!(kernel.parameter("scale"), Some(4.0));
/// assert_eq!(kernel.parameter("degree"), Some(3.0));
/// assert!(KernelSpec::new(KernelFamily::Gaussian).with("degree", 3.0).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSpec {
    family: KernelFamily,
    given: Vec<(&'static str, f64)>,
}

impl KernelSpec {
    /// The family with no parameter given.
    pub fn new(family: KernelFamily) -> Self {
        KernelSpec { family, given: Vec::new() }
    }

    /// The same spec with the parameter `name` given the value `value` (checked when the
    /// kernel is resolved).
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] if the family has no parameter `name`.
    pub fn with(mut self, name: &str, value: f64) -> Result<Self, SolverError> {
        let Some(p) = self.family.parameters().iter().find(|p| p.name == name) else {
            let names: Vec<&str> = self.family.parameters().iter().map(|p| p.name).collect();
            return Err(SolverError::InvalidConfig {
                name: "kernel",
                reason: format!(
                    "the {} kernel has no parameter '{name}' (its parameters: {})",
                    self.family.name(),
                    names.join(", ")
                ),
            });
        };
        self.given.retain(|(n, _)| *n != p.name);
        self.given.push((p.name, value));
        Ok(self)
    }

    /// The family with each of its parameters that `offer` has a value for: a front end offers
    /// every kernel option it was given by name, and each family takes its own.
    pub fn offered(family: KernelFamily, offer: impl Fn(&str) -> Option<f64>) -> Self {
        let given = family.parameters().iter().filter_map(|p| offer(p.name).map(|v| (p.name, v))).collect();
        KernelSpec { family, given }
    }

    /// The kernel family.
    pub fn family(&self) -> KernelFamily {
        self.family
    }

    /// The value given for the parameter `name`, if any.
    pub fn given(&self, name: &str) -> Option<f64> {
        self.given.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// Whether the kernel has a bandwidth that was not given, so that resolving it chooses one
    /// from the data.
    pub fn chooses_bandwidth(&self) -> bool {
        self.family
            .parameters()
            .iter()
            .any(|p| p.default == ParameterDefault::Bandwidth && self.given(p.name).is_none())
    }

    /// The kernel for rows of dimension `d`: each parameter given, else its default;
    /// `bandwidth()` is called (once) when a bandwidth is not given. Validated.
    ///
    /// # Errors
    /// The error of `bandwidth`; [`EstimatorError::InvalidKernel`] (through `E`) for a value
    /// out of its range, or with the value NaN for a parameter without a default that was not
    /// given ([`ParameterDefault::Required`]).
    pub fn resolve<E: From<EstimatorError>>(
        &self,
        d: usize,
        mut bandwidth: impl FnMut() -> Result<f64, E>,
    ) -> Result<Kernel, E> {
        self.family.kernel(|p| {
            if let Some(v) = self.given(p.name) {
                return Ok(v);
            }
            match p.default {
                ParameterDefault::Value(v) => Ok(v),
                ParameterDefault::Features => Ok(d as f64),
                ParameterDefault::Bandwidth => bandwidth(),
                ParameterDefault::Required => Err(EstimatorError::InvalidKernel {
                    kernel: self.family.name(),
                    parameter: p.name,
                    value: f64::NAN,
                    requirement: "it has no default and must be given",
                }
                .into()),
            }
        })
    }
}

impl KernelSpec {
    /// [`KernelSpec::resolve`] for the rows of `shard` (all ranks), a bandwidth not given being
    /// the `percentile`-th percentile of the distances between distinct rows, estimated from
    /// [`DEFAULT_BANDWIDTH_PAIRS`] pairs drawn from `rng` ([`bandwidth_estimate_sharded`]: the
    /// same bits on any number of ranks). Returns the kernel and the estimate when one was made.
    /// Collective.
    ///
    /// # Errors
    /// As [`KernelSpec::resolve`] and [`bandwidth_estimate_sharded`].
    pub fn resolve_on(
        &self,
        shard: &Shard<'_>,
        percentile: f64,
        rng: &mut dyn rand::Rng,
    ) -> Result<(Kernel, Option<Bandwidth>), SolverError> {
        let mut chosen = None;
        let kernel = self.resolve(shard.data().ncols(), || -> Result<f64, SolverError> {
            let b = match shard.data() {
                DataRef::Dense(x) => {
                    bandwidth_estimate_sharded(x, percentile, DEFAULT_BANDWIDTH_PAIRS, rng, shard.comm)?
                }
                // Sparse rows are on one process (`Shard::sparse`).
                x @ DataRef::Sparse(_) => bandwidth_estimate(x, percentile, DEFAULT_BANDWIDTH_PAIRS, rng)?,
                // Float32 rows are on one process (`Shard::whole_f32`).
                x @ DataRef::DenseF32(_) => bandwidth_estimate(x, percentile, DEFAULT_BANDWIDTH_PAIRS, rng)?,
            };
            let sigma = b.sigma;
            chosen = Some(b);
            Ok(sigma)
        })?;
        Ok((kernel, chosen))
    }
}

impl From<Kernel> for KernelSpec {
    /// The kernel as given, every parameter included.
    fn from(kernel: Kernel) -> Self {
        KernelSpec {
            family: kernel.family(),
            given: kernel.parameters().into_iter().map(|(p, v)| (p.name, v)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_takes_given_values_then_defaults_and_asks_for_a_bandwidth_only_when_missing() {
        let asked = std::cell::Cell::new(0);
        let rule = || -> Result<f64, SolverError> {
            asked.set(asked.get() + 1);
            Ok(0.25)
        };
        let auto = KernelSpec::new(KernelFamily::Gaussian);
        assert!(auto.chooses_bandwidth());
        assert_eq!(auto.resolve(3, rule).unwrap(), Kernel::gaussian(0.25));
        let given = KernelSpec::from(Kernel::laplacian(2.0));
        assert!(!given.chooses_bandwidth());
        assert_eq!(given.resolve(3, rule).unwrap(), Kernel::laplacian(2.0));
        assert_eq!(asked.get(), 1);
        let poly = KernelSpec::offered(KernelFamily::Polynomial, |n| (n == "offset").then_some(0.5));
        assert_eq!(poly.resolve(7, rule).unwrap(), Kernel::polynomial(7.0, 0.5, 2));
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn a_bad_value_or_an_unknown_parameter_is_refused() {
        let never = || -> Result<f64, SolverError> { unreachable!() };
        let err = KernelSpec::new(KernelFamily::Polynomial).with("degree", 0.5).unwrap().resolve(2, never).unwrap_err();
        assert!(matches!(err, SolverError::Estimator(EstimatorError::InvalidKernel { parameter: "degree", .. })));
        let err = KernelSpec::new(KernelFamily::Gaussian).with("sigma", -1.0).unwrap().resolve(2, never).unwrap_err();
        assert!(matches!(err, SolverError::Estimator(EstimatorError::InvalidKernel { parameter: "sigma", .. })));
        let err = KernelSpec::new(KernelFamily::Laplacian).with("scale", 2.0).unwrap_err();
        assert!(err.to_string().contains("no parameter 'scale'") && err.to_string().contains("sigma"), "{err}");
    }
}
