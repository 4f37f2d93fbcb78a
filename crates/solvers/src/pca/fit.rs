//! PCA parameters: one entry point that fits the exact, SVRG-PCA or VR-PCA solver into a
//! [`PcaModel`].

use faer::MatRef;
use rand::Rng;

use crate::pca::{PcaModel, SvrgPca, SvrgPcaConfig, VrPca, VrPcaConfig, exact_pca};
use crate::{Fit, Observer, SolverError, Stop, run};

/// Which PCA solver [`Pca`] fits with (the streaming solvers build their model with
/// [`PcaModel::from_basis`] after a pass over a stream).
#[derive(Debug, Clone, PartialEq)]
pub enum PcaSolver {
    /// A dense symmetric eigensolver on `XᵀX` ([`exact_pca`]).
    Exact,
    /// SVRG-PCA with Barzilai–Borwein steps ([`SvrgPca`]); its `rank` is overwritten by
    /// [`Pca::rank`].
    SvrgBb(SvrgPcaConfig),
    /// Shamir's block VR-PCA ([`VrPca`]); its `rank` is overwritten by [`Pca::rank`].
    VrPca(VrPcaConfig),
}

impl PcaSolver {
    /// The name as the CLI spells it: `exact`, `svrg-bb`, `vr-pca`.
    pub fn name(&self) -> &'static str {
        match self {
            PcaSolver::Exact => "exact",
            PcaSolver::SvrgBb(_) => "svrg-bb",
            PcaSolver::VrPca(_) => "vr-pca",
        }
    }
}

/// What [`Pca::prepare`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Column means subtracted, length `d` (zeros without centring).
    pub mean: Vec<f64>,
    /// The scale divided by, length `d` (ones without scaling).
    pub scale: Vec<f64>,
    /// `(x − mean) / scale` `(n, d)`, or its transpose `(d, n)` when `transposed`.
    data: faer::Mat<f64>,
    transposed: bool,
}

impl Prepared {
    /// The prepared data `(x − mean) / scale`, shape `(n, d)`, in the memory layout of the
    /// data given to [`Pca::prepare`] (row-major stays row-major).
    pub fn x(&self) -> MatRef<'_, f64> {
        if self.transposed { self.data.transpose() } else { self.data.as_ref() }
    }
}

/// PCA parameters: `rank` principal axes of the rows of `x`, after subtracting the mean of
/// every feature (`center`, scikit-learn's default) and dividing by the largest absolute value
/// of the centred data (`scale`, e.g. MNIST's 255). [`Fit::fit`] returns a [`PcaModel`] (see its
/// example).
#[derive(Debug, Clone, PartialEq)]
pub struct Pca {
    /// Number of components `r`, `1 ≤ r ≤ min(n, d)`.
    pub rank: usize,
    /// Subtract the mean of every feature.
    pub center: bool,
    /// Divide by the largest absolute entry (after centring).
    pub scale: bool,
    /// The solver.
    pub solver: PcaSolver,
}

impl Pca {
    /// `rank` components by `solver`, neither centred nor scaled.
    pub fn new(rank: usize, solver: PcaSolver) -> Self {
        Self { rank, center: false, scale: false, solver }
    }

    /// Sets centring.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Sets scaling.
    pub fn scale(mut self, scale: bool) -> Self {
        self.scale = scale;
        self
    }

    /// The mean (zeros without centring) and the scale (ones without scaling) of `x`, and `x`
    /// prepared with them, `(x − mean) / scale`.
    ///
    /// # Errors
    /// [`SolverError::Estimator`] for empty or non-finite data.
    pub fn prepare(&self, x: MatRef<'_, f64>) -> Result<Prepared, SolverError> {
        crate::error::check_data(x)?;
        let d = x.ncols();
        let mean = if self.center { stolr_estimators::column_means(x) } else { vec![0.0; d] };
        // The copy keeps the source's layout (a C-order NumPy array stays row-major): a
        // transposing copy of MNIST costs more than the exact PCA's matrix product.
        let transposed = x.col_stride() == 1 && x.row_stride() != 1;
        let mut data = stolr_estimators::to_owned(if transposed { x.transpose() } else { x });
        // Column j of `data` is a sample (transposed) or a feature.
        for j in 0..data.ncols() {
            let col = data.col_as_slice_mut(j);
            if transposed {
                col.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
            } else {
                col.iter_mut().for_each(|v| *v -= mean[j]);
            }
        }
        let mut scale = vec![1.0; d];
        if self.scale {
            let max = (0..data.ncols())
                .map(|j| data.col_as_slice(j).iter().fold(0.0_f64, |a, v| a.max(v.abs())))
                .fold(0.0, f64::max);
            if max > 0.0 {
                data *= 1.0 / max;
                scale = vec![max; d];
            }
        }
        Ok(Prepared { mean, scale, data, transposed })
    }

    /// Fits on data already prepared by [`Pca::prepare`] and returns the model with the run's
    /// stop reason (`None` for the exact solver) and epoch count.
    ///
    /// # Errors
    /// As [`Fit::fit`].
    pub fn fit_prepared(
        &self,
        prepared: MatRef<'_, f64>,
        mean: Vec<f64>,
        scale: Vec<f64>,
        rng: &mut dyn Rng,
        observer: &mut dyn Observer,
    ) -> Result<(PcaModel, Option<Stop>, usize), SolverError> {
        let n = prepared.nrows();
        let name = self.solver.name();
        let (pairs, stop, epochs) = match &self.solver {
            PcaSolver::Exact => (exact_pca(prepared, self.rank)?, None, 0),
            PcaSolver::SvrgBb(config) => {
                let rows = stolr_estimators::to_owned(prepared.transpose());
                let config = SvrgPcaConfig { rank: self.rank, ..config.clone() };
                let mut solver = SvrgPca::new(rows.transpose(), config, rng)?;
                let stop = run(&mut solver, rng, observer)?;
                let out = solver.finish(stop)?;
                (out.pairs, Some(stop), out.epochs)
            }
            PcaSolver::VrPca(config) => {
                let rows = stolr_estimators::to_owned(prepared.transpose());
                let config = VrPcaConfig { rank: self.rank, ..config.clone() };
                let mut solver = VrPca::new(rows.transpose(), config, rng)?;
                let stop = run(&mut solver, rng, observer)?;
                let out = solver.finish(stop)?;
                (out.pairs, Some(stop), out.epochs)
            }
        };
        Ok((PcaModel::from_basis(name, mean, scale, &pairs, n)?, stop, epochs))
    }
}

impl Fit for Pca {
    type Model = PcaModel;

    /// Prepares `x` `(n, d)` (centre, scale) and fits.
    ///
    /// # Errors
    /// [`SolverError::InvalidRank`] for `rank` 0 or above `min(n, d)`;
    /// [`SolverError::InvalidConfig`] for bad solver settings; [`SolverError::Estimator`] for
    /// empty or non-finite data; [`SolverError::Diverged`] and factorization errors.
    fn fit(&self, x: MatRef<'_, f64>, rng: &mut dyn Rng, observer: &mut dyn Observer) -> Result<PcaModel, SolverError> {
        let p = self.prepare(x)?;
        Ok(self.fit_prepared(p.x(), p.mean.clone(), p.scale.clone(), rng, observer)?.0)
    }
}
