//! The kernels, one file each, and the one place that registers them.
//!
//! A kernel is a type implementing [`KernelFunction`] in its own file (`gaussian.rs`,
//! `laplacian.rs`, `polynomial.rs`, `linear.rs`, `cosine.rs`): its name, its parameters and their defaults, how its
//! values are formed ([`KernelForm`] and its [`Evaluator`]), its spectral density when it is
//! shift-invariant and its Maclaurin coefficients when it is a dot-product kernel. The
//! `kernels!` call below registers it: it becomes a variant of [`Kernel`] and of
//! [`KernelFamily`], and every solver, model file, report and front end reaches it through
//! them. Adding a kernel is its file plus one line there.

mod cosine;
mod expansion;
mod gaussian;
mod laplacian;
mod linear;
mod polynomial;
mod prepared;
mod sums;

use faer::{Mat, MatMut, MatRef};

pub use cosine::Cosine;
pub use gaussian::Gaussian;
pub use laplacian::Laplacian;
pub use linear::Linear;
pub use polynomial::Polynomial;
pub(crate) use prepared::PreparedKernel;
pub use prepared::{KernelEvaluation, kernel_row_means, kernel_row_means_range};

use crate::EstimatorError;
use crate::sparse::DataRef;

/// How the values of a kernel are formed from two rows, which decides how a block of them is
/// computed ([`KernelEvaluation::Expanded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelForm {
    /// A function of $\|x - y\|_2^2$ ([`Evaluator::of_sq_distance`]): blocks by one GEMM of
    /// rows shifted to their coordinate-wise median, with the pairs the expansion could cancel
    /// recomputed directly.
    SquaredDistance,
    /// A function of $\langle x, y\rangle$ ([`Evaluator::of_inner_product`]): blocks by one
    /// GEMM of the raw rows.
    InnerProduct,
    /// Any function of the two rows: blocks by direct loops ([`Evaluator::pair`]).
    Pairwise,
}

/// The value a kernel PCA or regression job gives a parameter that is not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParameterDefault {
    /// None: the parameter must be given.
    Required,
    /// This constant.
    Value(f64),
    /// A bandwidth chosen from the data (the 20th percentile of the distances between rows,
    /// [`crate::bandwidth_estimate`]).
    Bandwidth,
    /// The number of features `d` of the data.
    Features,
}

/// One parameter of a kernel, as model files, reports and the front ends name it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parameter {
    /// The name (`"sigma"`, `"scale"`, `"offset"`, `"degree"`).
    pub name: &'static str,
    /// What it is, with its unit and range.
    pub about: &'static str,
    /// Whether it takes whole numbers only (written as a JSON integer; at most `u32::MAX`).
    pub integer: bool,
    /// The value a job gives it when it is not given.
    pub default: ParameterDefault,
}

/// Evaluates one kernel on rows of one dimension `d`, with whatever it precomputed for them
/// ([`KernelFunction::evaluator`]). The form-specific methods are called only for the
/// kernel's [`KernelFunction::FORM`].
pub trait Evaluator: Copy + Send + Sync {
    /// $\kappa(x, y)$ for two rows of length `d`, by a direct loop over the coordinates: the
    /// reference every blocked evaluation is checked against.
    fn pair(&self, x: &[f64], y: &[f64]) -> f64;

    /// $\kappa(x, x)$ of one row (the diagonal of the kernel matrix).
    fn diagonal(&self, x: &[f64]) -> f64 {
        self.pair(x, x)
    }

    /// [`KernelForm::SquaredDistance`]: $\kappa$ from the squared distance `d2 >= 0`.
    fn of_sq_distance(&self, _d2: f64) -> f64 {
        unreachable!("of_sq_distance is only called for KernelForm::SquaredDistance")
    }

    /// [`KernelForm::SquaredDistance`]: `d2[i] = κ(d2[i])` for a slice of squared distances
    /// `>= 0`, each the same bits as [`Evaluator::of_sq_distance`] of it (a kernel may
    /// vectorize this; the default calls it value by value).
    fn of_sq_distances(&self, d2: &mut [f64]) {
        d2.iter_mut().for_each(|v| *v = self.of_sq_distance(*v));
    }

    /// [`KernelForm::SquaredDistance`]: $1/\ell^2$ for the squared length $\ell^2$ over which
    /// the kernel varies (the expansion of a squared distance much below $\ell^2$ is not
    /// trusted when the squared norms are large; see [`KernelEvaluation::Expanded`]).
    fn inv_length_sq(&self) -> f64 {
        unreachable!("inv_length_sq is only called for KernelForm::SquaredDistance")
    }

    /// [`KernelForm::SquaredDistance`]: the kernel is exactly 0 in `f64` once $d^2/\ell^2$
    /// exceeds this (`f64::INFINITY` if it never is).
    fn vanishes_beyond(&self) -> f64 {
        f64::INFINITY
    }

    /// [`KernelForm::InnerProduct`]: $\kappa$ from the inner product `g`.
    fn of_inner_product(&self, _g: f64) -> f64 {
        unreachable!("of_inner_product is only called for KernelForm::InnerProduct")
    }
}

/// What a kernel provides. Each kernel implements it in its own file and is registered once in
/// `kernels!` (`kernels/mod.rs`).
///
/// # References
/// docs/derivations.md §1.1; \[SKPCA\], "Unbiased Estimators".
pub trait KernelFunction: Copy + PartialEq + std::fmt::Debug + Send + Sync + Into<Kernel> + 'static {
    /// Lower-case name (`"gaussian"`), as front ends, model files and reports write it.
    const NAME: &'static str;
    /// Its formula, one line.
    const ABOUT: &'static str;
    /// Other names the front ends accept (scikit-learn's, e.g. `"rbf"`).
    const ALIASES: &'static [&'static str];
    /// Its parameters, in the order of [`KernelFunction::values`].
    const PARAMETERS: &'static [Parameter];
    /// How its values are formed.
    const FORM: KernelForm;
    /// Whether $\kappa(x, y)$ depends on $x - y$ only, so that random Fourier features apply
    /// ([`KernelFunction::draw_frequencies`]).
    const SHIFT_INVARIANT: bool = false;

    /// What evaluates it on rows of one dimension.
    type Evaluator: Evaluator;

    /// The parameters' values, in the order of [`KernelFunction::PARAMETERS`].
    fn values(&self) -> Vec<f64>;

    /// The kernel with these parameter values (in the order of
    /// [`KernelFunction::PARAMETERS`]; integer parameters whole and at most `u32::MAX`).
    /// Not validated: call [`KernelFunction::validate`].
    fn from_values(values: &[f64]) -> Self;

    /// The kernel scikit-learn parameterizes by `gamma`, `coef0` and `degree` (each kernel
    /// uses the ones scikit-learn's kernel of the same name uses). Not validated.
    fn from_sklearn(gamma: f64, coef0: f64, degree: u32) -> Self;

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`] naming the first parameter out of its range.
    fn validate(&self) -> Result<(), EstimatorError>;

    /// Its evaluator for rows of dimension `d`.
    fn evaluator(&self, d: usize) -> Self::Evaluator;

    /// Fills `omega` `(d, k)` column by column (frequency `j` is column `j`) with independent
    /// draws from the spectral density (Bochner): called only when
    /// [`KernelFunction::SHIFT_INVARIANT`].
    fn draw_frequencies(&self, _rng: &mut dyn rand::Rng, _omega: MatMut<'_, f64>) {
        unreachable!("draw_frequencies is only called for shift-invariant kernels")
    }

    /// The coefficient $a_N \ge 0$ of $\kappa(x, y) = \sum_N a_N \langle x, y\rangle^N$ for a
    /// dot-product kernel (random Maclaurin features apply), `None` for other kernels.
    fn maclaurin_coefficient(&self, _order: u32) -> Option<f64> {
        None
    }
}

/// Declares [`Kernel`], [`KernelFamily`] and the crate's `dispatch!` over the registered
/// kernels (`$` is passed in so that the generated macro can have metavariables).
macro_rules! kernels {
    ($d:tt $($(#[$meta:meta])* $variant:ident($ty:ident)),+ $(,)?) => {
        /// A positive semi-definite kernel $\kappa(x, y)$ on $\mathbb{R}^d$: one of the
        /// registered kernels, each defined in its own file ([`KernelFunction`]).
        ///
        /// Parameters are not checked on construction; [`Kernel::validate`] checks them, and
        /// every sampler and operator constructor calls it.
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Kernel {
            $($(#[$meta])* $variant($ty),)+
        }

        /// The registered kernel families, without their parameters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum KernelFamily {
            $($(#[$meta])* $variant,)+
        }

        impl KernelFamily {
            /// Every family, in the order of registration.
            pub const ALL: &'static [KernelFamily] = &[$(KernelFamily::$variant),+];

            /// Lower-case name ([`KernelFunction::NAME`]).
            pub fn name(self) -> &'static str {
                match self { $(KernelFamily::$variant => $ty::NAME,)+ }
            }

            /// Its formula ([`KernelFunction::ABOUT`]).
            pub fn about(self) -> &'static str {
                match self { $(KernelFamily::$variant => $ty::ABOUT,)+ }
            }

            /// Other accepted names ([`KernelFunction::ALIASES`]).
            pub fn aliases(self) -> &'static [&'static str] {
                match self { $(KernelFamily::$variant => $ty::ALIASES,)+ }
            }

            /// Its parameters ([`KernelFunction::PARAMETERS`]).
            pub fn parameters(self) -> &'static [Parameter] {
                match self { $(KernelFamily::$variant => $ty::PARAMETERS,)+ }
            }

            /// The kernel of this family from raw values in the order of
            /// [`KernelFamily::parameters`] (already checked to be whole where required).
            fn kernel_of_values(self, values: &[f64]) -> Kernel {
                match self { $(KernelFamily::$variant => Kernel::$variant($ty::from_values(values)),)+ }
            }

            /// The kernel scikit-learn calls by this family's name with `gamma`, `coef0`,
            /// `degree` ([`KernelFunction::from_sklearn`]). Not validated.
            pub fn sklearn_kernel(self, gamma: f64, coef0: f64, degree: u32) -> Kernel {
                match self { $(KernelFamily::$variant => Kernel::$variant($ty::from_sklearn(gamma, coef0, degree)),)+ }
            }
        }

        impl Kernel {
            /// The family of the kernel.
            pub fn family(&self) -> KernelFamily {
                match self { $(Kernel::$variant(_) => KernelFamily::$variant,)+ }
            }
        }

        $(impl From<$ty> for Kernel {
            fn from(kernel: $ty) -> Kernel {
                Kernel::$variant(kernel)
            }
        })+

        /// `$body` with `$k` bound to the registered kernel inside `$kernel` (a [`Kernel`]),
        /// monomorphized for each kernel type.
        macro_rules! dispatch {
            ($d kernel:expr, $d k:ident => $d body:expr) => {
                match $d kernel { $(crate::kernels::Kernel::$variant($d k) => $d body,)+ }
            };
        }
        pub(crate) use dispatch;
    };
}

// The registry: one line per kernel.
kernels! { $
    /// $\exp(-\|x - y\|_2^2 / (2\sigma^2))$ ([`Gaussian`]).
    Gaussian(Gaussian),
    /// $\exp(-\|x - y\|_1 / \sigma)$ ([`Laplacian`]).
    Laplacian(Laplacian),
    /// $(\langle x, y\rangle / s + c)^q$ ([`Polynomial`]).
    Polynomial(Polynomial),
    /// $\langle x, y\rangle$ ([`Linear`]).
    Linear(Linear),
    /// $\langle x, y\rangle / (\|x\|\,\|y\|)$ ([`Cosine`]).
    Cosine(Cosine),
}

impl Kernel {
    /// Lower-case name of the kernel family (`"gaussian"`, `"laplacian"`, `"polynomial"`,
    /// `"linear"`, `"cosine"`).
    pub fn name(&self) -> &'static str {
        self.family().name()
    }

    /// How its values are formed.
    pub fn form(&self) -> KernelForm {
        dispatch!(self, k => form_of(k))
    }

    /// Whether $\kappa(x, y)$ depends on $x - y$ only, so that random Fourier features apply.
    pub fn is_shift_invariant(&self) -> bool {
        dispatch!(self, k => shift_invariant(k))
    }

    /// The coefficient $a_N$ of $\kappa(x, y) = \sum_N a_N \langle x, y\rangle^N$ for a
    /// dot-product kernel (random Maclaurin features apply), `None` for other kernels.
    pub fn maclaurin_coefficient(&self, order: u32) -> Option<f64> {
        dispatch!(self, k => k.maclaurin_coefficient(order))
    }

    /// The parameters with their values, in the order of [`KernelFamily::parameters`].
    pub fn parameters(&self) -> Vec<(Parameter, f64)> {
        let values = dispatch!(self, k => k.values());
        self.family().parameters().iter().copied().zip(values).collect()
    }

    /// The value of the parameter `name`, `None` if the kernel has none of that name.
    pub fn parameter(&self, name: &str) -> Option<f64> {
        self.parameters().into_iter().find(|(p, _)| p.name == name).map(|(_, v)| v)
    }

    /// The bandwidth: the parameter whose default is [`ParameterDefault::Bandwidth`] (σ of the
    /// Gaussian and Laplacian kernels), `None` for a kernel without one.
    pub fn bandwidth(&self) -> Option<f64> {
        self.parameters().into_iter().find(|(p, _)| p.default == ParameterDefault::Bandwidth).map(|(_, v)| v)
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`], naming the parameter, for a value out of its range
    /// (each kernel's [`KernelFunction::validate`] says which).
    pub fn validate(&self) -> Result<(), EstimatorError> {
        dispatch!(self, k => k.validate())
    }

    /// `k` frequencies $w_1, \dots, w_k$ drawn i.i.d. from the kernel's spectral density
    /// (Bochner) by `rng`, as the columns of a `(d, k)` matrix: the frequencies that
    /// [`crate::RandomFourierFeatures`] draws for each of its draws, for a caller that keeps them
    /// fixed (random features of a stream of rows). Gaussian $w = g/\sigma$, $g \sim N(0, I_d)$;
    /// Laplacian (ℓ1) $w_l \sim \mathrm{Cauchy}(0, 1/\sigma)$ i.i.d. Memory `8·d·k` bytes.
    ///
    /// # Errors
    /// [`EstimatorError::InvalidKernel`] for invalid parameters;
    /// [`EstimatorError::UnsupportedKernel`] for a kernel that is not shift-invariant;
    /// [`EstimatorError::ZeroFeatures`] if `k == 0`.
    pub fn draw_frequencies(&self, d: usize, k: usize, rng: &mut dyn rand::Rng) -> Result<Mat<f64>, EstimatorError> {
        self.validate()?;
        if !self.is_shift_invariant() {
            return Err(EstimatorError::UnsupportedKernel {
                estimator: "rff",
                kernel: self.name(),
                hint: "random Fourier features need a shift-invariant kernel (gaussian, laplacian)",
            });
        }
        if k == 0 {
            return Err(EstimatorError::ZeroFeatures { what: "random Fourier features" });
        }
        let mut omega = Mat::zeros(d, k);
        dispatch!(self, kernel => kernel.draw_frequencies(rng, omega.as_mut()));
        Ok(omega)
    }

    /// $\kappa(x, y)$ for two samples of the same dimension `d`, by a direct loop over the
    /// coordinates ([`Evaluator::pair`]).
    ///
    /// # Panics
    /// If `x.len() != y.len()`.
    pub fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        assert_eq!(x.len(), y.len(), "kernel arguments must have the same dimension");
        dispatch!(self, k => k.evaluator(x.len()).pair(x, y))
    }

    /// The dense kernel matrix $K_{ij} = \kappa(x_i, x_j)$ of the rows of `x`, shape `(n, n)`,
    /// exactly symmetric; a diagonal $\kappa(x, x) = 1$ (Gaussian, Laplacian) is exactly 1.
    ///
    /// Meant for tests and exact baselines: it costs $O(n^2 d)$ time and $n^2$ memory. Values
    /// are formed as [`KernelEvaluation::Expanded`] says (one GEMM for the
    /// [`KernelForm::SquaredDistance`] and [`KernelForm::InnerProduct`] kernels, the former
    /// on rows shifted to their coordinate-wise median with every distance the expansion could
    /// cancel recomputed directly), so that each value is accurate to a few ulps whatever the
    /// offset and spread of the rows. Only the lower triangle is evaluated and then mirrored.
    /// Threads follow `faer::get_global_parallelism()`.
    ///
    /// Sparse rows ([`DataRef::Sparse`]) give the same values to a few ulps, each from sums over
    /// the stored entries only (see [`DataRef`]).
    ///
    /// Parameters are not validated: call [`Kernel::validate`] first.
    pub fn matrix<'x>(&self, x: impl Into<DataRef<'x>>) -> Mat<f64> {
        PreparedKernel::new(*self, x).matrix(faer::get_global_parallelism())
    }

    /// The dense cross-kernel matrix $\kappa(x_i, y_j)$, shape `(n, m)`, for `x` of shape
    /// `(n, d)` and `y` of shape `(m, d)`, each dense or sparse. Same method and cost remarks
    /// as [`Kernel::matrix`].
    ///
    /// # Panics
    /// If `x.ncols() != y.ncols()`.
    pub fn cross<'x, 'y>(&self, x: impl Into<DataRef<'x>>, y: impl Into<DataRef<'y>>) -> Mat<f64> {
        let (x, y) = (x.into(), y.into());
        assert_eq!(x.ncols(), y.ncols(), "cross kernel: x and y must have the same number of columns");
        PreparedKernel::new(*self, x).cross(y, faer::get_global_parallelism())
    }

    /// The kernel columns $K_{:, I}$ for the row indices `idx` of `x`, shape `(n, idx.len())`:
    /// column `j` holds $\kappa(x_i, x_{\mathrm{idx}_j})$ for $i = 0..n$. Indices may repeat.
    ///
    /// # Panics
    /// If an index is `>= x.nrows()`.
    pub fn columns<'x>(&self, x: impl Into<DataRef<'x>>, idx: &[usize]) -> Mat<f64> {
        PreparedKernel::new(*self, x).columns(idx, faer::get_global_parallelism())
    }

    /// The diagonal $\kappa(x_i, x_i)$ of the kernel matrix of the rows of `x` `(n, d)`,
    /// length `n`, and its trace $\operatorname{tr} K$ is its sum. Time $O(nd)$.
    pub fn diagonal<'x>(&self, x: impl Into<DataRef<'x>>) -> Vec<f64> {
        match x.into() {
            DataRef::Dense(x) => dispatch!(self, k => diagonal_of(&k.evaluator(x.ncols()), x)),
            DataRef::DenseF32(x) => {
                // Blocks of rows converted to float64: each value depends on its row only.
                const BLOCK: usize = 4096;
                let mut diagonal = Vec::with_capacity(x.nrows());
                for start in (0..x.nrows()).step_by(BLOCK) {
                    let block = crate::sparse::f32_to_f64(x.subrows(start, BLOCK.min(x.nrows() - start)));
                    diagonal.extend(self.diagonal(block.as_ref()));
                }
                diagonal
            }
            x @ DataRef::Sparse(_) => PreparedKernel::new(*self, x).diagonal(),
        }
    }
}

/// $\kappa(x_i, x_i)$ ([`Evaluator::diagonal`]) of every row of `x` `(n, d)`, length `n`.
pub(crate) fn diagonal_of<E: Evaluator>(e: &E, x: MatRef<'_, f64>) -> Vec<f64> {
    let mut row = vec![0.0; x.ncols()];
    (0..x.nrows())
        .map(|i| {
            for (l, v) in row.iter_mut().enumerate() {
                *v = x[(i, l)];
            }
            e.diagonal(&row)
        })
        .collect()
}

/// [`KernelFunction::FORM`] of a value.
fn form_of<K: KernelFunction>(_: &K) -> KernelForm {
    K::FORM
}

/// [`KernelFunction::SHIFT_INVARIANT`] of a value.
fn shift_invariant<K: KernelFunction>(_: &K) -> bool {
    K::SHIFT_INVARIANT
}

impl KernelFamily {
    /// The kernel of this family with the value `value(p)` of each of its parameters `p`,
    /// validated.
    ///
    /// # Errors
    /// The first error of `value`; [`EstimatorError::InvalidKernel`] for an integer parameter
    /// whose value is not a whole number in `0..=u32::MAX`, or for a value the kernel's
    /// [`Kernel::validate`] refuses.
    pub fn kernel<E: From<EstimatorError>>(
        self,
        mut value: impl FnMut(&Parameter) -> Result<f64, E>,
    ) -> Result<Kernel, E> {
        let mut values = Vec::with_capacity(self.parameters().len());
        for p in self.parameters() {
            let v = value(p)?;
            if p.integer && !(v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0) {
                return Err(EstimatorError::InvalidKernel {
                    kernel: self.name(),
                    parameter: p.name,
                    value: v,
                    requirement: "it must be a whole number in 0..=4294967295",
                }
                .into());
            }
            values.push(v);
        }
        let kernel = self.kernel_of_values(&values);
        kernel.validate()?;
        Ok(kernel)
    }
}
