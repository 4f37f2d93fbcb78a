//! Helpers shared by the CLI test files that use them (`mod common;`): running the `stolr`
//! binary and asserting its outcome.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the `stolr` binary of this build with `args`.
pub fn stolr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stolr")).args(args).output().expect("the stolr binary runs")
}

/// `out`, asserting that the run succeeded (its stderr in the message otherwise).
pub fn ok(out: Output) -> Output {
    assert!(out.status.success(), "stolr failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Asserts that the run failed with `needle` in its stderr, and without a panic.
pub fn fails_with(out: Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure, stderr: {err}");
    assert!(err.contains(needle) && !err.contains("panicked"), "expected '{needle}' in: {err}");
}
