//! Writes a small model file, e.g. to check that NumPy reads it:
//!
//! ```text
//! cargo run -p stolr-model --example write_model_file -- /tmp/model.npz
//! python3 -c 'import json, numpy as np; f = np.load("/tmp/model.npz"); print(json.loads(f["header.json"]), f["x"], f["idx"])'
//! ```

use faer::Mat;
use stolr_model::ModelFile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os().nth(1).ok_or("usage: write_model_file OUT.npz")?;
    let mut model = ModelFile::new("example", serde_json::json!({ "sigma": 0.1, "k": 2, "kernel": "rbf" }));
    // x[i, j] = 10 i + j, so the C order is visible from NumPy.
    model.put_matrix("x", Mat::from_fn(2, 3, |i, j| (10 * i + j) as f64).as_ref());
    model.put_vector("edge", &[-0.0, f64::MIN_POSITIVE / 4.0, 1e308, f64::MAX, 0.1]);
    model.put_indices("idx", &[3, 0, 41]);
    model.put_vector("empty", &[]);
    model.save(std::path::Path::new(&path))?;
    println!("wrote {}", std::path::Path::new(&path).display());
    Ok(())
}
