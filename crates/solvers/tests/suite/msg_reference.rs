//! MSG and capped MSG (\[MSG\]) against a straightforward reference that holds the eigenvectors
//! `U` explicitly and forms `U Q` at every step (the update as the paper's Algorithm 1 writes
//! it): [`Msg`] keeps `U = V R` with a lazily folded rotation and must give the same iterates up
//! to rounding, one sample at a time and in mini-batches, on data with an outlier row, repeated
//! rows and a constant column; the same seed gives the same bits on 1 and 2 threads.

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{block_eigen_update, project_capped_rank, project_capped_simplex, rank_one_eigen_update};
use stolr_solvers::{Msg, MsgConfig, SolverState, StepSize, StreamingPca};

const C: f64 = 0.7;

/// The reference iterate: `U` `(d, m)` and `σ`, updated by forming the new basis every step.
struct Reference {
    u: Mat<f64>,
    values: Vec<f64>,
    cap: Option<usize>,
    k: usize,
    t: usize,
}

impl Reference {
    fn project(&self, values: &[f64]) -> Vec<f64> {
        let d = self.u.nrows();
        let mut p = match self.cap {
            Some(cap) => project_capped_rank(values, d, cap, self.k as f64).unwrap(),
            None => project_capped_simplex(values, d - values.len(), self.k as f64).unwrap(),
        }
        .values;
        let keep = p.iter().take_while(|&&v| v > 0.0).count();
        p.truncate(keep);
        p
    }

    fn observe(&mut self, x: &[f64]) {
        self.t += 1;
        let eta = C / (self.t as f64).sqrt();
        let update = rank_one_eigen_update(self.u.as_ref(), &self.values, x, eta).unwrap();
        let projected = self.project(update.values());
        self.u = update.basis(self.u.as_ref(), projected.len()).unwrap();
        self.values = projected;
    }

    fn observe_minibatch(&mut self, batch: MatRef<'_, f64>) {
        let etas: Vec<f64> = (0..batch.nrows())
            .map(|_| {
                self.t += 1;
                C / (self.t as f64).sqrt()
            })
            .collect();
        let update = block_eigen_update(self.u.as_ref(), &self.values, batch, &etas).unwrap();
        let projected = self.project(update.values());
        self.u = update.basis(projected.len()).unwrap();
        self.values = projected;
    }
}

/// `n × d` Gaussian rows with decaying column scales, then: row 7 an outlier (×40), rows 20–23
/// equal to row 19, every third row repeated once more later, and column 3 constant.
fn awkward_data(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = Mat::from_fn(n, d, |_, j| {
        let g: f64 = StandardNormal.sample(&mut r);
        g * 2.0 / (1.0 + j as f64).sqrt()
    });
    for j in 0..d {
        x[(7, j)] *= 40.0;
        for i in 20..24 {
            x[(i, j)] = x[(19, j)];
        }
        for i in (60..n).step_by(3) {
            x[(i, j)] = x[(i - 50, j)];
        }
    }
    for i in 0..n {
        x[(i, 3)] = 0.75;
    }
    x
}

fn dense(u: MatRef<'_, f64>, values: &[f64]) -> Mat<f64> {
    let scaled = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)] * values[j]);
    scaled * u.transpose()
}

fn max_abs(a: MatRef<'_, f64>) -> f64 {
    let mut m = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max(a[(i, j)].abs());
        }
    }
    m
}

/// Compares the iterates: the same rank, eigenvalues within `tol` (relative to the largest)
/// and `U diag(σ) Uᵀ` within `tol`; and the leading eigenvector's subspace.
fn assert_close(msg: &Msg, reference: &Reference, tol: f64, what: &str) {
    let (ours, theirs) = (msg.eigenvalues(), &reference.values);
    assert_eq!(ours.len(), theirs.len(), "{what}: rank");
    for (a, b) in ours.iter().zip(theirs) {
        assert!((a - b).abs() <= tol * theirs[0].abs(), "{what}: eigenvalue {a} vs {b}");
    }
    let diff = dense(msg.basis().as_ref(), ours) - dense(reference.u.as_ref(), theirs);
    assert!(max_abs(diff.as_ref()) <= tol, "{what}: iterates differ by {}", max_abs(diff.as_ref()));
    let u = msg.basis();
    let gram = u.transpose() * &u - Mat::<f64>::identity(u.ncols(), u.ncols());
    assert!(max_abs(gram.as_ref()) < 1e-12, "{what}: UᵀU − I = {}", max_abs(gram.as_ref()));
}

fn configs(d: usize, k: usize) -> Vec<(&'static str, MsgConfig)> {
    let step = StepSize::InverseSqrt { c: C };
    vec![
        ("capped K = k + 1", MsgConfig { step, ..MsgConfig::capped(d, k) }),
        ("capped K = 2k", MsgConfig { step, cap: Some(2 * k), ..MsgConfig::msg(d, k) }),
        ("plain", MsgConfig { step, ..MsgConfig::msg(d, k) }),
    ]
}

#[test]
fn single_updates_equal_the_reference() {
    let (n, d, k) = (400, 14, 3);
    let x = awkward_data(n, d, 5);
    for (name, config) in configs(d, k) {
        let mut msg = Msg::new(config, &mut Xoshiro256PlusPlus::seed_from_u64(2)).unwrap();
        let mut reference = Reference { u: msg.basis(), values: msg.eigenvalues().to_vec(), cap: config.cap, k, t: 0 };
        for i in 0..n {
            let row: Vec<f64> = (0..d).map(|j| x[(i, j)]).collect();
            msg.observe(&row).unwrap();
            reference.observe(&row);
            if i % 37 == 0 || i == n - 1 {
                assert_close(&msg, &reference, 3e-12, &format!("{name}, sample {i}"));
            }
        }
    }
}

#[test]
fn minibatches_equal_the_reference() {
    let (n, d, k) = (400, 14, 3);
    let x = awkward_data(n, d, 8);
    for (name, config) in configs(d, k) {
        let mut msg = Msg::new(config, &mut Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
        let mut reference = Reference { u: msg.basis(), values: msg.eigenvalues().to_vec(), cap: config.cap, k, t: 0 };
        // Single samples between the batches, so that batches start from a rotated frame;
        // batch sizes below and above d − m.
        let mut start = 0;
        for (step, b) in [1, 5, 1, 1, 16, 3, 1, 30, 2, 1].iter().cycle().enumerate() {
            let b = (*b).min(n - start);
            if b == 0 {
                break;
            }
            let batch = x.as_ref().subrows(start, b);
            if b == 1 {
                let row: Vec<f64> = (0..d).map(|j| batch[(0, j)]).collect();
                msg.observe(&row).unwrap();
                reference.observe(&row);
            } else {
                msg.observe_minibatch(batch).unwrap();
                reference.observe_minibatch(batch);
            }
            start += b;
            assert_close(&msg, &reference, 3e-12, &format!("{name}, step {step}"));
        }
    }
}

/// A run resumed from a state saved mid-way (the frame and its rotation) repeats the run that
/// never stopped, bit for bit (the same bits on 1, 2 and 4 threads, single updates and
/// mini-batches: `tests/threads.rs`).
#[test]
fn a_resumed_run_repeats_the_bits_of_one_that_never_stopped() {
    let (n, d, k) = (300, 40, 4);
    let x = awkward_data(n, d, 3);
    let run = |stop_at: Option<usize>| {
        let config = MsgConfig::capped(d, k);
        let mut msg = Msg::new(config, &mut Xoshiro256PlusPlus::seed_from_u64(9)).unwrap();
        for i in 0..n {
            if Some(i) == stop_at {
                let mut state = SolverState::new();
                msg.save_state(&mut state).unwrap();
                msg = Msg::new(config, &mut Xoshiro256PlusPlus::seed_from_u64(1)).unwrap();
                msg.restore_state(&state).unwrap();
            }
            if i % 50 < 10 {
                msg.observe_minibatch(x.as_ref().subrows(i, 1)).unwrap();
            } else if i % 50 == 10 {
                msg.observe_minibatch(x.as_ref().subrows(i, 8)).unwrap();
            } else if i % 50 < 18 {
                continue;
            } else {
                let row: Vec<f64> = (0..d).map(|j| x[(i, j)]).collect();
                msg.observe(&row).unwrap();
            }
        }
        (msg.basis(), msg.eigenvalues().to_vec(), msg.subspace())
    };
    let one = run(None);
    for stop in [23, 35, 61] {
        assert_eq!(one, run(Some(stop)), "resumed at {stop}");
    }
}
