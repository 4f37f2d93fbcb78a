//! The landmarks of a Nyström fit, drawn or given by the user: one type that the kernel PCA
//! Nyström solver and the Nyström kernel ridge regression solvers (direct and CG; KRR_M and Unif
//! for indices) take, so that no front end assembles them itself (scikit-learn #4982).

use faer::Mat;
use rand::Rng;
use stolr_estimators::DataRef;
use stolr_model::Standardization;

use crate::{ModelRows, SolverError};

/// The `m` landmarks `L` of a Nyström approximation $K \approx C W^{+} C^\top$, $C = K(X, L)$
/// `(n, m)`, $W = K(L, L)$ `(m, m)`.
///
/// - [`Landmarks::Draw`]: `m` training rows drawn uniformly without replacement from the
///   solver's random stream (what every Nyström solver did before; the same seed gives the same
///   rows).
/// - [`Landmarks::Indices`]: the training rows with these indices, in this order (0-based,
///   `< n`, distinct: a repeated index would make `W` exactly singular and is refused). No
///   random draw is made, so the fit does not depend on the seed. Works for dense and sparse
///   training rows.
/// - [`Landmarks::Rows`]: arbitrary landmark rows `(m, d)`, not necessarily training rows
///   (finite, `d` the number of features of the training rows; repeated rows are allowed, as are
///   distinct indices of equal training rows: the solvers handle a singular `W` by dropping its
///   null space (kernel PCA) or a jitter (KRR)). The Nyström formulas are the same: `C` is the
///   kernel of the training rows against these rows. Dense rows are accepted with sparse
///   training rows (the kernel of a sparse row against a dense one is exact). They are in the
///   units of the raw features: a fit that standardizes its rows standardizes them with the
///   same statistics ([`Landmarks::standardized`]). No random draw is made.
///
/// The landmark rows are copied into the model in every case (`8·m·d` bytes, counted in each
/// solver's memory estimate as the drawn ones are).
#[derive(Debug, Clone, PartialEq)]
pub enum Landmarks {
    /// `m` training rows drawn uniformly without replacement (`1 ≤ m ≤ n`).
    Draw(usize),
    /// The training rows with these indices (0-based, distinct, each `< n`), in this order.
    Indices(Vec<usize>),
    /// Landmark rows `(m, d)`, finite; not necessarily training rows.
    Rows(Mat<f64>),
}

/// The landmarks of one fit, as the solvers use them: their rows and, when they are training
/// rows, their indices.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenLandmarks {
    /// The training-row indices (drawn or given), `None` for given rows.
    pub indices: Option<Vec<usize>>,
    /// The landmark rows `(m, d)`: dense or sparse as the training rows for indices, dense for
    /// given rows.
    pub rows: ModelRows,
}

impl Landmarks {
    /// The number of landmarks `m`.
    pub fn count(&self) -> usize {
        match self {
            Landmarks::Draw(m) => *m,
            Landmarks::Indices(idx) => idx.len(),
            Landmarks::Rows(rows) => rows.nrows(),
        }
    }

    /// Whether the landmarks are given (indices or rows), not drawn.
    pub fn is_given(&self) -> bool {
        !matches!(self, Landmarks::Draw(_))
    }

    /// Checks the landmarks against `n` training rows of `d` features, without drawing.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmarks`) for: `m` outside `[1, n]` (draw); an empty
    /// list, an index `≥ n`, an index given twice (indices); no rows, rows of width other than
    /// `d`, a non-finite entry (rows).
    pub fn validate(&self, n: usize, d: usize) -> Result<(), SolverError> {
        let bad = |reason: String| Err(SolverError::InvalidConfig { name: "landmarks", reason });
        match self {
            Landmarks::Draw(m) => {
                if *m == 0 || *m > n {
                    return bad(format!("need 1 <= m <= n = {n}, got {m}"));
                }
            }
            Landmarks::Indices(idx) => {
                if idx.is_empty() {
                    return bad("the list of landmark indices is empty".into());
                }
                let mut seen = vec![false; n];
                for &i in idx {
                    if i >= n {
                        return bad(format!("landmark index {i} is out of range for n = {n} training rows"));
                    }
                    if std::mem::replace(&mut seen[i], true) {
                        return bad(format!(
                            "landmark index {i} is given twice (its kernel column would repeat and W be singular)"
                        ));
                    }
                }
            }
            Landmarks::Rows(rows) => {
                if rows.nrows() == 0 {
                    return bad("no landmark rows given".into());
                }
                if rows.ncols() != d {
                    return bad(format!(
                        "the landmark rows have {} columns, the training rows {d} features",
                        rows.ncols()
                    ));
                }
                for j in 0..rows.ncols() {
                    if let Some(i) = (0..rows.nrows()).find(|&i| !rows[(i, j)].is_finite()) {
                        return bad(format!(
                            "landmark row {i} has a non-finite entry ({}) in column {j}",
                            rows[(i, j)]
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The training-row indices of the landmarks among `n` rows: drawn from `rng` for
    /// [`Landmarks::Draw`] (`rand::seq::index::sample`, the draw of
    /// [`crate::select_landmarks`]), as given for [`Landmarks::Indices`] (no draw), `None` for
    /// [`Landmarks::Rows`] (no draw). Validates first ([`Landmarks::validate`], with `d`).
    ///
    /// # Errors
    /// As [`Landmarks::validate`].
    pub fn indices<R: Rng + ?Sized>(&self, n: usize, d: usize, rng: &mut R) -> Result<Option<Vec<usize>>, SolverError> {
        self.validate(n, d)?;
        Ok(match self {
            Landmarks::Draw(m) => Some(rand::seq::index::sample(rng, n, *m).into_vec()),
            Landmarks::Indices(idx) => Some(idx.clone()),
            Landmarks::Rows(_) => None,
        })
    }

    /// The landmarks of a fit on all the training rows `x` `(n, d)`: validated, indices drawn
    /// or taken ([`Landmarks::indices`]), rows gathered from `x` (in its form) or copied.
    ///
    /// # Errors
    /// As [`Landmarks::validate`].
    pub fn choose<R: Rng + ?Sized>(&self, x: DataRef<'_>, rng: &mut R) -> Result<ChosenLandmarks, SolverError> {
        let indices = self.indices(x.nrows(), x.ncols(), rng)?;
        let rows = match (&indices, self) {
            (Some(idx), _) => ModelRows::gather(x, idx),
            (None, Landmarks::Rows(rows)) => ModelRows::Dense(rows.clone()),
            (None, _) => unreachable!("only given rows have no indices"),
        };
        Ok(ChosenLandmarks { indices, rows })
    }

    /// The landmarks for rows standardized by `standardization`: given rows standardized with
    /// the same statistics (they are given in the units of the raw features), the others
    /// unchanged.
    ///
    /// # Errors
    /// [`SolverError::InvalidConfig`] (`landmarks`) if the rows do not have the statistics'
    /// width.
    pub fn standardized(&self, standardization: Option<&Standardization>) -> Result<Landmarks, SolverError> {
        match (self, standardization) {
            (Landmarks::Rows(rows), Some(stats)) => {
                let mut rows = rows.clone();
                stats.apply(&mut rows).map_err(|e| SolverError::InvalidConfig {
                    name: "landmarks",
                    reason: format!("the landmark rows cannot be standardized: {e}"),
                })?;
                Ok(Landmarks::Rows(rows))
            }
            _ => Ok(self.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn reason(e: SolverError) -> String {
        match e {
            SolverError::InvalidConfig { name: "landmarks", reason } => reason,
            other => panic!("expected InvalidConfig(landmarks), got {other:?}"),
        }
    }

    #[test]
    fn hostile_landmarks_are_typed_errors() {
        let (n, d) = (10, 3);
        let check = |l: Landmarks| reason(l.validate(n, d).unwrap_err());
        assert!(check(Landmarks::Draw(0)).contains("1 <= m"));
        assert!(check(Landmarks::Draw(11)).contains("n = 10"));
        assert!(check(Landmarks::Indices(vec![])).contains("empty"));
        assert!(check(Landmarks::Indices(vec![1, 10])).contains("index 10 is out of range"));
        assert!(check(Landmarks::Indices(vec![3, 1, 3])).contains("index 3 is given twice"));
        assert!(check(Landmarks::Rows(Mat::zeros(0, 3))).contains("no landmark rows"));
        assert!(check(Landmarks::Rows(Mat::zeros(2, 4))).contains("4 columns"));
        let mut nan = Mat::<f64>::zeros(2, 3);
        nan[(1, 2)] = f64::NAN;
        assert!(check(Landmarks::Rows(nan)).contains("row 1"));
        let mut inf = Mat::<f64>::zeros(2, 3);
        inf[(0, 0)] = f64::INFINITY;
        assert!(check(Landmarks::Rows(inf)).contains("non-finite"));
        // Valid ones pass, repeated rows included.
        Landmarks::Indices(vec![9, 0, 4]).validate(n, d).unwrap();
        Landmarks::Rows(Mat::from_fn(3, 3, |_, j| j as f64)).validate(n, d).unwrap();
    }

    #[test]
    fn given_landmarks_draw_nothing_and_drawn_ones_follow_the_seed() {
        let x = Mat::from_fn(20, 2, |i, j| (i * 3 + j) as f64);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let before = rng.clone();
        let given = Landmarks::Indices(vec![5, 2]).choose(x.as_ref().into(), &mut rng).unwrap();
        assert_eq!(given.indices, Some(vec![5, 2]));
        assert_eq!(given.rows.dense().unwrap()[(0, 1)], 16.0);
        let rows = Landmarks::Rows(Mat::from_fn(1, 2, |_, j| j as f64 - 0.5)).choose(x.as_ref().into(), &mut rng);
        assert_eq!(rows.unwrap().indices, None);
        assert_eq!(rng, before, "a given landmark set must not touch the generator");
        let drawn = Landmarks::Draw(4).choose(x.as_ref().into(), &mut rng).unwrap();
        let mut again = before.clone();
        assert_eq!(drawn.indices.unwrap(), crate::select_landmarks(20, 4, &mut again).unwrap());
    }

    #[test]
    fn given_rows_are_standardized_with_the_training_statistics() {
        let stats = Standardization { mean: vec![1.0, -2.0], scale: vec![2.0, 1.0] };
        let rows = Landmarks::Rows(Mat::from_fn(1, 2, |_, j| [3.0, 0.0][j]));
        let Landmarks::Rows(z) = rows.standardized(Some(&stats)).unwrap() else { panic!() };
        assert_eq!((z[(0, 0)], z[(0, 1)]), (1.0, 2.0));
        assert_eq!(Landmarks::Indices(vec![1]).standardized(Some(&stats)).unwrap(), Landmarks::Indices(vec![1]));
        let wide = Landmarks::Rows(Mat::zeros(1, 3));
        assert!(reason(wide.standardized(Some(&stats)).unwrap_err()).contains("standardized"));
    }
}
