//! Peak resident memory of this process.

/// Peak resident set size in bytes (`VmHWM` of `/proc/self/status`), or `None` where the
/// kernel does not report it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

use std::sync::OnceLock;

use stolr_memory::MemoryBudget;

static BUDGET: OnceLock<MemoryBudget> = OnceLock::new();

/// Sets the run's memory budget (`--memory-limit`); the first call wins.
pub fn set_budget(budget: MemoryBudget) {
    let _ = BUDGET.set(budget);
}

/// The run's memory budget: `--memory-limit`, else 80 % of the memory available at the start.
pub fn budget() -> MemoryBudget {
    BUDGET.get().copied().unwrap_or_default()
}
