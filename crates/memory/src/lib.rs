//! The memory budget of a run.
//!
//! Every allocation whose size follows from the data's shape, a parameter (landmarks `m`, rank
//! `r`, random features, iterations, subsample sizes) or a file header is estimated first and
//! checked against one [`MemoryBudget`]; over the limit the caller gets a
//! [`MemoryError::OverBudget`] naming what was estimated, before any work and instead of a
//! panic or an out-of-memory kill.
//!
//! ```
//! use stolr_memory::{MemoryBudget, MemoryError, f64_bytes, parse_size};
//! let budget = MemoryBudget::bytes(parse_size("200M")?);
//! budget.check("the dense kernel matrix (n = 1000)", f64_bytes(&[1000, 1000]))?; // 8 MB: fine
//! let err = budget.check("the dense kernel matrix (n = 19020)", f64_bytes(&[19020, 19020])).unwrap_err();
//! assert!(err.to_string().contains("2.70 GiB"));
//! # Ok::<(), MemoryError>(())
//! ```

use std::sync::OnceLock;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// An estimated allocation exceeds the budget.
    #[error("{what} needs an estimated {}, over the memory limit of {}", format_bytes(*.needed), format_bytes(*.limit))]
    OverBudget {
        /// What would be allocated, with the sizes it follows from (e.g. "the n × m kernel
        /// block (n = 494021, m = 2000)").
        what: String,
        /// The estimate in bytes (saturated at `u64::MAX` when the size overflows).
        needed: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A size text such as `2G` that cannot be read.
    #[error("cannot read the size '{text}': {reason} (give bytes or a number with K, M, G or T, e.g. 500M, 2G)")]
    BadSize {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The number of bytes a run may allocate for the allocations it estimates.
///
/// The default ([`MemoryBudget::default`]) is 80 % of the memory available (`MemAvailable` of
/// `/proc/meminfo`) when it is first asked for in the process; where that cannot be read, 80 %
/// of 8 GiB. There is no budget of the process: a budget is a value that travels with the work
/// it bounds (a job, the last parameter `memory` of a data reader or a model loader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    limit: u64,
}

impl MemoryBudget {
    /// No limit (every check passes). For tests and callers that budget elsewhere.
    pub const UNLIMITED: Self = Self { limit: u64::MAX };

    /// A limit of `limit` bytes.
    pub const fn bytes(limit: u64) -> Self {
        Self { limit }
    }

    /// `fraction` (in `(0, 1]`) of the memory available now, in bytes; 8 GiB assumed available
    /// where `/proc/meminfo` cannot be read.
    pub fn share_of_available(fraction: f64) -> Self {
        let available = available_bytes().unwrap_or(8 << 30);
        Self { limit: (available as f64 * fraction.clamp(0.0, 1.0)) as u64 }
    }

    /// The limit in bytes.
    pub const fn limit(self) -> u64 {
        self.limit
    }

    /// Checks that `bytes` more fit: `Ok` when `bytes <= limit`.
    ///
    /// # Errors
    /// [`MemoryError::OverBudget`] naming `what` otherwise.
    pub fn check(self, what: impl Into<String>, bytes: u64) -> Result<(), MemoryError> {
        if bytes <= self.limit {
            Ok(())
        } else {
            Err(MemoryError::OverBudget { what: what.into(), needed: bytes, limit: self.limit })
        }
    }
}

impl Default for MemoryBudget {
    /// 80 % of the memory available when first asked in this process (the same value after).
    fn default() -> Self {
        static DEFAULT: OnceLock<MemoryBudget> = OnceLock::new();
        *DEFAULT.get_or_init(|| Self::share_of_available(0.8))
    }
}

/// Bytes of a dense `f64` array of shape `shape`, saturating at `u64::MAX` (a size typed by a
/// user or read from a header can overflow; it must then fail the check, not wrap around).
pub fn f64_bytes(shape: &[usize]) -> u64 {
    shape.iter().fold(8u64, |acc, &dim| acc.saturating_mul(dim as u64))
}

/// Bytes kept per iteration by the record of an iterative run: the convergence trace of the
/// command-line tool (the tuple in memory and its line in `report.json`, about 100
/// characters) and the observers of the bench-suite and of Python.
pub const ITERATION_RECORD_BYTES: u64 = 128;

/// Checks that a record of `iterations` iterations ([`ITERATION_RECORD_BYTES`] each) fits
/// `budget`, for every front end alike: a count of iterations no run could record (nor
/// finish: `10¹²` SKPCA draws) is refused up front instead of running for ever. `parameter`
/// names the count in the message (`iterations`, `--epochs`, `n_iter`).
///
/// # Errors
/// [`MemoryError::OverBudget`] naming `parameter` and `iterations`.
pub fn check_iterations(budget: MemoryBudget, parameter: &str, iterations: usize) -> Result<(), MemoryError> {
    budget.check(
        format!("the per-iteration record of {parameter} = {iterations}"),
        (iterations as u64).saturating_mul(ITERATION_RECORD_BYTES),
    )
}

/// The memory available to a new allocation now (`MemAvailable` in `/proc/meminfo`), in bytes,
/// or `None` where that file is missing or unreadable.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Reads a size: bytes (`1048576`) or a number with a binary suffix `K`, `M`, `G`, `T`
/// (powers of 1024, optionally followed by `B` or `iB`; `1.5G` is allowed).
///
/// # Errors
/// [`MemoryError::BadSize`] for empty, negative, non-numeric, zero or overflowing sizes and
/// unknown suffixes.
pub fn parse_size(text: &str) -> Result<u64, MemoryError> {
    let bad = |reason| MemoryError::BadSize { text: text.to_string(), reason };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    if number.is_empty() {
        return Err(bad("it does not start with a number"));
    }
    let value: f64 = number.parse().map_err(|_| bad("the number is malformed"))?;
    let unit: u64 = match suffix.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(bad("unknown unit")),
    };
    let bytes = value * unit as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad("it is too large"));
    }
    if bytes < 1.0 {
        return Err(bad("it must be at least one byte"));
    }
    Ok(bytes as u64)
}

/// `bytes` for a message, in binary units with three significant digits (`12.5 GiB`, `980 MiB`).
pub fn format_bytes(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "more than 16 EiB (the size overflows)".into();
    }
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ if value >= 100.0 => format!("{value:.0} {}", UNITS[unit]),
        _ if value >= 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.2} {}", UNITS[unit]),
    }
}

/// Peak resident set size of this process in bytes: `VmHWM` of `/proc/self/status` (Linux,
/// reported in kB). `None` where the file or the field is missing or malformed.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// `VmHWM` in bytes from the text of `/proc/<pid>/status`.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let rest = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let mut words = rest.split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => kib.checked_mul(1024),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_status_line() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(1234 * 1024));
        assert_eq!(parse_vm_hwm("VmRSS: 1 kB\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM: lots kB\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM: 5 MB\n"), None);
    }
    use proptest::prelude::*;

    #[test]
    fn sizes_read_with_binary_units() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
        assert_eq!(parse_size("3kb"), Ok(3072));
        for bad in ["", "G", "-1G", "2X", "0", "1e400", "99999999999T"] {
            assert!(matches!(parse_size(bad), Err(MemoryError::BadSize { .. })), "{bad}");
        }
    }

    #[test]
    fn the_check_refuses_exactly_above_the_limit_and_names_what() {
        let budget = MemoryBudget::bytes(1000);
        assert!(budget.check("a", 1000).is_ok());
        let err = budget.check("the n × n kernel matrix (n = 12)", 1001).unwrap_err();
        assert_eq!(
            err,
            MemoryError::OverBudget { what: "the n × n kernel matrix (n = 12)".into(), needed: 1001, limit: 1000 }
        );
        assert_eq!(
            err.to_string(),
            "the n × n kernel matrix (n = 12) needs an estimated 1001 B, over the memory limit of 1000 B"
        );
    }

    #[test]
    fn the_default_is_a_positive_share_of_what_is_available() {
        let budget = MemoryBudget::default();
        assert!(budget.limit() > 0);
        if let Some(available) = available_bytes() {
            assert!(budget.limit() <= available);
        }
        assert_eq!(budget, MemoryBudget::default());
    }

    #[test]
    fn formatting_picks_the_unit() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(12_500 << 20), "12.2 GiB");
        assert_eq!(format_bytes(980 << 20), "980 MiB");
        assert_eq!(format_bytes(u64::MAX), "more than 16 EiB (the size overflows)");
    }

    proptest! {
        #[test]
        fn f64_bytes_is_the_product_or_saturates(a in 0usize..1 << 40, b in 0usize..1 << 40) {
            let exact = 8u128 * a as u128 * b as u128;
            let expected = if exact > u64::MAX as u128 { u64::MAX } else { exact as u64 };
            prop_assert_eq!(f64_bytes(&[a, b]), expected);
        }

        #[test]
        fn a_size_and_its_text_in_mib_agree(mib in 1u64..1 << 20) {
            prop_assert_eq!(parse_size(&format!("{mib}M")), Ok(mib << 20));
        }
    }
}
