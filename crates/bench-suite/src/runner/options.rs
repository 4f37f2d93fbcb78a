//! The command line of the reproductions and benchmarks, parsed by clap (derive API).
//!
//! Every reproduction takes `--quick` (a shorter run), `--seeds N` (how many seeds, runs or
//! splits to average over; at least 1), `--data DIR` (the data folder, see [`DataDir`]) and
//! `--out DIR` (the output folder): the fields of [`Options`], flattened into each program's own
//! `Args` (in its module), which adds its own flags. A benchmark with a fixed protocol takes
//! only `--data` and `--out` ([`Paths`]). Each program sets the default of `--out` (and any
//! other name of `--seeds`, e.g. `--runs`) on the flattened argument with `mut_arg`, and lets a
//! flag given twice keep its last value (`args_override_self`), as `cargo xtask` relies on.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::BenchError;
use crate::runner::DataDir;

/// The options every reproduction takes.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct Options {
    /// A shorter run of the protocol.
    #[arg(long)]
    pub quick: bool,
    /// How many seeds, runs or splits to average over (at least 1); the default depends on the
    /// program and on --quick.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub seeds: Option<usize>,
    /// The data folder.
    #[arg(long, value_name = "DIR", default_value_t = DataDir::default())]
    pub data: DataDir,
    /// The output folder.
    // Not required: each program gives it its default with `mut_arg`.
    #[arg(long, value_name = "DIR", required = false)]
    pub out: PathBuf,
}

impl Options {
    /// `--seeds N` if given, else `quick` or `full` by the mode.
    pub fn seeds_or(&self, quick: usize, full: usize) -> usize {
        self.seeds.unwrap_or(if self.quick { quick } else { full })
    }
}

/// The options of a benchmark with a fixed protocol: where the data are and where the
/// results go.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct Paths {
    /// The data folder.
    #[arg(long, value_name = "DIR", default_value_t = DataDir::default())]
    pub data: DataDir,
    /// The output folder.
    // Not required: each program gives it its default with `mut_arg`.
    #[arg(long, value_name = "DIR", required = false)]
    pub out: PathBuf,
}

/// A [`BenchError::Usage`] for the program whose arguments are `A`: `message`, then its usage
/// line (for what clap cannot check alone, e.g. a flag that is required unless another is given).
pub fn usage_error<A: clap::CommandFactory>(message: impl fmt::Display) -> BenchError {
    BenchError::Usage(format!("{message}\n{}", A::command().render_usage()))
}

/// A whole number of at least 1 (`--seeds`).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("needs a whole number of at least 1, not '{text}'")),
    }
}

/// The data folder as given on the command line.
impl FromStr for DataDir {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(DataDir::new(text))
    }
}

/// The folder's path (the default shown by `--help`).
impl fmt::Display for DataDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.root().display())
    }
}

/// A comma-separated list of values (`4000,8000`; spaces around items and empty items are
/// skipped), the value of one flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

impl<T: FromStr> FromStr for List<T> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<T>().map_err(|_| format!("bad item '{s}'")))
            .collect::<Result<Vec<T>, String>>()
            .map(List)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// A program as the reproductions declare theirs.
    #[derive(Debug, Parser)]
    #[command(name = "demo-reproduce", args_override_self = true)]
    #[command(mut_arg("out", |a| a.default_value("results/demo")), mut_arg("seeds", |a| a.visible_alias("runs")))]
    struct Demo {
        #[command(flatten)]
        common: Options,
        #[arg(long, value_name = "NAME")]
        only: Option<String>,
        #[arg(long)]
        skip_speed: bool,
        #[arg(long, value_name = "N,N")]
        n: Option<List<usize>>,
    }

    /// A benchmark with a fixed protocol.
    #[derive(Debug, Parser)]
    #[command(name = "demo-bench", mut_arg("out", |a| a.default_value("results/bench")))]
    struct Fixed {
        #[command(flatten)]
        paths: Paths,
    }

    fn parse(args: &[&str]) -> Result<Demo, clap::Error> {
        Demo::try_parse_from(std::iter::once("demo-reproduce").chain(args.iter().copied()))
    }

    #[test]
    fn common_and_own_flags() {
        let o = parse(&["--quick", "--runs", "3", "--data", "/d", "--only", "magic", "--skip-speed"]).unwrap();
        assert!(o.common.quick);
        assert_eq!(o.common.seeds, Some(3));
        assert_eq!(o.common.data.root(), std::path::Path::new("/d"));
        assert_eq!(o.common.out, PathBuf::from("results/demo"));
        assert_eq!(o.only.as_deref(), Some("magic"));
        assert!(o.skip_speed && o.n.is_none());
        assert_eq!(o.common.seeds_or(1, 10), 3);
        let o = parse(&["--n", "4000, 8000,", "--out", "x"]).unwrap();
        assert_eq!(o.n, Some(List(vec![4000, 8000])));
        assert_eq!(o.common.seeds_or(1, 10), 10);
        assert_eq!(o.common.out, PathBuf::from("x"));
        assert_eq!(parse(&[]).unwrap().common.data, DataDir::default());
        // A flag given twice keeps its last value (cargo xtask may add one the user gave).
        let o = parse(&["--out", "a", "--out", "b", "--seeds", "2", "--seeds", "4"]).unwrap();
        assert_eq!((o.common.out, o.common.seeds), (PathBuf::from("b"), Some(4)));
    }

    /// Every program's arguments are consistent (clap's own checks: the `mut_arg` names exist,
    /// no two flags clash) and keep the defaults and other names they always had.
    #[test]
    fn every_program_keeps_its_flags_and_defaults() {
        use clap::CommandFactory;
        fn parse<A: Parser>(args: &[&str]) -> A {
            A::try_parse_from(std::iter::once("program").chain(args.iter().copied())).unwrap()
        }
        crate::papers::pca::Args::command().debug_assert();
        crate::papers::msg::Args::command().debug_assert();
        crate::papers::slkl::Args::command().debug_assert();
        crate::papers::skpca::Args::command().debug_assert();
        crate::kpca_bench::Args::command().debug_assert();
        crate::scale_bench::Args::command().debug_assert();
        crate::krr_scale::Args::command().debug_assert();

        let pca: crate::papers::pca::Args = parse(&["--skip-speed"]);
        assert_eq!(pca.common.out, PathBuf::from("results/pca"));
        assert!(pca.skip_speed && !pca.skip_tables && !pca.common.quick);
        let msg: crate::papers::msg::Args = parse(&["--splits", "2"]);
        assert_eq!((msg.common.out, msg.common.seeds), (PathBuf::from("results/msg"), Some(2)));
        let slkl: crate::papers::slkl::Args = parse(&["--runs", "4", "--bench-n", "4000,8000"]);
        assert_eq!((slkl.common.seeds, slkl.bench_n), (Some(4), Some(List(vec![4000, 8000]))));
        assert_eq!(slkl.common.out, PathBuf::from("results/slkl"));
        let skpca: crate::papers::skpca::Args = parse(&["--quick", "--only", "magic"]);
        assert_eq!((skpca.common.out, skpca.only.as_deref()), (PathBuf::from("results/skpca"), Some("magic")));
        let kpca: crate::kpca_bench::Args = parse(&["--stolr", "s"]);
        assert_eq!((kpca.paths.out, kpca.iterations.as_str()), (PathBuf::from("results/kpca"), "1000"));
        let scale: crate::scale_bench::Args = parse(&["--stolr", "s"]);
        assert_eq!(scale.paths.out, PathBuf::from("results/scale"));
        assert_eq!(scale.sizes, List(vec![20_000, 50_000, 100_000, 494_021]));
        assert_eq!((scale.rank, scale.skpca_iterations, scale.mf_max_n), (10, 300, 100_000));
        let krr: crate::krr_scale::Args = parse(&["--stolr", "s", "--no-sklearn", "--lambda", "0.5"]);
        assert_eq!(krr.common.out, PathBuf::from("results/krr-scale"));
        assert_eq!((krr.n_test, krr.exact_max_n, krr.seed, krr.lambda), (10_000, 10_000, 0, Some(0.5)));
        assert!(krr.no_sklearn && krr.sizes.is_none() && krr.time_cap.is_none());
        // --stolr is required where the benchmark runs stolr.
        for missing in [
            crate::kpca_bench::Args::try_parse_from(["kpca-bench"]).map(drop),
            crate::scale_bench::Args::try_parse_from(["scale-bench"]).map(drop),
            crate::krr_scale::Args::try_parse_from(["krr-scale"]).map(drop),
        ] {
            let err = missing.unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{err}");
        }
    }

    #[test]
    fn bad_command_lines_are_errors() {
        for args in
            [&["--bogus"][..], &["--seeds", "0"], &["--seeds", "x"], &["--only"], &["--n", "1,x"], &["--skip-speed=3"]]
        {
            let err = parse(args).unwrap_err();
            assert!(err.use_stderr() && err.exit_code() == 2, "{args:?}: {err}");
        }
        assert!(parse(&["--seeds", "0"]).unwrap_err().to_string().contains("at least 1"));
        assert!(parse(&["--n", "1,x"]).unwrap_err().to_string().contains("bad item 'x'"));
        // --help is not an error: it prints the options and their defaults.
        let help = parse(&["--help"]).unwrap_err();
        assert!(!help.use_stderr() && help.to_string().contains("[default: results/demo]"), "{help}");
        // A benchmark with a fixed protocol takes neither --quick nor --seeds.
        assert!(Fixed::try_parse_from(["demo-bench", "--quick"]).is_err());
        assert!(Fixed::try_parse_from(["demo-bench", "--seeds", "2"]).is_err());
        let f = Fixed::try_parse_from(["demo-bench", "--data", "/d"]).unwrap();
        assert_eq!((f.paths.data.root(), f.paths.out), (std::path::Path::new("/d"), PathBuf::from("results/bench")));
    }
}
