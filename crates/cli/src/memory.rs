//! Peak resident memory of this process and the run's memory budget.

pub use stolr_memory::peak_rss_bytes;

use std::sync::OnceLock;

use stolr_memory::MemoryBudget;

static BUDGET: OnceLock<MemoryBudget> = OnceLock::new();

/// Sets the run's memory budget (`--memory-limit`); the first call wins. It also becomes the
/// process's budget ([`MemoryBudget::set_process`]), which the data readers check file headers
/// against.
pub fn set_budget(budget: MemoryBudget) {
    if BUDGET.set(budget).is_ok() {
        MemoryBudget::set_process(budget);
    }
}

/// The run's memory budget: `--memory-limit`, else 80 % of the memory available at the start.
pub fn budget() -> MemoryBudget {
    BUDGET.get().copied().unwrap_or_default()
}
