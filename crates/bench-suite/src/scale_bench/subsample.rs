//! Random row subsamples of a gzip CSV file, written as plain CSV for `stolr kpca`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::BenchError;

/// Seed of the row choice: every run of the benchmark uses the same subsamples.
const SEED: u64 = 20_261_122;

/// A uniform random subsample of `n` rows of the gzip CSV file `source` (in file order),
/// written to `dir/kdd-n.csv`; `source` itself when `n` is at least its number of rows. The
/// file is kept between runs (same seed, same rows), so a rerun reuses it.
///
/// # Errors
/// [`BenchError::Io`] if `source` cannot be read or the subsample cannot be written.
pub(super) fn kdd_rows(source: &Path, n: usize, dir: &Path) -> Result<PathBuf, BenchError> {
    let target = dir.join(format!("kdd-{n}.csv"));
    if target.exists() {
        return Ok(target);
    }
    let file = std::fs::File::open(source).map_err(BenchError::io(source))?;
    let lines: Vec<String> = BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .collect::<Result<_, _>>()
        .map_err(BenchError::io(source))?;
    if n >= lines.len() {
        return Ok(source.to_path_buf());
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED);
    let mut keep = rand::seq::index::sample(&mut rng, lines.len(), n).into_vec();
    keep.sort_unstable();
    std::fs::create_dir_all(dir).map_err(BenchError::io(dir))?;
    stolr_model::write_atomic(&target, |out| {
        for i in keep {
            writeln!(out, "{}", lines[i])?;
        }
        Ok(())
    })
    .map_err(|e| match e {
        stolr_model::ModelError::Io { source, .. } => BenchError::io(&target)(source),
        other => BenchError::io(&target)(std::io::Error::other(other)),
    })?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subsample_is_n_distinct_rows_in_file_order_and_the_same_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("rows.csv.gz");
        let mut gz =
            flate2::write::GzEncoder::new(std::fs::File::create(&source).unwrap(), flate2::Compression::fast());
        for i in 0..1000 {
            writeln!(gz, "{i},tcp,{}", i % 7).unwrap();
        }
        gz.finish().unwrap();
        let first = kdd_rows(&source, 100, &dir.path().join("a")).unwrap();
        let second = kdd_rows(&source, 100, &dir.path().join("b")).unwrap();
        let (a, b) = (std::fs::read_to_string(&first).unwrap(), std::fs::read_to_string(&second).unwrap());
        assert_eq!(a, b, "same seed, same rows");
        let ids: Vec<usize> = a.lines().map(|l| l.split(',').next().unwrap().parse().unwrap()).collect();
        assert_eq!(ids.len(), 100);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "distinct rows in file order");
        assert_eq!(kdd_rows(&source, 5000, &dir.path().join("c")).unwrap(), source, "n ≥ rows: the file itself");
    }
}
