//! The `--sigma` argument: `auto` or a positive number.

use std::str::FromStr;

/// A kernel bandwidth as the user gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SigmaArg {
    /// Chosen by the bandwidth rule.
    Auto,
    /// A positive, finite value.
    Value(f64),
}

impl FromStr for SigmaArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(SigmaArg::Auto);
        }
        let v: f64 = s.parse().map_err(|_| format!("'{s}' is neither 'auto' nor a number"))?;
        if v.is_finite() && v > 0.0 {
            Ok(SigmaArg::Value(v))
        } else {
            Err(format!("must be positive and finite, got {v}"))
        }
    }
}

impl std::fmt::Display for SigmaArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SigmaArg::Auto => write!(f, "auto"),
            SigmaArg::Value(v) => write!(f, "{v}"),
        }
    }
}
