//! Writes the seed corpus `corpus/TARGET/seed-*`: a few small valid inputs per fuzz target
//! (and a few nearly valid ones), all generated here, none copied from real data.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --no-default-features --example seeds`
//! rewrites the seeds; files found by fuzzing (other names) are left alone.

use std::io::Write;
use std::path::Path;

use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::Kernel;
use stolr_fuzz::join;
use stolr_model::{ModelArray, ModelFile};
use stolr_solvers::{Fit, FitRegression, KernelPca, KernelRidge, KpcaSolver, KrrSolver, Pca, PcaSolver, Persist};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("compress");
    gz.finish().expect("compress")
}

/// An IDX file of unsigned bytes.
fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_be_bytes().to_vec();
    for dim in dims {
        bytes.extend_from_slice(&dim.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

/// A `.npy` file with the given header dict and raw data, padded as NumPy pads it.
fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

// The seeds read best as one list, grouped by target.
#[allow(clippy::vec_init_then_push)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut seeds: Vec<(&str, &str, Vec<u8>)> = Vec::new();

    // LIBSVM
    seeds.push(("libsvm", "clean", b"+1 1:0.5 3:-2\n-1 2:1e-3 4:7\n3 \n1.5 1:1 2:2 3:3 4:4\n".to_vec()));
    seeds.push(("libsvm", "comments-qid-crlf", b"# c\r\n+1\t1:0.5   3:-2 # t\r\n-1 qid:3 2:1e-3 4:7\r\n3".to_vec()));
    seeds.push(("libsvm", "bad-index", b"1 1:1\n\n1 0:2\n".to_vec()));

    // CSV
    seeds.push(("csv", "numbers", b"1,2,3\n4,5,6\n7.5,-8e3,0\n".to_vec()));
    seeds.push(("csv", "header-crlf-classes", b"a, b ,class\r\n1,2,g\r\n\r\n3, 4,h\r\n".to_vec()));
    seeds.push(("csv", "ragged-nan", b"1,2\n3,nan\n4\n".to_vec()));

    // CSV tables: [label option, categorical mask, file...]
    let kdd = b"0,tcp,http,SF,181,5450,normal.\n0,udp,private,SF,105,146,normal.\n2,tcp,ftp,REJ,0,0,neptune.\n";
    seeds.push(("table", "categorical-label", [&[1u8, 0b1110][..], kdd].concat()));
    seeds.push(("table", "categorical-label-gzip", [&[1u8, 0b1110][..], &gzip(kdd)].concat()));
    seeds.push(("table", "numeric-label-header", [&[8 | 3u8, 0][..], b"x,y,z\n1,2,3\n4,5,6\n\"7\",8,9\n"].concat()));
    seeds.push(("table", "plain", [&[0u8, 0][..], b"1,2\n3,4\n"].concat()));

    // MNIST: 2 training and 1 test image of 2 x 3 pixels.
    let train_images = idx(0x803, &[2, 2, 3], &[0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255]);
    let train_labels = idx(0x801, &[2], &[3, 9]);
    let test_images = idx(0x803, &[1, 2, 3], &[9, 8, 7, 6, 5, 4]);
    let test_labels = idx(0x801, &[1], &[0]);
    let raw: [&[u8]; 4] = [&train_images, &train_labels, &test_images, &test_labels];
    seeds.push(("mnist", "raw", join(&raw)));
    let gz: Vec<Vec<u8>> = raw.iter().map(|part| gzip(part)).collect();
    seeds.push(("mnist", "gzip", join(&[&gz[0], &gz[1], &gz[2], &gz[3]])));
    seeds.push(("mnist", "mixed", join(&[&gz[0], raw[1], raw[2], &gz[3]])));

    // .npy
    let dir = tempfile_dir()?;
    let path = dir.join("x.npy");
    stolr_datasets::write_npy_matrix(&path, Mat::from_fn(3, 2, |i, j| (i * 2 + j) as f64 - 1.5).as_ref())?;
    seeds.push(("npy", "c-order", std::fs::read(&path)?));
    let values: Vec<u8> = (0..6).flat_map(|k| (k as f64).to_le_bytes()).collect();
    seeds.push(("npy", "fortran", npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", &values)));
    let big: Vec<u8> = (0..6).flat_map(|k| (k as f64).to_be_bytes()).collect();
    seeds.push(("npy", "big-endian", npy("{'descr': '>f8', 'fortran_order': False, 'shape': (3, 2), }", &big)));
    seeds.push(("npy", "vector", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }", &values)));

    // Model files: fitted models of every kind, and a hand-made one with every dtype.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let x = Mat::from_fn(12, 3, |i, j| ((i * 3 + j) as f64 * 0.37).sin());
    let y: Vec<f64> = (0..12).map(|i| x[(i, 0)] - 0.5 * x[(i, 1)]).collect();
    let kernel = Kernel::gaussian(1.0);
    let kpca = KernelPca::new(2, kernel, KpcaSolver::exact()).center(true).fit(x.as_ref(), &mut rng, &mut ())?;
    let nystrom = KernelPca::new(2, kernel, KpcaSolver::Nystrom { landmarks: 5 }).fit(x.as_ref(), &mut rng, &mut ())?;
    let pca = Pca::new(2, PcaSolver::Exact).center(true).fit(x.as_ref(), &mut rng, &mut ())?;
    let krr = KernelRidge::new(kernel, KrrSolver::Krr { lambda: 0.1 }).fit(x.as_ref(), &y, &mut rng, &mut ())?;
    let mut custom = ModelFile::new("custom", serde_json::json!({ "k": 2, "name": "x", "nested": { "a": [1, 2.5] } }));
    custom.put_indices("landmarks", &[3, 0, 41]);
    custom.put_vector("empty", &[]);
    custom.put_array("scalar", ModelArray::F64 { shape: vec![], data: vec![-0.0] });
    custom.put_matrix("m", Mat::from_fn(2, 2, |i, j| (i + 2 * j) as f64).as_ref());
    let models = [
        ("kpca-exact", kpca.to_model_file().to_bytes()?),
        ("kpca-nystrom", nystrom.to_model_file().to_bytes()?),
        ("pca", pca.to_model_file().to_bytes()?),
        ("krr", krr.to_model_file().to_bytes()?),
        ("custom", custom.to_bytes()?),
    ];
    for (name, bytes) in models {
        seeds.push(("model_load", name, members(&bytes)));
        seeds.push(("model_file", name, bytes));
    }

    for (target, name, bytes) in seeds {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The members of the model file `bytes` in `model_load`'s input layout
/// ([`stolr_fuzz::model_members`]).
fn members(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a ZIP archive");
    let mut header = Vec::new();
    let mut arrays = Vec::new();
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).expect("a member");
        let mut content = Vec::new();
        member.read_to_end(&mut content).expect("its content");
        let name = member.name().expect("a name").into_owned();
        if name == "header.json" {
            header = content;
        } else {
            arrays.push((name, content));
        }
    }
    stolr_fuzz::join_members(&header, &arrays)
}

/// A fresh scratch folder for the `.npy` writer.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("stolr-fuzz-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
