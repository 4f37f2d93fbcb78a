//! Loading a model file never allocates more than its size implies, whatever its header
//! claims. A separate test binary: its global allocator records the largest allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Cursor, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use stolr_memory::MemoryBudget;
use stolr_model::{ModelError, ModelFile};

/// The system allocator, recording the largest single request.
struct Recording;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// `bytes` with `header.json` replaced by `edit` applied to it.
fn edit_header(bytes: &[u8], edit: impl Fn(&mut Value)) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("zip");
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).expect("member");
        let mut content = Vec::new();
        file.read_to_end(&mut content).expect("read");
        let name = file.name().expect("name").into_owned();
        if name == "header.json" {
            let mut header: Value = serde_json::from_slice(&content).expect("JSON");
            edit(&mut header);
            content = serde_json::to_vec(&header).expect("JSON");
        }
        out.start_file(name, options).expect("start");
        out.write_all(&content).expect("write");
    }
    out.finish().expect("finish").into_inner()
}

#[test]
fn huge_claimed_shapes_and_sizes_allocate_nothing_large() {
    let mut model = ModelFile::new("krr", json!({}));
    model.put_matrix("alpha", faer::Mat::from_fn(3, 2, |i, j| (i + j) as f64).as_ref());
    let bytes = model.to_bytes().expect("encode");
    let mut files = Vec::new();
    for shape in [json!([1u64, 1u64 << 60]), json!([1u64 << 28, 1u64 << 28]), json!([(1u64 << 32) + 1])] {
        files.push(edit_header(&bytes, |h| h["arrays"]["alpha"]["shape"] = shape.clone()));
    }
    // A corrupted ZIP size field: the uncompressed size of a member in the central directory
    // (offset 24 of a central header) set to 2^31.
    let central = bytes.windows(4).position(|w| w == b"PK\x01\x02").expect("central directory");
    let mut corrupt = bytes.clone();
    corrupt[central + 24..central + 28].copy_from_slice(&(1u32 << 31).to_le_bytes());
    files.push(corrupt);

    // The recorder sees a large allocation.
    LARGEST.store(0, Ordering::Relaxed);
    let probe = std::hint::black_box(Vec::<u8>::with_capacity(1 << 20));
    assert!(LARGEST.load(Ordering::Relaxed) >= 1 << 20);
    drop(probe);

    let limit = 64 * bytes.len().max(files.iter().map(Vec::len).max().unwrap_or(0));
    for (k, file) in files.iter().enumerate() {
        LARGEST.store(0, Ordering::Relaxed);
        let result = ModelFile::from_bytes(file, "m.npz", MemoryBudget::default());
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(matches!(result, Err(ModelError::ModelFile { .. })), "case {k}: {result:?}");
        assert!(largest <= limit, "case {k}: an allocation of {largest} bytes for a {}-byte file", file.len());
    }
}
