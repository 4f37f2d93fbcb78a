//! Figures 1–2: the "orthogonal distribution" `P(x = e_i) = σ_i ∝ τ^{−i}`, d = 32, τ = 1.1
//! (docs/derivations.md §5.8's consistent reading), k ∈ {1, 2, 4}: the rank of the MSG iterate over
//! time, and the suboptimality of every method on one shared sample sequence.

use std::time::Instant;

use faer::Mat;
use rand::RngExt;

use stolr_solvers::{IterationReport, Named, PcaMethod};

use super::common::{METHODS, pass, solver, suboptimality};
use crate::curve::log_spaced;
use crate::runner::stream;
use crate::{BenchError, ResultsFile, RunRecord, Series};

/// The experiment's setting.
pub(super) struct Setting {
    pub(super) d: usize,
    pub(super) tau: f64,
    pub(super) samples: usize,
    /// `c` of `η_t = c/√t`.
    pub(super) c: f64,
}

/// One method on one k.
pub(super) struct MethodRun {
    pub(super) method: PcaMethod,
    /// Iterations at which the suboptimality was measured, and its values.
    pub(super) t: Vec<f64>,
    pub(super) suboptimality: Vec<f64>,
    pub(super) mean_rank_second_half: f64,
    pub(super) max_rank: usize,
    /// MSG only: `rank(M_t)` at `t ≤ 100` and every tenth `t`.
    pub(super) rank_t: Vec<f64>,
    pub(super) rank: Vec<f64>,
}

impl MethodRun {
    pub(super) fn final_suboptimality(&self) -> f64 {
        *self.suboptimality.last().unwrap_or(&f64::NAN)
    }
}

/// Every method for every k.
pub(super) struct Orthogonal {
    pub(super) setting: Setting,
    /// `(k, one run per method)`.
    pub(super) per_k: Vec<(usize, Vec<MethodRun>)>,
}

/// Every method for every k. The sequence of k comes from stream 0
/// of seed `100 + k`, the solvers' starts from seed `7 + k`. Records every run in `results`.
pub(super) fn run(quick: bool, results: &mut ResultsFile) -> Result<Orthogonal, BenchError> {
    let setting = Setting { d: 32, tau: 1.1, samples: if quick { 5000 } else { 20_000 }, c: 1.0 };
    let Setting { d, tau, samples: t_max, c } = setting;
    let weights: Vec<f64> = (1..=d).map(|i| tau.powi(-(i as i32))).collect();
    let total: f64 = weights.iter().sum();
    let sigma: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let cumulative: Vec<f64> = sigma
        .iter()
        .scan(0.0, |s, v| {
            *s += v;
            Some(*s)
        })
        .collect();
    let cov = Mat::from_fn(d, d, |i, j| if i == j { sigma[i] } else { 0.0 });
    let marks = log_spaced(t_max, 60);
    let mut out = Vec::new();
    for k in [1usize, 2, 4] {
        let mut rng = stream(100 + k as u64, 0);
        let sequence: Vec<usize> = (0..t_max)
            .map(|_| {
                let u: f64 = rng.random();
                cumulative.iter().position(|&c| u < c).unwrap_or(d - 1)
            })
            .collect();
        let mut runs = Vec::new();
        for method in METHODS {
            let started = Instant::now();
            let mut s = solver(method, d, k, c, 7 + k as u64)?;
            let samples = sequence.iter().map(|&i| {
                let mut x = vec![0.0; d];
                x[i] = 1.0;
                x
            });
            // Suboptimality at the marks, rank k_t after every sample, from the loop's reports.
            let mut seen = Vec::<IterationReport>::new();
            pass(s.as_mut(), samples, &marks, |s| suboptimality(&cov, &sigma, &s.subspace(), k), &mut seen)?;
            let ys: Vec<f64> = seen.iter().filter_map(|r| r.distance_to_target).collect();
            let max_rank = seen.iter().map(|r| r.rank).max().unwrap_or(0);
            let late: Vec<f64> = seen.iter().filter(|r| r.t >= t_max / 2).map(|r| r.rank as f64).collect();
            let (late_sum, late_count) = (late.iter().sum::<f64>(), late.len());
            let (rank_t, ranks): (Vec<f64>, Vec<f64>) = if method == PcaMethod::Msg {
                seen.iter().filter(|r| r.t % 10 == 0 || r.t <= 100).map(|r| (r.t as f64, r.rank as f64)).unzip()
            } else {
                (Vec::new(), Vec::new())
            };
            let xs: Vec<f64> = marks.iter().map(|&t| t as f64).collect();
            let m = MethodRun {
                method,
                t: xs,
                suboptimality: ys,
                mean_rank_second_half: late_sum / late_count.max(1) as f64,
                max_rank,
                rank_t,
                rank: ranks,
            };
            let mut run = RunRecord::new(format!("orthogonal d={d} tau={tau}"), method.name())
                .with_parameter("k", k)
                .with_parameter("c", c)
                .with_parameter("samples", t_max);
            run.series.push(Series::new(
                "suboptimality",
                "iteration",
                "suboptimality",
                m.t.clone(),
                m.suboptimality.clone(),
            )?);
            if method == PcaMethod::Msg {
                run.series.push(Series::new("rank", "iteration", "rank of M_t", m.rank_t.clone(), m.rank.clone())?);
            }
            run.set_scalar("final_suboptimality", m.final_suboptimality());
            run.set_scalar("mean_rank_second_half", m.mean_rank_second_half);
            run.time_seconds = started.elapsed().as_secs_f64();
            results.runs.push(run);
            runs.push(m);
        }
        out.push((k, runs));
    }
    Ok(Orthogonal { setting, per_k: out })
}
