//! `summary.md` of the kernel PCA benchmark.

use super::runs::Row;
use crate::table::{MISSING, fixed};

/// The table of every run.
pub(super) fn markdown(rows: &[Row]) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or(MISSING.to_owned(), |x| fixed(x, digits));
    let mut s = String::from(
        "| data | solver | ‖K₅₀ − K‖_F/n | vs exact | λ₁ | max rel. diff of λ₁..₅₀ vs exact | time (s) | ms/iter | peak MB | time vs exact | memory vs exact | final rank |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.dataset,
            r.solver,
            fixed(r.residual, 6),
            opt(r.residual_vs_exact, 3),
            opt(r.top_eigenvalue, 2),
            r.max_rel_eigenvalue_diff_vs_exact.map(|x| format!("{x:.1e}")).unwrap_or_else(|| MISSING.into()),
            fixed(r.solve_s, 2),
            opt(r.per_iteration_ms, 1),
            opt(r.peak_memory_mb, 0),
            opt(r.time_vs_exact, 2),
            opt(r.memory_vs_exact, 3),
            r.final_rank.map(|x| x.to_string()).unwrap_or_else(|| MISSING.into()),
        );
    }
    s
}
