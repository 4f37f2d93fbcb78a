"""Float32 arrays kept as float32: every estimator fitted on a float32 array gives the results
of the same values in float64, bit for bit (the library converts each value exactly where it
computes, a block of rows at a time), agrees with scikit-learn on the float64 values, and
refuses hostile float32 input as it refuses float64.

The data hold an outlier row, duplicate rows, a constant column and an offset of 1e3.
"""

import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

import stolr


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:, 0] = 0.5  # a constant column
    X[:, 1] += 1e3  # an offset
    X[4] = 40.0 * X[4] + 25.0  # an outlier row
    X[9] = X[2]  # duplicate rows
    return X


def test_pca_of_float32_is_the_pca_of_the_same_values_in_float64():
    X = _data(400, 12, 1)
    X64 = X.astype(np.float64)
    # SVRG-PCA on unscaled rows with an offset diverges (and says so): it gets rows of unit scale.
    Z = (np.random.default_rng(9).normal(size=(400, 12)) * np.linspace(3, 0.5, 12)).astype(np.float32)
    for solver, rows in [("exact", X), ("svrg-bb", Z), ("vr-pca", Z)]:
        ours32 = stolr.PCA(n_components=4, solver=solver, random_state=3).fit(rows)
        ours64 = stolr.PCA(n_components=4, solver=solver, random_state=3).fit(rows.astype(np.float64))
        assert np.array_equal(ours32.components_, ours64.components_), solver
        assert np.array_equal(ours32.explained_variance_, ours64.explained_variance_), solver
        assert np.array_equal(ours32.transform(rows[:20]), ours64.transform(rows[:20].astype(np.float64))), solver
    sk = SkPCA(n_components=4, svd_solver="full").fit(X64)
    ours = stolr.PCA(n_components=4).fit(X)
    np.testing.assert_allclose(ours.explained_variance_, sk.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ours.explained_variance_ratio_, sk.explained_variance_ratio_, rtol=1e-10)
    # Fortran order too.
    ours_f = stolr.PCA(n_components=4).fit(np.asfortranarray(X))
    np.testing.assert_allclose(ours_f.explained_variance_, sk.explained_variance_, rtol=1e-10)


def test_streaming_pca_of_float32_is_that_of_float64():
    X = _data(500, 10, 2)
    X64 = X.astype(np.float64)
    for solver in ["capped-msg", "incremental", "oja"]:
        a = stolr.StreamingPCA(n_components=3, solver=solver, random_state=1).fit(X)
        b = stolr.StreamingPCA(n_components=3, solver=solver, random_state=1).fit(X64)
        assert np.array_equal(a.components_, b.components_), solver
        a = stolr.StreamingPCA(n_components=3, solver=solver, random_state=1)
        b = stolr.StreamingPCA(n_components=3, solver=solver, random_state=1)
        for start in range(0, 500, 100):
            a.partial_fit(X[start:start + 100])
            b.partial_fit(X64[start:start + 100])
        assert np.array_equal(a.components_, b.components_), solver


@pytest.mark.parametrize("solver", ["exact", "exact-matrix-free", "nystrom", "skpca"])
def test_kernel_pca_of_float32_is_that_of_float64(solver):
    X, T = _data(300, 8, 3), _data(30, 8, 4)
    kw = dict(n_components=4, kernel="rbf", solver=solver, random_state=5)
    if solver == "nystrom":
        kw["n_landmarks"] = 60
    a = stolr.KernelPCA(**kw).fit(X)
    b = stolr.KernelPCA(**kw).fit(X.astype(np.float64))
    assert np.array_equal(a.eigenvalues_, b.eigenvalues_)
    assert np.array_equal(a.transform(T), b.transform(T.astype(np.float64)))


@pytest.mark.parametrize("solver", ["krr", "nystrom", "slkl"])
def test_kernel_ridge_of_float32_is_that_of_float64(solver):
    X, T = _data(200, 6, 5), _data(25, 6, 6)
    X64 = X.astype(np.float64)
    y = np.sin(X64[:, 2] - X64[:, 3]) + 1e-3 * X64[:, 1]
    kw = dict(solver=solver, alpha=0.1, kernel="rbf", gamma=0.2, random_state=2)
    if solver != "krr":
        kw["n_landmarks"] = 40
    a = stolr.KernelRidge(**kw).fit(X, y)
    b = stolr.KernelRidge(**kw).fit(X64, y)
    assert np.array_equal(a.predict(T), b.predict(T.astype(np.float64)))
    if solver == "krr":
        sk = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=0.2).fit(X64, y - y.mean())
        ours = stolr.KernelRidge(solver="krr", alpha=0.1, kernel="rbf", gamma=0.2, fit_intercept=False)
        ours.fit(X, y - y.mean())
        np.testing.assert_allclose(ours.predict(T), sk.predict(T.astype(np.float64)), rtol=1e-9, atol=1e-10)


def test_hostile_float32_input_is_refused_like_float64():
    X = _data(50, 4, 7)
    X[13, 2] = np.nan
    for est in [stolr.PCA(n_components=2), stolr.KernelPCA(n_components=2, solver="nystrom", n_landmarks=10),
                stolr.StreamingPCA(n_components=2)]:
        with pytest.raises(ValueError):
            est.fit(X)
    X[13, 2] = np.inf
    with pytest.raises(ValueError):
        stolr.KernelRidge(solver="nystrom", n_landmarks=10).fit(X, np.ones(50))
    with pytest.raises(ValueError):
        stolr.PCA(n_components=2).fit(np.zeros((0, 4), dtype=np.float32))
    # Other dtypes are converted to float64 and fit as before.
    Y = _data(60, 5, 8)
    a = stolr.PCA(n_components=2).fit(Y.astype(np.float16))
    b = stolr.PCA(n_components=2).fit(Y.astype(np.float16).astype(np.float64))
    assert np.array_equal(a.components_, b.components_)
