//! `cargo run -p stolr-plot --example rings -- OUT.svg|OUT.png`: an embedding plot of three
//! labelled rings with a convergence curve beside it, to look at the layout.

use faer::Mat;
use stolr_plot::{LinePlot, PlotSeries, embedding_plot};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "rings.svg".to_owned());
    let n = 900;
    let points = Mat::from_fn(n, 2, |i, j| {
        let (r, a) = ((1 + i % 3) as f64, (i / 3) as f64 * std::f64::consts::TAU / (n / 3) as f64);
        let wobble = 0.08 * ((i * 7919) % 101) as f64 / 101.0;
        if j == 0 { (r + wobble) * a.cos() } else { (r + wobble) * a.sin() }
    });
    let labels: Vec<f64> = (0..n).map(|i| (i % 3) as f64).collect();
    let t: Vec<f64> = (1..=300).map(f64::from).collect();
    let mut curve = LinePlot::new("SKPCA convergence", "iteration t", "‖Z_t − K̂‖²_F / n²");
    (curve.x_log, curve.y_log) = (true, true);
    curve.series.push(PlotSeries::new("τ = 1, k = 50", t.clone(), t.iter().map(|t| 0.05 / t + 1e-5).collect()));
    let drawn =
        embedding_plot(out.as_ref(), "Kernel PCA of three rings", points.as_ref(), Some(&labels), Some(&curve))?;
    println!("{out}: {drawn} points");
    Ok(())
}
