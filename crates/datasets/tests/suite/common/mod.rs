//! File builders shared by the datasets crate's integration tests.

use std::io::Write;

/// An IDX file of unsigned bytes: the magic number, the dimensions, the data.
pub fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_be_bytes().to_vec();
    for dim in dims {
        bytes.extend_from_slice(&dim.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

/// `bytes` gzip-compressed.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}
