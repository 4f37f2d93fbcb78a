//! Peak resident memory of this process.

pub use stolr_memory::peak_rss_bytes;
