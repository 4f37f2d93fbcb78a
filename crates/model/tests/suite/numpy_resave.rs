//! A model file re-saved by NumPy (`np.savez`, `np.savez_compressed` of what `np.load` gave)
//! loads as the original model: members in another order, NumPy's own `.npy` headers,
//! `header.json` turned into a 0-d bytes array `header.json.npy`, deflate-compressed members,
//! ZIP64 extra fields. A file that cannot be a model is refused with the true reason.

use std::io::{Cursor, Write};
use std::path::Path;
use std::process::Command;

use faer::Mat;
use serde_json::json;
use stolr_memory::MemoryBudget;
use stolr_model::{ModelArray, ModelError, ModelFile};

fn model() -> ModelFile {
    let mut model = ModelFile::new("krr", json!({ "lambda": 0.5, "sigma": 1.25, "n_features": 2 }));
    model.put_matrix("alpha", Mat::from_fn(3, 2, |i, j| i as f64 - 0.25 * j as f64 + 1e-300).as_ref());
    model.put_vector("mean", &[0.1, -0.0, 5e-324]);
    model.put_indices("rows", &[4, 1, 1 << 53]);
    // Compressed far below the file's length (as sparse training rows, MNIST's, would be).
    model.put_matrix("zeros", Mat::<f64>::zeros(500, 40).as_ref());
    model
}

/// A `.npy` file as NumPy writes it: version 1.0, the dict in NumPy's spelling, padded with
/// spaces and a line break so that the data starts at a multiple of 64.
fn numpy_npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape = match shape {
        [] => "()".to_owned(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

/// What `np.savez[_compressed](path, **np.load(model))` writes, built by hand: the arrays first
/// in reverse order, then `header.json.npy`, each member ZIP64 as NumPy forces it.
fn resaved(model: &ModelFile, method: zip::CompressionMethod) -> Vec<u8> {
    let original = model.to_bytes().expect("model bytes");
    let mut archive = zip::ZipArchive::new(Cursor::new(&original)).expect("zip");
    let mut header = Vec::new();
    std::io::copy(&mut archive.by_name("header.json").expect("header"), &mut header).expect("read");
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(method).large_file(true);
    for (name, array) in model.arrays().iter().rev() {
        let (descr, shape, data): (_, _, Vec<u8>) = match array {
            ModelArray::F64 { shape, data } => ("<f8", shape, data.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ModelArray::I64 { shape, data } => ("<i8", shape, data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        };
        zip.start_file(format!("{name}.npy"), options).expect("member");
        zip.write_all(&numpy_npy(descr, shape, &data)).expect("write");
    }
    zip.start_file("header.json.npy", options).expect("member");
    zip.write_all(&numpy_npy(&format!("|S{}", header.len()), &[], &header)).expect("write");
    zip.finish().expect("finish").into_inner()
}

#[test]
fn a_model_resaved_like_np_savez_and_np_savez_compressed_loads_unchanged() {
    let model = model();
    for method in [zip::CompressionMethod::Stored, zip::CompressionMethod::Deflated] {
        let bytes = resaved(&model, method);
        if method == zip::CompressionMethod::Deflated {
            assert!(bytes.len() < 500 * 40 * 8, "{} bytes", bytes.len());
        }
        let back = ModelFile::from_bytes(&bytes, "resaved.npz", MemoryBudget::default())
            .unwrap_or_else(|e| panic!("{method:?}: {e}"));
        assert_eq!(back, model, "{method:?}");
        assert_eq!(back.kind(), "krr");
    }
}

#[test]
fn a_resaved_file_that_cannot_be_the_model_is_refused_with_the_true_reason() {
    let model = model();
    // An array re-saved as float32 (e.g. after `a.astype(np.float32)`).
    let mut float32 = ModelFile::new("krr", json!({ "lambda": 0.5 }));
    float32.put_vector("mean", &[1.0, 2.0]);
    let bytes = resaved(&float32, zip::CompressionMethod::Deflated);
    let mut archive = zip::ZipArchive::new(Cursor::new(&bytes)).expect("zip");
    let mut header = Vec::new();
    std::io::copy(&mut archive.by_name("header.json.npy").expect("header"), &mut header).expect("read");
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("header.json.npy", options).expect("member");
    zip.write_all(&header).expect("write");
    zip.start_file("mean.npy", options).expect("member");
    let data: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    zip.write_all(&numpy_npy("<f4", &[2], &data)).expect("write");
    let bytes = zip.finish().expect("finish").into_inner();
    let err = ModelFile::from_bytes(&bytes, "f32.npz", MemoryBudget::default()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ModelError::ModelFile { .. }), "{err:?}");
    assert!(message.contains("dtype '<f4', but header.json gives f64 (<f8)"), "{message}");

    // A header member that is not a bytes scalar.
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("header.json.npy", options).expect("member");
    zip.write_all(&numpy_npy("<i8", &[1], &7i64.to_le_bytes())).expect("write");
    let bytes = zip.finish().expect("finish").into_inner();
    let message = ModelFile::from_bytes(&bytes, "int.npz", MemoryBudget::default()).unwrap_err().to_string();
    assert!(message.contains("header.json.npy: holds an array of shape [1], expected a 0-d array"), "{message}");

    // A compressed member that claims far more than its bytes can inflate to.
    let mut bytes = resaved(&model, zip::CompressionMethod::Deflated);
    let mut archive = zip::ZipArchive::new(Cursor::new(&bytes)).expect("zip");
    let size = archive.by_name("alpha.npy").expect("alpha").size();
    drop(archive);
    // Patch the uncompressed size in the ZIP64 extra fields (8 bytes little endian).
    let needle = size.to_le_bytes();
    let huge = (1u64 << 40).to_le_bytes();
    let mut patched = 0;
    for k in 0..bytes.len() - 8 {
        if bytes[k..k + 8] == needle {
            bytes[k..k + 8].copy_from_slice(&huge);
            patched += 1;
        }
    }
    assert!(patched > 0, "no ZIP64 size to patch");
    let message = ModelFile::from_bytes(&bytes, "bomb.npz", MemoryBudget::default()).unwrap_err().to_string();
    assert!(!message.contains("panicked"), "{message}");
}

/// A deflated `header.json` that inflates to 20 MiB (a 20 KiB file) is refused by its size
/// before it is inflated and parsed; many arrays each within the budget but together over it
/// are refused on their running total.
#[test]
fn a_compressed_header_or_arrays_beyond_their_bounds_are_refused() {
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("header.json", options).expect("member");
    let mut text = b"{\"format\": \"stolr-model\", \"pad\": \"".to_vec();
    text.extend(std::iter::repeat_n(b' ', 20 << 20));
    text.extend_from_slice(b"\"}");
    zip.write_all(&text).expect("write");
    let bytes = zip.finish().expect("finish").into_inner();
    assert!(bytes.len() < 1 << 20, "{} bytes", bytes.len());
    let message = ModelFile::from_bytes(&bytes, "header-bomb.npz", MemoryBudget::default()).unwrap_err().to_string();
    assert!(message.contains("a model file's header may hold"), "{message}");

    // Ten deflated arrays of 6 MiB of zeros each (a few tens of KiB in all) under a 64 MiB
    // budget: each fits alone, their total with its parsed copies does not.
    let mut model = ModelFile::new("krr", json!({ "lambda": 0.5 }));
    for k in 0..10 {
        model.put_vector(&format!("a{k}"), &vec![0.0; 3 << 18]);
    }
    let bytes = resaved(&model, zip::CompressionMethod::Deflated);
    let err = ModelFile::from_bytes(&bytes, "arrays-bomb.npz", MemoryBudget::bytes(64 << 20)).unwrap_err();
    assert!(matches!(err, ModelError::OverBudget { ref path, .. } if path == "arrays-bomb.npz"), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("with the members inflated before it"), "{message}");
    // The same bytes under a budget that holds them (10 × 6 MiB, twice): read back whole.
    let back = ModelFile::from_bytes(&bytes, "arrays-bomb.npz", MemoryBudget::bytes(256 << 20)).expect("within budget");
    assert_eq!(back, model);
}

/// With Python and NumPy at hand, the real thing: `np.savez` and `np.savez_compressed` of
/// `dict(np.load(model))`.
#[test]
fn a_model_resaved_by_numpy_itself_loads_unchanged() {
    let probe = Command::new("python3").args(["-c", "import numpy"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: python3 with numpy is not available");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let model = model();
    let original = dir.path().join("model.npz");
    model.save(&original).expect("save");
    for (function, out) in [("savez", "plain.npz"), ("savez_compressed", "compressed.npz")] {
        let out = dir.path().join(out);
        let script = format!(
            "import numpy as np, sys\nm = np.load(sys.argv[1])\nnp.{function}(sys.argv[2], **{{k: m[k] for k in m.files}})"
        );
        let status =
            Command::new("python3").args(["-c", &script, path(&original), path(&out)]).status().expect("python3 runs");
        assert!(status.success(), "{function}");
        let back = ModelFile::load(&out, MemoryBudget::default()).unwrap_or_else(|e| panic!("{function}: {e}"));
        assert_eq!(back, model, "{function}");
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
