"""Sparse rows (``scipy.sparse``) in ``KernelPCA``: never densified, the same eigenvalues as
the same rows dense to 1e-12, the same transform of dense and sparse new rows, scikit-learn's
``KernelPCA`` on the sparse matrix to 1e-8, and the refusals of what needs dense rows.

The data are about 2 % dense, with an outlier row, duplicate rows, an empty row and a constant
(fully stored) column.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import KernelPCA as SkKernelPCA

import stolr


def _sparse(n, d, seed):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.02, format="lil", random_state=rng, data_rvs=lambda k: rng.normal(size=k))
    X[:, 0] = 0.5  # a constant column
    X[3, ::9] = 25.0  # an outlier row
    X[8] = X[1]  # duplicate rows
    X[10] = 0.0  # an empty row
    return X.tocsr()


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def _align(ours, theirs):
    signs = np.sign(np.sum(ours * theirs, axis=0))
    signs[signs == 0] = 1.0
    return signs


@pytest.mark.parametrize("solver", ["exact", "exact-matrix-free", "nystrom"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "cosine"])
def test_sparse_rows_give_the_dense_fit(solver, kernel):
    X, X_test = _sparse(250, 300, 1), _sparse(30, 300, 2)
    kw = dict(n_components=4, kernel=kernel, solver=solver, n_landmarks=60, random_state=5)
    dense = stolr.KernelPCA(**kw).fit(X.toarray())
    sparse = stolr.KernelPCA(**kw).fit(X)
    np.testing.assert_allclose(sparse.eigenvalues_, dense.eigenvalues_, rtol=0, atol=1e-12 * dense.eigenvalues_[0])
    want = dense.transform(X_test.toarray())
    assert _rel(sparse.transform(X_test), want) < 1e-9
    assert _rel(sparse.transform(X_test.toarray()), want) < 1e-9
    assert _rel(dense.transform(X_test), want) < 1e-9


def test_sparse_rows_match_scikit_learn_on_the_sparse_matrix():
    X, X_test = _sparse(200, 150, 3), _sparse(25, 150, 4)
    gamma = 0.2
    ours = stolr.KernelPCA(n_components=5, kernel="rbf", gamma=gamma, solver="exact", center=True).fit(X)
    theirs = SkKernelPCA(n_components=5, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8)
    z, z_sk = ours.transform(X_test), theirs.transform(X_test)
    assert _rel(z * _align(z, z_sk), z_sk) < 1e-8


def test_a_non_canonical_csr_matrix_is_the_same_rows():
    X = _sparse(120, 80, 5)
    coo = X.tocoo()
    # The same matrix with its entries split in two duplicates each, out of order.
    rows = np.concatenate([coo.row, coo.row])[::-1]
    cols = np.concatenate([coo.col, coo.col])[::-1]
    vals = np.concatenate([coo.data / 2, coo.data / 2])[::-1]
    messy = sp.csr_matrix((vals, (rows, cols)), shape=X.shape)
    messy.has_canonical_format = False
    kw = dict(n_components=3, solver="exact", gamma=0.3)
    a = stolr.KernelPCA(**kw).fit(X)
    b = stolr.KernelPCA(**kw).fit(messy)
    np.testing.assert_allclose(b.eigenvalues_, a.eigenvalues_, rtol=1e-12)


def test_what_needs_dense_rows_refuses_sparse_ones():
    X = _sparse(80, 40, 6)
    with pytest.raises(ValueError, match="sparse|pre-image"):
        stolr.KernelPCA(n_components=3, solver="exact", fit_inverse_transform=True).fit(X)
    bad = X.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError):
        stolr.KernelPCA(n_components=3, solver="exact").fit(bad)


@pytest.mark.parametrize("solver", ["krr", "nystrom"])
def test_kernel_ridge_on_sparse_rows_gives_the_dense_fit(solver):
    X, X_test = _sparse(300, 200, 7), _sparse(40, 200, 8)
    rng = np.random.default_rng(9)
    y = np.sin(X[:, 1].toarray().ravel() * 3) + rng.normal(scale=0.1, size=300)
    Y = np.column_stack([y, y ** 2])
    w = rng.uniform(0.5, 3.0, size=300)
    kw = dict(solver=solver, alpha=0.3, gamma=0.2, n_landmarks=60, random_state=4)
    for target, weights in [(y, None), (Y, w)]:
        dense = stolr.KernelRidge(**kw).fit(X.toarray(), target, sample_weight=weights)
        sparse = stolr.KernelRidge(**kw).fit(X, target, sample_weight=weights)
        want = dense.predict(X_test.toarray())
        # The rounding floor of the problem: the dense fit of the same rows with the features in
        # reverse order (SLKL's Woodbury updates amplify a few ulps of the kernel values).
        reversed_fit = stolr.KernelRidge(**kw).fit(X.toarray()[:, ::-1], target, sample_weight=weights)
        tol = max(1e-9, 10 * _rel(reversed_fit.predict(X_test.toarray()[:, ::-1]), want))
        assert _rel(sparse.predict(X_test), want) < tol
        assert _rel(sparse.predict(X_test.toarray()), want) < tol


def test_kernel_ridge_on_sparse_rows_matches_scikit_learn():
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    X, X_test = _sparse(250, 120, 10), _sparse(30, 120, 11)
    rng = np.random.default_rng(12)
    y = X[:, 2].toarray().ravel() - X[:, 7].toarray().ravel() + rng.normal(scale=0.05, size=250)
    w = rng.uniform(0.2, 2.0, size=250)
    ours = stolr.KernelRidge(solver="krr", alpha=0.5, gamma=0.3, fit_intercept=False).fit(X, y, sample_weight=w)
    theirs = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, y, sample_weight=w)
    assert _rel(ours.predict(X_test), theirs.predict(X_test)) < 1e-10


def test_kernel_ridge_solvers_that_need_dense_rows_refuse_sparse_ones():
    X = _sparse(80, 40, 13)
    y = np.arange(80, dtype=float)
    with pytest.raises(ValueError, match="sparse"):
        stolr.KernelRidge(solver="slkl", n_landmarks=10, nu="auto").fit(X, y)


@pytest.mark.filterwarnings("ignore:kha has not converged")
@pytest.mark.parametrize("solver,kernel,sampler", [("skpca", "rbf", "rff"), ("skpca", "laplacian", "rff"),
                                                    ("skpca", "poly", "maclaurin"), ("skpca", "rbf", "columns"),
                                                    ("kha", "rbf", "rff")])
def test_stochastic_kernel_pca_on_sparse_rows_gives_the_dense_fit(solver, kernel, sampler):
    """SKPCA (every sampler) and KHA on scipy.sparse rows: the dense eigenvalues to 1e-12 and
    the dense transform of held-out rows, dense or sparse."""
    X, X_test = _sparse(220, 200, 15), _sparse(30, 200, 16)
    kw = dict(n_components=3, kernel=kernel, solver=solver, sampler=sampler, n_iter=60, n_features=30,
              random_state=7)
    if solver == "kha":
        kw.update(n_iter=300)
    dense = stolr.KernelPCA(**kw).fit(X.toarray())
    sparse = stolr.KernelPCA(**kw).fit(X)
    assert stolr.KernelPCA(**kw).__sklearn_tags__().input_tags.sparse
    np.testing.assert_allclose(sparse.eigenvalues_, dense.eigenvalues_, rtol=0, atol=1e-12 * dense.eigenvalues_[0])
    want = dense.transform(X_test.toarray())
    assert _rel(sparse.transform(X_test), want) < 1e-9
    assert _rel(sparse.transform(X_test.toarray()), want) < 1e-9


@pytest.mark.parametrize("solver", ["slkl", "uniform", "krr-subset"])
def test_landmark_kernel_ridge_on_sparse_rows_gives_the_dense_fit(solver):
    """SLKL, Unif and KRR_M on scipy.sparse rows, one output and two weighted ones: the dense
    predictions to 1e-9, or to ten times the dense fit's own rounding floor when larger."""
    X, X_test = _sparse(260, 150, 17), _sparse(35, 150, 18)
    rng = np.random.default_rng(19)
    y = np.sin(X[:, 1].toarray().ravel() * 3) + X[:, 4].toarray().ravel() + rng.normal(scale=0.1, size=260)
    Y = np.column_stack([y, y ** 2])
    w = rng.uniform(0.5, 3.0, size=260)
    kw = dict(solver=solver, alpha=0.3, gamma=0.2, n_landmarks=50, nu=1e-3, random_state=4)
    assert stolr.KernelRidge(**kw).__sklearn_tags__().input_tags.sparse
    for target, weights in [(y, None), (Y, w)]:
        dense = stolr.KernelRidge(**kw).fit(X.toarray(), target, sample_weight=weights)
        sparse = stolr.KernelRidge(**kw).fit(X, target, sample_weight=weights)
        want = dense.predict(X_test.toarray())
        # The rounding floor of the problem: the dense fit of the same rows with the features in
        # reverse order (SLKL's Woodbury updates amplify a few ulps of the kernel values).
        reversed_fit = stolr.KernelRidge(**kw).fit(X.toarray()[:, ::-1], target, sample_weight=weights)
        tol = max(1e-9, 10 * _rel(reversed_fit.predict(X_test.toarray()[:, ::-1]), want))
        assert _rel(sparse.predict(X_test), want) < tol
        assert _rel(sparse.predict(X_test.toarray()), want) < tol


def test_a_corrupt_csr_matrix_is_refused_not_a_crash():
    X = _sparse(40, 10, 14)
    for corrupt in ("past_the_end", "decreasing"):
        B = X.copy()
        B.indptr = B.indptr.copy()
        if corrupt == "past_the_end":
            B.indptr[1] = B.indptr[-1] + 5
        else:
            B.indptr[5] = B.indptr[4] - 1
        with pytest.raises(ValueError):
            stolr.KernelPCA(n_components=3).fit(B)


def test_csr_parts_are_read_in_place_and_checked_in_the_library():
    """The library reads a CSR matrix's arrays where they are (int64 indices as usize): the
    values are not copied, and parts that bypass scipy's checks (a negative index, a pointer
    past the end, unsorted indices) are refused with ValueError, never read out of bounds."""
    X = _sparse(60, 40, 11)
    model = stolr.KernelPCA(n_components=3, solver="nystrom", n_landmarks=20, random_state=0).fit(X)
    want = model.transform(X[:5])
    part = X[:5]
    indptr, indices = part.indptr.astype(np.int64), part.indices.astype(np.int64)
    got = stolr._core.transform(model.model_, (indptr, indices, part.data, part.shape))
    np.testing.assert_array_equal(got, want)
    for bad_ptr, bad_idx in [
        (indptr, np.where(np.arange(indices.size) == 1, -1, indices)),  # a negative index
        (np.concatenate([indptr[:-1], [indptr[-1] + 7]]), indices),  # a pointer past the entries
        (indptr, np.concatenate([indices[:1] + 39, indices[1:]])),  # out of order or out of range
    ]:
        with pytest.raises(ValueError, match="sparse"):
            stolr._core.transform(model.model_, (bad_ptr, bad_idx, part.data, part.shape))
