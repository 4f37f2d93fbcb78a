//! Peak resident memory of the current process, the memory figure of the benchmark runs.
//!
//! Each solver runs in its own process (see [`crate::timed_kpca`]), so the peak is that
//! solver's own: its data, its state and its workspace, plus the small fixed footprint of the
//! program.

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

    #[test]
    fn this_process_has_a_peak_on_linux() {
        if cfg!(target_os = "linux") {
            let peak = peak_rss_bytes().expect("Linux reports VmHWM");
            assert!(peak > 1 << 20);
        }
    }
}
