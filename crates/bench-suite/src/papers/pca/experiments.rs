//! The runs of \[SVRG-PCA\]: one table row over seeds, and the time-to-target cases.
//!
//! Layout: the exact solver gets the data column-major, the stochastic solvers row-major (they
//! read one sample per inner step); the conversion is not timed.

use std::time::Instant;

use faer::Mat;
use stolr_datasets::generate;
use stolr_solvers::{PcaOutcome, SvrgPcaConfig, VrPcaConfig, captured_norm, exact_pca, svrg_pca, vr_pca};

use super::paper::PaperRow;
use super::results::{ExactTime, MethodMean, PaperValues, SpeedRow, SpeedRun, TableRow};
use crate::BenchError;
use crate::runner::stream;
use crate::stats::mean;

fn timed<T>(f: impl FnOnce() -> Result<T, BenchError>) -> Result<(T, f64), BenchError> {
    let t = Instant::now();
    let out = f()?;
    Ok((out, t.elapsed().as_secs_f64()))
}

/// One method's time, value and epochs per seed.
#[derive(Default)]
struct Samples {
    time: Vec<f64>,
    value: Vec<f64>,
    epochs: Vec<f64>,
}

impl Samples {
    fn add(&mut self, time: f64, value: f64, epochs: usize) {
        self.time.push(time);
        self.value.push(value);
        self.epochs.push(epochs as f64);
    }

    fn mean(&self) -> MethodMean {
        MethodMean { time_s: mean(&self.time), value: mean(&self.value), epochs: mean(&self.epochs) }
    }
}

/// \[SVRG-PCA\] Section 4's protocol (docs/derivations.md §3.7) on `runs` seeds of row `p`: run SVRG-PCA
/// (paper mode) and record its epochs; run VR-PCA for the same number of epochs; Rayleigh–Ritz on
/// every output (its time included). Data of seed `s` comes from stream `1000 + s`, the solvers'
/// draws from stream `s`. `mnist` is Table 8's fixed data (the seeds then only change the
/// solvers' draws).
///
/// # Panics
/// If `p` is a Table 8 row and `mnist` is `None`.
pub fn table_row(p: &PaperRow, runs: usize, mnist: Option<&Mat<f64>>) -> Result<TableRow, BenchError> {
    let (mut exact, mut paper, mut consistent, mut vr) =
        (Samples::default(), Samples::default(), Samples::default(), Samples::default());
    let mut sslevs = Vec::new();
    for seed in 0..runs as u64 {
        let mut gen_rng = stream(1000 + seed, 0);
        let x: Mat<f64> = match p.table {
            "1" => generate::gaussian_matrix(p.n, p.d, 1.0, &mut gen_rng).x,
            "8" => mnist.expect("Table 8 needs MNIST").clone(),
            _ => generate::eigengap(p.n, p.d, p.gap.expect("eigengap row"), &mut gen_rng)?.x,
        };
        let (ex, t) = timed(|| Ok(exact_pca(x.as_ref(), p.r)?))?;
        let sslev = captured_norm(&ex.values);
        sslevs.push(sslev);
        exact.add(t, sslev, 0);
        // The stochastic solvers read one sample per inner step: give them row-major data.
        let rows = x.transpose().to_owned();
        let x = rows.transpose();
        let mut rng = stream(seed, 0);
        let (sp, t): (PcaOutcome, f64) = timed(|| Ok(svrg_pca(x, &SvrgPcaConfig::paper(p.r), &mut rng, &mut ())?))?;
        paper.add(t, captured_norm(&sp.pairs.values), sp.epochs);
        // Gaussian matrices (Table 1) have no eigengap to speak of: the consistent mode never
        // meets its tolerance there, so its epochs are capped at 60 to keep the run short.
        let mut consistent_cfg = SvrgPcaConfig::consistent(p.r);
        if p.table == "1" {
            consistent_cfg.max_epochs = 60;
        }
        let (sc, t) = timed(|| Ok(svrg_pca(x, &consistent_cfg, &mut rng, &mut ())?))?;
        consistent.add(t, captured_norm(&sc.pairs.values), sc.epochs);
        let vr_epochs = sp.epochs.max(1);
        let (v, t) = timed(|| Ok(vr_pca(x, &VrPcaConfig::new(p.r, vr_epochs), &mut rng, &mut ())?))?;
        vr.add(t, captured_norm(&v.pairs.values), v.epochs);
    }
    Ok(TableRow {
        table: p.table.to_owned(),
        gap: p.gap,
        n: p.n,
        d: p.d,
        r: p.r,
        seeds: runs,
        sslev: mean(&sslevs),
        exact: exact.mean(),
        svrg_paper: paper.mean(),
        svrg_consistent: consistent.mean(),
        vr_pca: vr.mean(),
        paper: PaperValues { svrg: p.svrg, vr: p.vr, sslev: p.sslev },
    })
}

/// The speed cases: MNIST (pixels/255, r = 6) when given, and a low-rank-plus-noise matrix
/// (stream 7; `4000 × 1000` quick, `20000 × 5000` full, r = 10).
pub fn speed_cases(mnist: Option<&Mat<f64>>, quick: bool) -> Result<Vec<(String, Mat<f64>, usize)>, BenchError> {
    let mut cases: Vec<(String, Mat<f64>, usize)> = Vec::new();
    if let Some(m) = mnist {
        cases.push(("MNIST 70000 × 784 (pixels/255), r = 6".into(), m.clone(), 6));
    }
    let (n, d) = if quick { (4000, 1000) } else { (20_000, 5000) };
    let lr = generate::low_rank_plus_noise(n, d, 10, 0.1, &mut stream(7, 0))?;
    cases.push((format!("low-rank 10 + noise 0.1, {n} × {d}, r = 10"), lr.x, 10));
    Ok(cases)
}

/// Time to reach `0.9999·sslev` (sslev from the exact solver on the same data) for SVRG-PCA
/// (consistent mode) and VR-PCA (at most 30 epochs), both drawing from stream 1 in turn.
pub fn speed_row(name: String, x: &Mat<f64>, r: usize) -> Result<SpeedRow, BenchError> {
    let (ex, t_exact) = timed(|| Ok(exact_pca(x.as_ref(), r)?))?;
    let sslev = captured_norm(&ex.values);
    let target = 0.9999 * sslev;
    let rows = x.transpose().to_owned();
    let x = rows.transpose();
    let mut rng = stream(1, 0);
    let cfg = SvrgPcaConfig { target: Some(target), ..SvrgPcaConfig::consistent(r) };
    let (s, t_svrg) = timed(|| Ok(svrg_pca(x, &cfg, &mut rng, &mut ())?))?;
    let vcfg = VrPcaConfig { target: Some(target), ..VrPcaConfig::new(r, 30) };
    let (v, t_vr) = timed(|| Ok(vr_pca(x, &vcfg, &mut rng, &mut ())?))?;
    let run = |o: &PcaOutcome, time_s: f64| SpeedRun {
        time_s,
        epochs: o.epochs,
        value: captured_norm(&o.pairs.values),
        stop: o.stop.to_string(),
    };
    Ok(SpeedRow {
        case: name,
        sslev,
        target,
        exact: ExactTime { time_s: t_exact },
        svrg_consistent: run(&s, t_svrg),
        vr_pca: run(&v, t_vr),
        svrg_vs_exact_time: t_svrg / t_exact,
        vr_vs_exact_time: t_vr / t_exact,
    })
}
