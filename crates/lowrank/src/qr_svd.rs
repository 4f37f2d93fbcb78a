//! Thin QR and thin SVD factorizations, on one thread.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{Mat, MatRef, Par};

use crate::LowRankError;

/// Thin QR factorization `a = q r` of `a`, shape `(n, k)`: `q` has shape `(n, min(n, k))` with
/// orthonormal columns and `r` is upper trapezoidal, shape `(min(n, k), k)` (blocked
/// Householder, faer, on one thread: the same bits for any number of threads).
pub fn thin_qr(a: MatRef<'_, f64>) -> (Mat<f64>, Mat<f64>) {
    use faer::linalg::householder::{
        apply_block_householder_sequence_on_the_left_in_place_scratch,
        apply_block_householder_sequence_on_the_left_in_place_with_conj,
    };
    use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch, recommended_block_size};
    let (n, k) = a.shape();
    let size = n.min(k);
    if size == 0 {
        return (Mat::zeros(n, size), Mat::zeros(size, k));
    }
    let mut factored = a.to_owned();
    let block = recommended_block_size::<f64>(n, k);
    let mut coeff = Mat::<f64>::zeros(block, size);
    let mut mem = MemBuffer::new(qr_in_place_scratch::<f64>(n, k, block, Par::Seq, Default::default()));
    qr_in_place(factored.as_mut(), coeff.as_mut(), Par::Seq, MemStack::new(&mut mem), Default::default());
    let r = Mat::from_fn(size, k, |i, j| if i <= j { factored[(i, j)] } else { 0.0 });
    // The Householder basis, unit lower trapezoidal `(n, size)`, in place of the factored copy.
    for j in 0..size {
        for i in 0..j {
            factored[(i, j)] = 0.0;
        }
        factored[(j, j)] = 1.0;
    }
    let mut q = Mat::<f64>::identity(n, size);
    let mut mem = MemBuffer::new(apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n, block, size));
    apply_block_householder_sequence_on_the_left_in_place_with_conj(
        factored.as_ref().subcols(0, size),
        coeff.as_ref(),
        faer::Conj::No,
        q.as_mut(),
        Par::Seq,
        MemStack::new(&mut mem),
    );
    (q, r)
}

/// `(u, s, v)` of a thin SVD.
pub type ThinSvd = (Mat<f64>, Vec<f64>, Mat<f64>);

/// Thin SVD `a = u diag(s) vᵀ` of `a`, shape `(m, k)`: `u` of shape `(m, p)`, `s` of length
/// `p = min(m, k)` in **nonincreasing** order, `v` of shape `(k, p)`. Runs on one thread (the
/// same bits for any number of threads): for the small matrices of the shrinkage steps.
///
/// # Errors
/// [`LowRankError::NoConvergence`] if faer's SVD fails.
pub fn thin_svd(a: MatRef<'_, f64>) -> Result<ThinSvd, LowRankError> {
    let p = a.nrows().min(a.ncols());
    if p == 0 {
        return Ok((Mat::zeros(a.nrows(), 0), Vec::new(), Mat::zeros(a.ncols(), 0)));
    }
    use faer::linalg::svd::{ComputeSvdVectors, svd, svd_scratch};
    let (m, k) = a.shape();
    let thin = ComputeSvdVectors::Thin;
    let (mut u, mut v, mut s) = (Mat::<f64>::zeros(m, p), Mat::<f64>::zeros(k, p), faer::diag::Diag::<f64>::zeros(p));
    let mut mem = MemBuffer::new(svd_scratch::<f64>(m, k, thin, thin, Par::Seq, Default::default()));
    svd(a, s.as_mut(), Some(u.as_mut()), Some(v.as_mut()), Par::Seq, MemStack::new(&mut mem), Default::default())
        .map_err(|_| LowRankError::NoConvergence { what: "SVD" })?;
    let s = s.column_vector();
    Ok((u, (0..p).map(|i| s[i]).collect(), v))
}
