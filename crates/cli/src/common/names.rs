//! The library's named choices (solvers, kernels) as clap values: their names, aliases and
//! one-line help come from [`stolr_solvers::Named`], so the command line spells none of them
//! itself.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use stolr_solvers::Named;

/// The parser of a `--solver` or `--kernel` value: one of `T::ALL` by name or alias.
pub fn parser<T: Named + Send + Sync>() -> impl TypedValueParser<Value = T> {
    let values =
        T::ALL.iter().map(|v| PossibleValue::new(v.name()).help(v.about()).aliases(v.aliases().iter().copied()));
    PossibleValuesParser::new(values).try_map(|name| T::parse(&name))
}
