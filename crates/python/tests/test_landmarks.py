"""``landmarks=`` for Nyström ``KernelPCA`` and ``KernelRidge`` (issue 23, Deliver 3;
scikit-learn #4982): landmarks given as training-row indices equal the same rows given as a
2-D array, do not depend on ``random_state``, agree with a dense Nyström computation, and bad
landmarks raise ``ValueError``. The data has an outlier row, duplicate rows and a constant
column."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import rbf_kernel

import stolr

GAMMA = 0.125


def _data(n=90, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 3] = 0.7  # a constant column
    X[10:14] = X[0:4]  # duplicate rows
    X[-1, :3] = [9.0, -7.0, 6.0]  # an outlier row
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 30.0
    Xt = rng.normal(size=(20, 4))
    Xt[:, 3] = 0.7
    return X, y, Xt


IDX = np.array([89, 0, 10, 3, 17, 25, 33, 41, 50, 58, 66, 74, 80])  # the outlier, a duplicate pair


def test_kernel_pca_indices_equal_rows_and_ignore_the_seed():
    X, _, Xt = _data()
    fit = lambda landmarks, seed: stolr.KernelPCA(n_components=4, solver="nystrom", gamma=GAMMA,
                                                  landmarks=landmarks, random_state=seed).fit(X)
    a = fit(IDX, 0)
    b = fit(X[IDX], 7)
    c = fit(list(IDX), 123)
    np.testing.assert_allclose(b.eigenvalues_, a.eigenvalues_, rtol=1e-12)
    np.testing.assert_array_equal(c.eigenvalues_, a.eigenvalues_)
    za, zb = a.transform(Xt), b.transform(Xt)
    assert np.max(np.abs(za - zb)) <= 1e-10 * np.max(np.abs(za))
    np.testing.assert_array_equal(c.transform(Xt), za)
    # The drawn landmarks give another fit: the given ones are used.
    drawn = stolr.KernelPCA(n_components=4, solver="nystrom", gamma=GAMMA, n_landmarks=len(IDX)).fit(X)
    assert np.max(np.abs(drawn.eigenvalues_ - a.eigenvalues_)) > 1e-6 * a.eigenvalues_[0]


def test_kernel_pca_arbitrary_rows_agree_with_the_dense_nystrom_matrix():
    X, _, _ = _data()
    L = np.random.default_rng(5).normal(size=(9, 4)) * 1.5
    L[:, 3] = 0.7
    est = stolr.KernelPCA(n_components=3, solver="nystrom", gamma=GAMMA, landmarks=L).fit(X)
    C, W = rbf_kernel(X, L, gamma=GAMMA), rbf_kernel(L, L, gamma=GAMMA)
    n = X.shape[0]
    H = np.eye(n) - 1.0 / n
    values = np.linalg.eigvalsh(H @ C @ np.linalg.pinv(W, rcond=1e-10, hermitian=True) @ C.T @ H)[::-1]
    np.testing.assert_allclose(est.eigenvalues_, values[:3], rtol=1e-9)


def test_kernel_ridge_indices_equal_rows_and_agree_with_the_normal_equations():
    X, y, Xt = _data()
    for solve in ("direct", "cg"):
        fit = lambda landmarks, seed: stolr.KernelRidge(
            solver="nystrom", alpha=0.3, gamma=GAMMA, landmarks=landmarks, random_state=seed,
            nystrom_solve=solve, tol=1e-14, max_iter=500).fit(X, y)
        a, b = fit(IDX, 0), fit(X[IDX], 9)
        pa, pb = a.predict(Xt), b.predict(Xt)
        assert np.max(np.abs(pa - pb)) <= 1e-10 * np.max(np.abs(pa)), solve
        np.testing.assert_array_equal(fit(IDX, 4).predict(Xt), pa)
        # The centred Nyström normal equations solved densely on the same landmarks.
        C, W = rbf_kernel(X, X[IDX], gamma=GAMMA), rbf_kernel(X[IDX], X[IDX], gamma=GAMMA)
        kbar, ybar = C.mean(axis=0), y.mean()
        Cc = C - kbar
        # Rows 0 and 10 are equal: the system is singular, its predictions are not (least squares).
        alpha = np.linalg.lstsq(Cc.T @ Cc + 0.3 * W, Cc.T @ (y - ybar), rcond=1e-12)[0]
        reference = rbf_kernel(Xt, X[IDX], gamma=GAMMA) @ alpha + ybar - kbar @ alpha
        assert np.max(np.abs(pa - reference)) <= 1e-8 * np.max(np.abs(reference)), solve


def test_kernel_ridge_rows_with_weights_and_outputs_and_sparse_training_rows():
    X, y, Xt = _data()
    Y = np.column_stack([y, -y + X[:, 0]])
    w = np.linspace(0.5, 2.0, X.shape[0])
    a = stolr.KernelRidge(solver="nystrom", alpha=0.3, gamma=GAMMA, landmarks=IDX).fit(X, Y, sample_weight=w)
    b = stolr.KernelRidge(solver="nystrom", alpha=0.3, gamma=GAMMA, landmarks=X[IDX]).fit(X, Y, sample_weight=w)
    pa = a.predict(Xt)
    assert pa.shape == (20, 2)
    assert np.max(np.abs(pa - b.predict(Xt))) <= 1e-10 * np.max(np.abs(pa))
    # Sparse training rows: indices and dense rows both work and equal the dense fit.
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    Xd = Xs.toarray()
    for landmarks in (IDX, Xd[IDX]):
        dense = stolr.KernelRidge(solver="nystrom", alpha=0.3, gamma=GAMMA, landmarks=landmarks).fit(Xd, y)
        sparse = stolr.KernelRidge(solver="nystrom", alpha=0.3, gamma=GAMMA, landmarks=landmarks).fit(Xs, y)
        pd_ = dense.predict(Xt)
        assert np.max(np.abs(sparse.predict(Xt) - pd_)) <= 1e-10 * np.max(np.abs(pd_))


def test_krr_subset_takes_indices():
    X, y, Xt = _data()
    a = stolr.KernelRidge(solver="krr-subset", alpha=0.1, gamma=GAMMA, landmarks=IDX).fit(X, y)
    ref = stolr.KernelRidge(solver="krr", alpha=0.1, gamma=GAMMA).fit(X[IDX], y[IDX])
    np.testing.assert_allclose(a.predict(Xt), ref.predict(Xt), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("landmarks, needle", [
    (np.array([0, 90]), "out of range"),
    (np.array([3, 5, 3]), "given twice"),
    (np.array([], dtype=np.int64), "empty"),
    (np.array([-1, 2]), ">= 0"),
    (np.array([0.0, 2.0]), "integer"),
    (np.array([True, False]), "integer"),
    (np.zeros((3, 5)), "columns"),
    (np.array([[0.0, 1.0, np.nan, 0.7]]), "non-finite"),
    (np.zeros((0, 4)), "no landmark rows"),
    (np.zeros((2, 2, 4)), "shape"),
    (np.array("abc"), "shape"),
])
def test_bad_landmarks_raise_value_error(landmarks, needle):
    X, y, _ = _data()
    with pytest.raises(ValueError, match=needle):
        stolr.KernelRidge(solver="nystrom", gamma=GAMMA, landmarks=landmarks).fit(X, y)
    with pytest.raises(ValueError, match=needle):
        stolr.KernelPCA(n_components=2, solver="nystrom", gamma=GAMMA, landmarks=landmarks).fit(X)


def test_landmarks_with_a_solver_that_takes_none_raise_value_error():
    X, y, _ = _data()
    with pytest.raises(ValueError, match="landmarks"):
        stolr.KernelPCA(n_components=2, solver="exact", landmarks=IDX).fit(X)
    for solver in ("krr", "slkl"):
        with pytest.raises(ValueError, match="landmarks"):
            stolr.KernelRidge(solver=solver, landmarks=IDX).fit(X, y)
    with pytest.raises(ValueError, match="indices only"):
        stolr.KernelRidge(solver="uniform", landmarks=X[IDX]).fit(X, y)


def test_kernel_pca_without_n_components_keeps_at_most_one_pair_per_landmark():
    X, _, _ = _data()
    est = stolr.KernelPCA(solver="nystrom", gamma=GAMMA, landmarks=IDX[1:4]).fit(X)  # 3 landmarks, 4 features
    r = est.eigenvalues_.shape[0]  # centred: the 3 landmarks span at most 2 or 3 directions
    assert 1 <= r <= 3
    assert est.transform(X).shape == (X.shape[0], r)
