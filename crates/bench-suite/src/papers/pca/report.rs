//! `pca.md`: \[SVRG-PCA\]'s tables next to ours, and the speed comparison.

use super::results::{PcaResults, SpeedRow, TableRow};
use crate::table::{MISSING, fixed};

/// The Markdown summary of `results`.
pub fn markdown(results: &PcaResults) -> String {
    let mut s = String::from(
        "## Paper 002, Tables 1 and 3–8: ‖AᵀX‖_F after Rayleigh–Ritz (mean over seeds)\n\n\
         Table 1 uses N(0, 1) entries; the paper's generator has an unknown smaller scale, so compare \
         the ratio to sslev, not the values.\n\n\
         | table | gap | n | d | r | sslev (ours) | sslev (paper) | SVRG paper mode | paper's SVRG | SVRG consistent | VR-PCA | paper's VR | exact | time: SVRG paper / consistent / VR / exact (s) | epochs: paper / consistent |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &results.tables {
        s += &table_line(r);
    }
    if !results.speed.is_empty() {
        s += "\n## Time to 0.9999·sslev (one run)\n\n| case | exact (s) | SVRG-PCA consistent (s) | epochs | VR-PCA (s) | epochs | SVRG / exact | VR / exact |\n|---|---|---|---|---|---|---|---|\n";
        for r in &results.speed {
            s += &speed_line(r);
        }
    }
    s
}

fn table_line(r: &TableRow) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} | {} / {} |\n",
        r.table,
        r.gap.map(|g| g.to_string()).unwrap_or_else(|| MISSING.into()),
        r.n,
        r.d,
        r.r,
        fixed(r.sslev, 4),
        fixed(r.paper.sslev, 4),
        fixed(r.svrg_paper.value, 4),
        fixed(r.paper.svrg, 4),
        fixed(r.svrg_consistent.value, 4),
        fixed(r.vr_pca.value, 4),
        fixed(r.paper.vr, 4),
        fixed(r.exact.value, 4),
        fixed(r.svrg_paper.time_s, 3),
        fixed(r.svrg_consistent.time_s, 3),
        fixed(r.vr_pca.time_s, 3),
        fixed(r.exact.time_s, 3),
        fixed(r.svrg_paper.epochs, 1),
        fixed(r.svrg_consistent.epochs, 1),
    )
}

fn speed_line(r: &SpeedRow) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
        r.case,
        fixed(r.exact.time_s, 3),
        fixed(r.svrg_consistent.time_s, 3),
        r.svrg_consistent.epochs,
        fixed(r.vr_pca.time_s, 3),
        r.vr_pca.epochs,
        fixed(r.svrg_vs_exact_time, 2),
        fixed(r.vr_vs_exact_time, 2),
    )
}
