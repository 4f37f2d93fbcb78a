//! The command line of the reproductions: the options they all take and each one's own flags.
//!
//! Every reproduction takes `--quick` (a shorter run), `--seeds N` (how many seeds, runs or
//! splits to average over; at least 1), `--data DIR` (the data folder, see [`DataDir`]) and
//! `--out DIR` (the output folder). Its own flags are declared in its [`Spec`], so the usage
//! line and the checks come from one place and no binary parses arguments by hand.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use crate::BenchError;
use crate::runner::DataDir;

/// A flag of one program besides the common options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    /// The flag, with its dashes: `"--only"`.
    pub name: &'static str,
    /// The name of its value in the usage line (`"NAME"`), `None` for a switch.
    pub value: Option<&'static str>,
}

impl Flag {
    /// A switch (a flag without a value).
    pub const fn switch(name: &'static str) -> Self {
        Self { name, value: None }
    }

    /// A flag followed by a value, shown as `value` in the usage line.
    pub const fn with_value(name: &'static str, value: &'static str) -> Self {
        Self { name, value: Some(value) }
    }
}

/// What one program takes on its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The program's name, for the usage line.
    pub program: &'static str,
    /// The default output folder (relative to the working directory).
    pub default_out: &'static str,
    /// Whether the program takes `--quick` and `--seeds N` (every reproduction does; a
    /// benchmark with a fixed protocol does not).
    pub quick_and_seeds: bool,
    /// Other names of `--seeds` (`--splits` of paper 003, `--runs` of paper 004).
    pub seeds_aliases: &'static [&'static str],
    /// The program's own flags.
    pub flags: &'static [Flag],
}

impl Spec {
    /// The usage line: `usage: PROGRAM [--quick] [--seeds N] [--data DIR] [--out DIR] [FLAGS]`.
    pub fn usage(&self) -> String {
        let mut s = format!("usage: {}", self.program);
        if self.quick_and_seeds {
            s += " [--quick] [--seeds N]";
            for alias in self.seeds_aliases {
                s += &format!(" [{alias} N]");
            }
        }
        s += " [--data DIR] [--out DIR]";
        for f in self.flags {
            match f.value {
                Some(v) => s += &format!(" [{} {v}]", f.name),
                None => s += &format!(" [{}]", f.name),
            }
        }
        s
    }
}

/// The parsed command line of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `--quick`: the shorter protocol of the reproduction.
    pub quick: bool,
    /// `--seeds N`, when given (at least 1).
    pub seeds: Option<usize>,
    /// `--data DIR`, or the shared data folder.
    pub data: DataDir,
    /// `--out DIR`, or the program's default.
    pub out: PathBuf,
    /// The program's own flags that were given, with their values.
    extra: BTreeMap<&'static str, Option<String>>,
}

impl Options {
    /// Parses this process' arguments (without the program name) against `spec`.
    ///
    /// # Errors
    /// As [`Options::parse`].
    pub fn from_env(spec: &Spec) -> Result<Self, BenchError> {
        Self::parse(spec, std::env::args().skip(1))
    }

    /// Parses `args` against `spec`. A flag given twice keeps its last value.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unknown argument, a missing or malformed value, or
    /// `--seeds 0`; the message ends with the usage line.
    pub fn parse(spec: &Spec, args: impl IntoIterator<Item = String>) -> Result<Self, BenchError> {
        let usage = |msg: String| BenchError::Usage(format!("{msg}\n{}", spec.usage()));
        let mut o = Self {
            quick: false,
            seeds: None,
            data: DataDir::default(),
            out: PathBuf::from(spec.default_out),
            extra: BTreeMap::new(),
        };
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let mut value = || args.next().ok_or_else(|| usage(format!("{a} needs a value")));
            let seeds_flag = a == "--seeds" || spec.seeds_aliases.contains(&a.as_str());
            match a.as_str() {
                "--quick" if spec.quick_and_seeds => o.quick = true,
                _ if seeds_flag && spec.quick_and_seeds => {
                    let v = value()?;
                    match v.parse::<usize>() {
                        Ok(n) if n >= 1 => o.seeds = Some(n),
                        _ => return Err(usage(format!("{a} needs a whole number of at least 1, not '{v}'"))),
                    }
                }
                "--data" => o.data = DataDir::new(value()?),
                "--out" => o.out = PathBuf::from(value()?),
                "-h" | "--help" => return Err(BenchError::Usage(spec.usage())),
                other => match spec.flags.iter().find(|f| f.name == other) {
                    Some(f) => {
                        let v = if f.value.is_some() { Some(value()?) } else { None };
                        o.extra.insert(f.name, v);
                    }
                    None => return Err(usage(format!("unknown argument {other}"))),
                },
            }
        }
        Ok(o)
    }

    /// `--seeds N` if given, else `quick` or `full` by the mode.
    pub fn seeds_or(&self, quick: usize, full: usize) -> usize {
        self.seeds.unwrap_or(if self.quick { quick } else { full })
    }

    /// Whether the switch or flag `name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.extra.contains_key(name)
    }

    /// The value of flag `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.extra.get(name).and_then(|v| v.as_deref())
    }

    /// The value of flag `name` as a path, if given.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.value(name).map(PathBuf::from)
    }

    /// The value of flag `name` parsed as `T`, if given.
    ///
    /// # Errors
    /// [`BenchError::Usage`] if the value does not parse.
    pub fn parsed<T: FromStr>(&self, name: &str) -> Result<Option<T>, BenchError> {
        self.value(name)
            .map(|v| v.parse::<T>().map_err(|_| BenchError::Usage(format!("{name}: cannot read '{v}'"))))
            .transpose()
    }

    /// The value of flag `name` as a comma-separated list of `T` (empty items skipped), if
    /// given.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the first item that does not parse.
    pub fn list<T: FromStr>(&self, name: &str) -> Result<Option<Vec<T>>, BenchError> {
        self.value(name)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<T>().map_err(|_| BenchError::Usage(format!("{name}: bad item '{s}'"))))
                    .collect()
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        program: "demo-reproduce",
        default_out: "results/demo",
        quick_and_seeds: true,
        seeds_aliases: &["--runs"],
        flags: &[Flag::with_value("--only", "NAME"), Flag::switch("--skip-speed"), Flag::with_value("--n", "N,N")],
    };

    fn parse(args: &[&str]) -> Result<Options, BenchError> {
        Options::parse(&SPEC, args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn common_and_own_flags() {
        let o = parse(&["--quick", "--runs", "3", "--data", "/d", "--only", "magic", "--skip-speed"]).unwrap();
        assert!(o.quick);
        assert_eq!(o.seeds, Some(3));
        assert_eq!(o.data.root(), std::path::Path::new("/d"));
        assert_eq!(o.out, PathBuf::from("results/demo"));
        assert_eq!(o.value("--only"), Some("magic"));
        assert!(o.flag("--skip-speed") && !o.flag("--n"));
        assert_eq!(o.seeds_or(1, 10), 3);
        let o = parse(&["--n", "4000, 8000,", "--out", "x"]).unwrap();
        assert_eq!(o.list::<usize>("--n").unwrap(), Some(vec![4000, 8000]));
        assert_eq!(o.seeds_or(1, 10), 10);
        assert_eq!(o.out, PathBuf::from("x"));
        assert_eq!(parse(&[]).unwrap().list::<usize>("--n").unwrap(), None);
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        for args in [&["--bogus"][..], &["--seeds", "0"], &["--seeds", "x"], &["--only"], &["--help"]] {
            let err = parse(args).unwrap_err();
            assert!(matches!(&err, BenchError::Usage(m) if m.contains("usage: demo-reproduce")), "{args:?}: {err}");
        }
        let o = parse(&["--n", "1,x"]).unwrap();
        assert!(matches!(o.list::<usize>("--n"), Err(BenchError::Usage(_))));
        assert!(matches!(parse(&["--only", "a"]).unwrap().parsed::<u32>("--only"), Err(BenchError::Usage(_))));
        let fixed = Spec { quick_and_seeds: false, ..SPEC };
        assert!(Options::parse(&fixed, ["--quick".to_string()]).is_err());
        assert!(!fixed.usage().contains("--quick"));
    }
}
