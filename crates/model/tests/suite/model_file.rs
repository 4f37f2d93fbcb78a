//! The model file format: bit-exact round trips, deterministic bytes, and a clear error (never
//! a panic) for every truncated, corrupted, newer or mismatched file.

use std::io::{Cursor, Read, Write};
use std::path::Path;

use faer::Mat;
use proptest::prelude::*;
use serde_json::{Value, json};
use stolr_memory::MemoryBudget;
use stolr_model::{
    MAX_EMPTY_DIM, MODEL_FILE_NAME, MODEL_FORMAT_VERSION, ModelArray, ModelError, ModelFile, resolve_model_path,
};

/// Edge values that must survive bit for bit (no NaN: `ModelFile`'s `PartialEq` compares
/// values; NaN payloads are checked separately by bits).
const EDGE: [f64; 10] = [
    -0.0,
    0.0,
    f64::MIN_POSITIVE / 4.0, // subnormal
    -f64::MIN_POSITIVE / 1024.0,
    5e-324, // smallest subnormal
    1e308,
    -1e308,
    f64::MAX,
    f64::EPSILON,
    0.1,
];

fn edge_model() -> ModelFile {
    let parameters = json!({
        "sigma": 0.1, "nu": 1e-300, "tiny": 5e-324, "k": 20, "big": u64::MAX, "neg": -3,
        "kernel": "rbf", "flags": [true, false, null], "nested": { "a": 1.5 },
    });
    let mut model = ModelFile::new("kpca", parameters);
    model.put_matrix("x", Mat::from_fn(2, 5, |i, j| EDGE[5 * i + j]).as_ref());
    model.put_vector("v", &EDGE);
    model.put_indices("landmarks", &[0, 7, 1 << 53, (1 << 62) + 1]);
    model.put_matrix("empty_rows", Mat::<f64>::zeros(0, 3).as_ref());
    model.put_matrix("empty_cols", Mat::<f64>::zeros(4, 0).as_ref());
    model.put_vector("empty_vector", &[]);
    model.put_indices("empty_indices", &[]);
    model
}

/// A small model for the exhaustive truncation and flip tests.
fn small_model() -> ModelFile {
    let mut model = ModelFile::new("krr", json!({ "lambda": 0.5 }));
    model.put_matrix("alpha", Mat::from_fn(3, 2, |i, j| i as f64 - 0.25 * j as f64).as_ref());
    model.put_indices("rows", &[4, 1]);
    model
}

/// The bits of every f64 entry, array by array.
fn f64_bits(model: &ModelFile) -> Vec<(String, Vec<u64>)> {
    model
        .arrays()
        .iter()
        .filter_map(|(name, array)| match array {
            ModelArray::F64 { data, .. } => Some((name.clone(), data.iter().map(|v| v.to_bits()).collect())),
            ModelArray::I64 { .. } => None,
        })
        .collect()
}

/// Rebuilds the archive `bytes` member by member: `edit(name, content)` returns the new
/// content or `None` to drop the member; `extra` members are appended.
fn rebuild(bytes: &[u8], mut edit: impl FnMut(&str, Vec<u8>) -> Option<Vec<u8>>, extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("a valid archive");
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut members = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).expect("member");
        let mut content = Vec::new();
        file.read_to_end(&mut content).expect("content");
        members.push((file.name().expect("name").into_owned(), content));
    }
    for (name, content) in members {
        if let Some(content) = edit(&name, content) {
            out.start_file(name, options).expect("start");
            out.write_all(&content).expect("write");
        }
    }
    for (name, content) in extra {
        out.start_file(*name, options).expect("start");
        out.write_all(content).expect("write");
    }
    out.finish().expect("finish").into_inner()
}

/// `bytes` with `header.json` replaced by `edit` applied to it.
fn edit_header(bytes: &[u8], edit: impl Fn(&mut Value)) -> Vec<u8> {
    rebuild(
        bytes,
        |name, content| {
            if name != "header.json" {
                return Some(content);
            }
            let mut header: Value = serde_json::from_slice(&content).expect("JSON");
            edit(&mut header);
            Some(serde_json::to_vec(&header).expect("JSON"))
        },
        &[],
    )
}

fn load_err(bytes: &[u8]) -> ModelError {
    match ModelFile::from_bytes(bytes, "m.npz", MemoryBudget::default()) {
        Ok(model) => panic!("loaded {model:?}"),
        Err(e) => e,
    }
}

/// A `ModelFile` error naming the file, whose message contains `needle`.
fn assert_model_file_error(err: &ModelError, needle: &str) {
    assert!(matches!(err, ModelError::ModelFile { path, .. } if path == "m.npz"), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with("m.npz: ") && message.contains(needle), "{message}");
}

#[test]
fn round_trip_is_bit_exact_including_edge_values_and_empty_arrays() {
    let model = edge_model();
    let bytes = model.to_bytes().expect("encode");
    let back = ModelFile::from_bytes(&bytes, "edge", MemoryBudget::default()).expect("decode");
    assert_eq!(back, model);
    assert_eq!(f64_bits(&back), f64_bits(&model));
    assert_eq!(back.kind(), "kpca");
    assert_eq!(back.stolr_version(), env!("CARGO_PKG_VERSION"));
    assert_eq!(back.parameters()["nu"].as_f64().map(f64::to_bits), Some(1e-300f64.to_bits()));
    assert_eq!(back.parameters()["tiny"].as_f64().map(f64::to_bits), Some(5e-324f64.to_bits()));
    assert_eq!(back.parameters()["big"].as_u64(), Some(u64::MAX));

    let x = back.matrix("x").expect("matrix");
    assert_eq!((x.nrows(), x.ncols()), (2, 5));
    for i in 0..2 {
        for j in 0..5 {
            assert_eq!(x[(i, j)].to_bits(), EDGE[5 * i + j].to_bits(), "({i}, {j})");
        }
    }
    let v = back.vector("v").expect("vector");
    assert_eq!(v.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), EDGE.map(f64::to_bits));
    assert_eq!(back.indices("landmarks").expect("indices"), vec![0, 7, 1 << 53, (1 << 62) + 1]);
    assert_eq!(back.matrix("empty_rows").expect("matrix").shape(), (0, 3));
    assert_eq!(back.matrix("empty_cols").expect("matrix").shape(), (4, 0));
    assert_eq!(back.vector("empty_vector").expect("vector"), Vec::<f64>::new());
    assert_eq!(back.indices("empty_indices").expect("indices"), Vec::<usize>::new());
}

#[test]
fn nan_payloads_and_infinities_keep_their_bits() {
    let values = [f64::NAN, -f64::NAN, f64::from_bits(0x7ff0_0000_0000_0001), f64::INFINITY, f64::NEG_INFINITY];
    let mut model = ModelFile::new("pca", json!({}));
    model.put_vector("v", &values);
    let back =
        ModelFile::from_bytes(&model.to_bytes().expect("encode"), "nan", MemoryBudget::default()).expect("decode");
    assert_eq!(f64_bits(&back), f64_bits(&model));
}

#[test]
fn save_load_save_gives_identical_bytes_and_the_layout_numpy_expects() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join(MODEL_FILE_NAME);
    let model = edge_model();
    model.save(&path).expect("save");
    let first = std::fs::read(&path).expect("read");
    assert_eq!(first, model.to_bytes().expect("encode"));
    let back = ModelFile::load(&path, MemoryBudget::default()).expect("load");
    back.save(&path).expect("save again");
    assert_eq!(std::fs::read(&path).expect("read"), first);
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);

    // header.json first, then the arrays sorted by name; stored, dated 1980-01-01.
    let mut archive = zip::ZipArchive::new(Cursor::new(&first[..])).expect("zip");
    let names: Vec<String> = archive.file_names().map(|n| n.expect("name").into_owned()).collect();
    let mut sorted = names[1..].to_vec();
    sorted.sort();
    assert_eq!(names[0], "header.json");
    assert_eq!(names[1..], sorted[..]);
    assert!(names[1..].iter().all(|n| n.ends_with(".npy")));
    for i in 0..archive.len() {
        let file = archive.by_index(i).expect("member");
        assert_eq!(file.compression(), zip::CompressionMethod::Stored);
        let time = file.last_modified().expect("timestamp");
        assert_eq!((time.year(), time.month(), time.day(), time.hour(), time.minute()), (1980, 1, 1, 0, 0));
    }
    let mut json = Vec::new();
    archive.by_name("header.json").expect("header").read_to_end(&mut json).expect("read");
    let header: Value = serde_json::from_slice(&json).expect("JSON");
    assert_eq!(header["format"], "stolr-model");
    // The lowest version the content needs: 1 without an encoding.
    assert_eq!(header["format_version"], 1);
    assert_eq!(header["kind"], "kpca");
    assert_eq!(header["arrays"]["x"], json!({ "dtype": "f64", "shape": [2, 5] }));
    assert_eq!(header["arrays"]["landmarks"], json!({ "dtype": "i64", "shape": [4] }));

    // Each member is a .npy file npyz reads as C-order little-endian data.
    let mut npy = Vec::new();
    archive.by_name("x.npy").expect("x").read_to_end(&mut npy).expect("read");
    let file = npyz::NpyFile::new(&npy[..]).expect("npy");
    assert_eq!(file.shape(), &[2, 5]);
    assert_eq!(file.dtype().descr(), "'<f8'");
    assert_eq!(file.order(), npyz::Order::C);
    let mut npy = Vec::new();
    archive.by_name("landmarks.npy").expect("landmarks").read_to_end(&mut npy).expect("read");
    assert_eq!(npyz::NpyFile::new(&npy[..]).expect("npy").dtype().descr(), "'<i8'");
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = small_model().to_bytes().expect("encode");
    for len in 0..bytes.len() {
        let result = ModelFile::from_bytes(&bytes[..len], "m.npz", MemoryBudget::default());
        match result {
            Err(ModelError::ModelFile { path, .. }) => assert_eq!(path, "m.npz"),
            other => panic!("truncated to {len} of {} bytes: {other:?}", bytes.len()),
        }
    }
    assert!(ModelFile::from_bytes(&bytes, "m.npz", MemoryBudget::default()).is_ok());
}

/// The bytes of `member`'s data in the archive `bytes` (found by content, which is unique).
fn member_range(bytes: &[u8], member: &str) -> std::ops::Range<usize> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("zip");
    let mut content = Vec::new();
    archive.by_name(member).expect("member").read_to_end(&mut content).expect("read");
    let start = bytes.windows(content.len()).position(|w| w == content).expect("stored uncompressed");
    start..start + content.len()
}

#[test]
fn every_single_byte_flip_is_an_error_or_leaves_the_model_unchanged() {
    let model = small_model();
    let bytes = model.to_bytes().expect("encode");
    let header = member_range(&bytes, "header.json");
    let npy = [member_range(&bytes, "alpha.npy"), member_range(&bytes, "rows.npy")];
    let mut unchanged = Vec::new();
    for at in 0..bytes.len() {
        for mask in [0x01, 0x80, 0xff] {
            let mut flipped = bytes.clone();
            flipped[at] ^= mask;
            match ModelFile::from_bytes(&flipped, "m.npz", MemoryBudget::default()) {
                Err(e) => {
                    assert!(
                        e.to_string().starts_with("m.npz: "),
                        "byte {at} ^ {mask:#x}: the error does not name the file: {e}"
                    );
                }
                Ok(back) => {
                    assert!(!header.contains(&at), "byte {at} ^ {mask:#x} inside header.json was accepted");
                    assert!(
                        !npy.iter().any(|r| r.contains(&at)),
                        "byte {at} ^ {mask:#x} inside array data was accepted"
                    );
                    assert_eq!(back, model, "byte {at} ^ {mask:#x} changed the model");
                    unchanged.push(at);
                }
            }
        }
    }
    // Only ZIP metadata the reader does not use (e.g. timestamps, permissions) may be flipped
    // unnoticed; the content itself is always checked.
    unchanged.dedup();
    assert!(unchanged.len() < bytes.len() / 4, "{} of {} bytes unchecked: {unchanged:?}", unchanged.len(), bytes.len());
}

#[test]
fn garbage_and_foreign_archives_are_not_stolr_model_files() {
    for bytes in [&b""[..], b"not a zip file at all", b"PK\x03\x04 truncated"] {
        assert_model_file_error(&load_err(bytes), "not a Stolr model file");
    }
    // A plain NumPy-style .npz without header.json.
    let bytes =
        rebuild(&small_model().to_bytes().expect("encode"), |name, c| (name != "header.json").then_some(c), &[]);
    assert_model_file_error(&load_err(&bytes), "no header.json");
    // header.json that is not JSON, or another format.
    let bytes = rebuild(
        &small_model().to_bytes().expect("encode"),
        |name, c| Some(if name == "header.json" { b"{oops".to_vec() } else { c }),
        &[],
    );
    assert_model_file_error(&load_err(&bytes), "not valid JSON");
    let bytes = edit_header(&small_model().to_bytes().expect("encode"), |h| h["format"] = json!("other"));
    assert_model_file_error(&load_err(&bytes), "not a Stolr model file");
}

#[test]
fn the_version_written_is_the_lowest_the_content_needs_and_survives_a_reload() {
    let mut model = small_model();
    assert_eq!(model.format_version(), 1);
    model.require_format_version(2);
    model.require_format_version(1);
    assert_eq!(model.format_version(), 2);
    let bytes = model.to_bytes().expect("encode");
    let back = ModelFile::from_bytes(&bytes, "m.npz", MemoryBudget::default()).expect("decode");
    assert_eq!(back.format_version(), 2);
    assert_eq!(back.to_bytes().expect("encode"), bytes);
    // A version 1 file reloads and saves as version 1, byte for byte.
    let v1 = small_model().to_bytes().expect("encode");
    let back = ModelFile::from_bytes(&v1, "m.npz", MemoryBudget::default()).expect("decode");
    assert_eq!((back.format_version(), back.to_bytes().expect("encode")), (1, v1));
    // Beyond this build's version: an error when writing.
    let mut future = small_model();
    future.require_format_version(MODEL_FORMAT_VERSION + 1);
    assert!(matches!(future.to_bytes(), Err(ModelError::InvalidParameter { .. })));
}

#[test]
fn a_newer_format_version_is_reported_as_such() {
    let bytes = small_model().to_bytes().expect("encode");
    let newer = edit_header(&bytes, |h| h["format_version"] = json!(MODEL_FORMAT_VERSION + 1));
    let err = load_err(&newer);
    assert!(
        matches!(&err, ModelError::ModelVersion { path, found, supported: MODEL_FORMAT_VERSION } if path == "m.npz" && *found == u64::from(MODEL_FORMAT_VERSION) + 1),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "m.npz: written by a newer Stolr (model format version 4); this build reads model format versions up to 3"
    );
    // Even when the rest of the header has changed beyond recognition.
    let newer = edit_header(&bytes, |h| *h = json!({ "format": "stolr-model", "format_version": 7, "layout": [] }));
    assert!(matches!(load_err(&newer), ModelError::ModelVersion { found: 7, .. }));
    for bad in [json!(0), json!(-1), json!(1.5), json!("1"), Value::Null] {
        let bytes = edit_header(&bytes, |h| h["format_version"] = bad.clone());
        assert_model_file_error(&load_err(&bytes), "format_version");
    }
}

#[test]
fn header_and_members_must_agree() {
    let bytes = small_model().to_bytes().expect("encode");
    // An array listed but missing, or present but unlisted.
    let missing = rebuild(&bytes, |name, c| (name != "rows.npy").then_some(c), &[]);
    assert_model_file_error(&load_err(&missing), "rows");
    let npy = {
        let mut a = zip::ZipArchive::new(Cursor::new(&bytes[..])).expect("zip");
        let mut v = Vec::new();
        a.by_name("rows.npy").expect("rows").read_to_end(&mut v).expect("read");
        v
    };
    let extra = rebuild(&bytes, |_, c| Some(c), &[("extra.npy", &npy)]);
    assert_model_file_error(&load_err(&extra), "extra.npy");
    let renamed = rebuild(&missing, |_, c| Some(c), &[("other.npy", &npy)]);
    assert_model_file_error(&load_err(&renamed), "not listed");
    // Wrong dtype, wrong shape, unknown dtype, unknown field.
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 6] = [
        ("dtype", |h| h["arrays"]["rows"]["dtype"] = json!("f64")),
        ("shape", |h| h["arrays"]["alpha"]["shape"] = json!([2, 3])),
        ("shape", |h| h["arrays"]["alpha"]["shape"] = json!([3, 3])),
        ("unknown variant", |h| h["arrays"]["rows"]["dtype"] = json!("i32")),
        ("unknown field", |h| h["extra"] = json!(1)),
        ("parameters", |h| h["parameters"] = json!([1, 2])),
    ];
    for (needle, edit) in edits {
        assert_model_file_error(&load_err(&edit_header(&bytes, edit)), needle);
    }
    // A member that is not a .npy file, or an .npy file with extra data.
    for content in [b"garbage".to_vec(), [npy.clone(), vec![0; 8]].concat(), npy[..npy.len() - 8].to_vec()] {
        let bad = rebuild(&bytes, |name, c| Some(if name == "rows.npy" { content.clone() } else { c }), &[]);
        assert_model_file_error(&load_err(&bad), "rows.npy");
    }
}

#[test]
fn a_huge_claimed_shape_is_an_error_before_any_allocation() {
    let bytes = small_model().to_bytes().expect("encode");
    for shape in [
        json!([1u64, 1u64 << 60]),
        json!([1u64 << 40, 1u64 << 40, 0]),
        json!([u64::MAX, u64::MAX]),
        json!([1u64 << 61]),
    ] {
        let huge = edit_header(&bytes, |h| h["arrays"]["alpha"]["shape"] = shape.clone());
        let err = load_err(&huge);
        assert_model_file_error(&err, "alpha");
    }
    // An empty array may have another dimension larger than its data, up to MAX_EMPTY_DIM
    // (building a (0, n) matrix takes time proportional to n).
    let mut model = ModelFile::new("krr", json!({}));
    model.put_array("e", ModelArray::F64 { shape: vec![0, MAX_EMPTY_DIM], data: vec![] });
    let bytes = model.to_bytes().expect("encode");
    let back = ModelFile::from_bytes(&bytes, "e", MemoryBudget::default()).expect("decode");
    assert_eq!(back.matrix("e").expect("matrix").shape(), (0, MAX_EMPTY_DIM));
    model.put_array("e", ModelArray::F64 { shape: vec![0, MAX_EMPTY_DIM + 1], data: vec![] });
    assert!(matches!(model.to_bytes(), Err(ModelError::InvalidParameter { name: "arrays", .. })));
    for shape in [json!([0, MAX_EMPTY_DIM + 1]), json!([1u64 << 40, 0]), json!([0, u64::MAX])] {
        let huge = edit_header(&bytes, |h| h["arrays"]["e"]["shape"] = shape.clone());
        assert_model_file_error(&load_err(&huge), "\"e\"");
    }
    // The allocation counter of tests/model_file_alloc.rs checks the "before any allocation".
}

#[test]
fn wrong_kind_names_file_found_and_expected() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("m.npz");
    small_model().save(&path).expect("save");
    assert_eq!(ModelFile::load_kind(&path, &["kpca", "krr"], MemoryBudget::default()).expect("kind ok").kind(), "krr");
    let err = ModelFile::load_kind(&path, &["kpca", "pca"], MemoryBudget::default()).unwrap_err();
    assert!(
        matches!(&err, ModelError::ModelKind { found, expected, .. } if found == "krr" && expected == "\"kpca\" or \"pca\""),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("{}: holds a model of kind \"krr\", expected \"kpca\" or \"pca\"", path.display())
    );
    let err = ModelFile::load_kind(&path, &["kpca"], MemoryBudget::default()).unwrap_err();
    assert!(err.to_string().ends_with("expected \"kpca\""), "{err}");
}

#[test]
fn load_errors_name_the_path() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("broken.npz");
    std::fs::write(&path, b"hello").expect("write");
    let err = ModelFile::load(&path, MemoryBudget::default()).unwrap_err();
    assert!(err.to_string().starts_with(&format!("{}: not a Stolr model file", path.display())), "{err}");
    let err = ModelFile::load(&dir.path().join("absent.npz"), MemoryBudget::default()).unwrap_err();
    assert!(matches!(err, ModelError::Io { .. }), "{err:?}");
}

#[test]
fn save_replaces_an_existing_file_and_reports_a_missing_folder() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("m.npz");
    std::fs::write(&path, b"old").expect("write");
    small_model().save(&path).expect("save over");
    assert_eq!(ModelFile::load(&path, MemoryBudget::default()).expect("load"), small_model());
    let err = small_model().save(&dir.path().join("no/such/folder/m.npz")).unwrap_err();
    assert!(matches!(&err, ModelError::Io { path, .. } if path.contains("no/such/folder")), "{err:?}");
    // A relative path without a folder part saves into the current folder: not exercised here,
    // as tests must not write into the source tree.
}

#[test]
fn accessors_check_presence_dtype_and_shape() {
    let mut model = small_model();
    model.put_vector("v", &[1.0, 2.0]);
    model.put_array("negative", ModelArray::I64 { shape: vec![2], data: vec![3, -1] });
    model.put_array("grid", ModelArray::F64 { shape: vec![2, 1, 2], data: vec![0.0; 4] });
    let model =
        ModelFile::from_bytes(&model.to_bytes().expect("encode"), "m", MemoryBudget::default()).expect("decode");
    assert!(model.has("alpha") && model.has("rows") && !model.has("beta"));
    assert_eq!(model.matrix("alpha").expect("matrix"), Mat::from_fn(3, 2, |i, j| i as f64 - 0.25 * j as f64));
    assert_eq!(model.indices("rows").expect("indices"), vec![4, 1]);
    let cases: [(&str, Result<(), ModelError>, &str); 8] = [
        ("beta", model.matrix("beta").map(drop), "is missing"),
        ("rows", model.matrix("rows").map(drop), "dtype i64"),
        ("v", model.matrix("v").map(drop), "2-D"),
        ("grid", model.matrix("grid").map(drop), "2-D"),
        ("alpha", model.vector("alpha").map(drop), "1-D"),
        ("alpha", model.indices("alpha").map(drop), "dtype f64"),
        ("negative", model.indices("negative").map(drop), "entry 1 is -1"),
        ("beta", model.indices("beta").map(drop), "is missing"),
    ];
    for (name, result, needle) in cases {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, ModelError::ModelArray { kind, array, .. } if kind == "krr" && array == name),
            "{err:?}"
        );
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn invalid_models_are_refused_when_encoding() {
    let mut model = ModelFile::new("kpca", json!([1, 2]));
    assert!(matches!(model.to_bytes(), Err(ModelError::InvalidParameter { name: "parameters", .. })));
    for name in ["", "a/b", "header.json", "é", &"x".repeat(129)] {
        let mut model = ModelFile::new("kpca", json!({}));
        model.put_vector(name, &[1.0]);
        assert!(matches!(model.to_bytes(), Err(ModelError::InvalidParameter { name: "arrays", .. })), "{name:?}");
    }
    model = ModelFile::new("kpca", json!({}));
    model.put_array("bad", ModelArray::F64 { shape: vec![2, 2], data: vec![1.0] });
    assert!(matches!(model.to_bytes(), Err(ModelError::InvalidParameter { name: "arrays", .. })));
    // Putting a valid array under the same name replaces the inconsistent one.
    model.put_vector("bad", &[1.0]);
    assert!(model.to_bytes().is_ok());
}

#[test]
fn resolve_model_path_accepts_a_file_or_a_folder_holding_model_npz() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let err = resolve_model_path(dir.path()).unwrap_err();
    assert!(matches!(&err, ModelError::MissingFile { tried, .. } if tried == &[MODEL_FILE_NAME]), "{err:?}");
    let file = dir.path().join(MODEL_FILE_NAME);
    small_model().save(&file).expect("save");
    assert_eq!(resolve_model_path(dir.path()).expect("folder"), file);
    assert_eq!(resolve_model_path(&file).expect("file"), file);
    let other = dir.path().join("elsewhere.npz");
    small_model().save(&other).expect("save");
    assert_eq!(resolve_model_path(&other).expect("file"), other);
    let err = resolve_model_path(Path::new("/nonexistent/stolr/model")).unwrap_err();
    assert!(matches!(err, ModelError::Io { .. }), "{err:?}");
}

proptest! {
    #[test]
    fn random_bit_patterns_round_trip(nrows in 0usize..6, ncols in 0usize..6, seed: u64) {
        // Any 64-bit pattern, NaNs included, from a simple seeded generator.
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state ^ (state >> 29)
        };
        let a = Mat::from_fn(nrows, ncols, |_, _| f64::from_bits(next()));
        let v: Vec<f64> = (0..nrows * 2).map(|_| f64::from_bits(next())).collect();
        let idx: Vec<usize> = (0..ncols).map(|_| (next() >> 1) as usize).collect();
        let mut model = ModelFile::new("pca", json!({ "seed": seed }));
        model.put_matrix("a", a.as_ref());
        model.put_vector("v", &v);
        model.put_indices("idx", &idx);
        let bytes = model.to_bytes().expect("encode");
        let back = ModelFile::from_bytes(&bytes, "p", MemoryBudget::default()).expect("decode");
        prop_assert_eq!(f64_bits(&back), f64_bits(&model));
        prop_assert_eq!(back.indices("idx").expect("indices"), idx);
        prop_assert_eq!(back.to_bytes().expect("encode"), bytes);
    }
}

/// The budget travels with the call: a file over a small budget is refused with the typed
/// error before it is read, the same file loads under a large one, and two loads at the same
/// time on two threads, one under each budget, each obey their own (as no process-wide budget
/// could make them).
#[test]
fn each_load_obeys_the_budget_it_is_given() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("m.npz");
    let mut model = ModelFile::new("krr", json!({ "lambda": 0.5 }));
    model.put_vector("alpha", &vec![0.25; 100_000]);
    model.save(&path).expect("save");
    let len = std::fs::metadata(&path).expect("metadata").len();
    assert!(len > 800_000, "{len} bytes");
    let (small, large) = (MemoryBudget::bytes(1 << 20), MemoryBudget::bytes(16 << 20));

    let err = ModelFile::load(&path, small).unwrap_err();
    assert!(
        matches!(&err, ModelError::OverBudget { path: p, source: stolr_memory::MemoryError::OverBudget { needed, limit, .. } }
            if *p == path.display().to_string() && *needed == 2 * len && *limit == 1 << 20),
        "{err:?}"
    );
    assert_eq!(ModelFile::load(&path, large).expect("within budget"), model);
    assert_eq!(ModelFile::load_kind(&path, &["krr"], large).expect("within budget"), model);
    assert!(matches!(ModelFile::load_kind(&path, &["krr"], small), Err(ModelError::OverBudget { .. })));

    let start = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let refused = scope.spawn(|| {
            start.wait();
            (0..50).all(|_| matches!(ModelFile::load(&path, small), Err(ModelError::OverBudget { .. })))
        });
        let loaded = scope.spawn(|| {
            start.wait();
            (0..50).all(|_| ModelFile::load(&path, large).is_ok_and(|back| back == model))
        });
        assert!(refused.join().expect("thread"), "a load under 1 MiB was not refused");
        assert!(loaded.join().expect("thread"), "a load under 16 MiB failed");
    });
}
