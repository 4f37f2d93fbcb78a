"""kernel="precomputed" and callable kernels in KernelRidge and KernelPCA: against scikit-learn's
precomputed estimators, against Stolr's own named kernels on the same Gram matrix, callable
against precomputed, scikit-learn's estimator checks, and hostile Gram matrices."""

import pickle

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

import stolr

GAMMA = 0.3


def _rbf(x, y):
    """A callable kernel (module level, so estimators holding it pickle): the rbf kernel."""
    return float(np.exp(-GAMMA * np.sum((x - y) ** 2)))


def _hostile(n=40, m=9, d=4, seed=0):
    """Training rows with an outlier row, two duplicate rows and a constant column, test rows,
    and targets (two outputs) with a large offset."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    X[0] *= 20.0
    X[n - 1] = X[1]
    X[2] = X[1]
    X[:, -1] = 3.0
    Y = np.column_stack([np.sin(X[:, 0]) + 50.0, X[:, 1] ** 2 - 7.0]) + 0.1 * rng.normal(size=(n + m, 2))
    return X[:n], X[n:], Y[:n]


def _rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def _up_to_sign(a, b):
    s = np.sign(np.sum(a * b, axis=0))
    s[s == 0] = 1
    return np.max(np.abs(a * s - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("outputs", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_ridge_precomputed_matches_scikit_learn_without_intercept(outputs, weighted):
    X, T, Y = _hostile()
    y = Y[:, 0] if outputs == 1 else Y
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=len(X)) if weighted else None
    K, K_test = rbf_kernel(X, gamma=GAMMA), rbf_kernel(T, X, gamma=GAMMA)
    ours = stolr.KernelRidge(kernel="precomputed", alpha=0.5, fit_intercept=False).fit(K, y, sample_weight=w)
    ref = SkKernelRidge(kernel="precomputed", alpha=0.5).fit(K, y, sample_weight=w)
    assert ours.dual_coef_.shape == ref.dual_coef_.shape
    assert _rel(ours.dual_coef_, ref.dual_coef_) < 1e-10
    assert _rel(ours.predict(K_test), ref.predict(K_test)) < 1e-10
    assert np.all(np.asarray(ours.intercept_) == 0.0)


@pytest.mark.parametrize("outputs", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_ridge_precomputed_intercept_equals_the_rbf_kernel_s(outputs, weighted):
    X, T, Y = _hostile(seed=2)
    y = Y[:, 0] if outputs == 1 else Y
    w = np.random.default_rng(3).uniform(0.2, 3.0, size=len(X)) if weighted else None
    K, K_test = rbf_kernel(X, gamma=GAMMA), rbf_kernel(T, X, gamma=GAMMA)
    ours = stolr.KernelRidge(kernel="precomputed", alpha=0.2).fit(K, y, sample_weight=w)
    named = stolr.KernelRidge(kernel="rbf", gamma=GAMMA, alpha=0.2).fit(X, y, sample_weight=w)
    assert _rel(ours.dual_coef_, named.dual_coef_) < 1e-10
    assert _rel(ours.predict(K_test), named.predict(T)) < 1e-10
    # The intercept matters here (targets offset by 50 and -7): without it the predictions differ.
    plain = stolr.KernelRidge(kernel="precomputed", alpha=0.2, fit_intercept=False).fit(K, y, sample_weight=w)
    assert _rel(plain.predict(K_test), named.predict(T)) > 1e-3


def test_kernel_pca_precomputed_matches_scikit_learn_and_the_rbf_kernel_s():
    X, T, _ = _hostile(n=60, m=11, seed=4)
    K, K_test = rbf_kernel(X, gamma=GAMMA), rbf_kernel(T, X, gamma=GAMMA)
    ours = stolr.KernelPCA(n_components=5, kernel="precomputed").fit(K)
    ref = SkKernelPCA(n_components=5, kernel="precomputed", eigen_solver="dense").fit(K)
    assert np.max(np.abs(ours.eigenvalues_ - ref.eigenvalues_)) < 1e-10 * ref.eigenvalues_[0]
    assert _up_to_sign(ours.eigenvectors_, ref.eigenvectors_) < 1e-8
    assert _up_to_sign(ours.transform(K_test), ref.transform(K_test)) < 1e-8
    assert _up_to_sign(ours.fit_transform(K), ref.fit_transform(K)) < 1e-8
    # The same eigenpairs and projections as the exact solver's with the rbf kernel.
    named = stolr.KernelPCA(n_components=5, kernel="rbf", gamma=GAMMA).fit(X)
    assert np.max(np.abs(ours.eigenvalues_ - named.eigenvalues_)) < 1e-10 * named.eigenvalues_[0]
    assert _up_to_sign(ours.transform(K_test), named.transform(T)) < 1e-8
    # n_components=None: every numerically nonzero pair, without a warning (as scikit-learn,
    # which keeps the positive ones).
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        every = stolr.KernelPCA(kernel="precomputed").fit(K)
    positive = SkKernelPCA(kernel="precomputed", eigen_solver="dense").fit(K).eigenvalues_
    assert np.allclose(every.eigenvalues_[:10], positive[:10], rtol=1e-10, atol=1e-10 * positive[0])
    assert every.transform(K_test).shape == (len(T), len(every.eigenvalues_))
    # Uncentred: the eigenvalues of K itself.
    raw = stolr.KernelPCA(n_components=3, kernel="precomputed", center=False).fit(K)
    assert np.allclose(raw.eigenvalues_, np.linalg.eigvalsh(K)[::-1][:3], rtol=1e-10)
    assert not hasattr(raw, "K_fit_rows_")


def test_callable_kernels_equal_the_precomputed_path():
    X, T, Y = _hostile(seed=5)
    K = np.array([[_rbf(a, b) for b in X] for a in X])
    K_test = np.array([[_rbf(a, b) for b in X] for a in T])
    w = np.linspace(0.5, 2.0, len(X))
    called = stolr.KernelRidge(kernel=_rbf, alpha=0.3).fit(X, Y, sample_weight=w)
    given = stolr.KernelRidge(kernel="precomputed", alpha=0.3).fit(K, Y, sample_weight=w)
    np.testing.assert_array_equal(called.dual_coef_, given.dual_coef_)
    np.testing.assert_array_equal(called.predict(T), given.predict(K_test))
    assert called.X_fit_.shape == X.shape and not hasattr(given, "X_fit_")
    # scikit-learn's callable kernel (no intercept there).
    ref = SkKernelRidge(kernel=_rbf, alpha=0.3).fit(X, Y[:, 0])
    ours = stolr.KernelRidge(kernel=_rbf, alpha=0.3, fit_intercept=False).fit(X, Y[:, 0])
    assert _rel(ours.predict(T), ref.predict(T)) < 1e-10

    called = stolr.KernelPCA(n_components=4, kernel=_rbf).fit(X)
    given = stolr.KernelPCA(n_components=4, kernel="precomputed").fit(K)
    np.testing.assert_array_equal(called.eigenvalues_, given.eigenvalues_)
    np.testing.assert_array_equal(called.transform(T), given.transform(K_test))
    ref = SkKernelPCA(n_components=4, kernel=_rbf, eigen_solver="dense").fit(X)
    assert _up_to_sign(called.transform(T), ref.transform(T)) < 1e-8


def test_an_indefinite_gram_matrix_is_solved_by_least_squares_as_scikit_learn_does():
    X, T, Y = _hostile(seed=8)
    K = X @ X.T - 30.0  # indefinite, and so is K + alpha I
    K_test = T @ X.T - 30.0
    with pytest.warns(UserWarning, match="least squares"):
        ours = stolr.KernelRidge(kernel="precomputed", alpha=0.5, fit_intercept=False).fit(K, Y)
    with pytest.warns(UserWarning):
        ref = SkKernelRidge(kernel="precomputed", alpha=0.5).fit(K, Y)
    assert _rel(ours.predict(K_test), ref.predict(K_test)) < 1e-8


def test_pairwise_tag_and_pickling():
    X, T, Y = _hostile(seed=6)
    K, K_test = rbf_kernel(X, gamma=GAMMA), rbf_kernel(T, X, gamma=GAMMA)
    for est in [stolr.KernelRidge(kernel="precomputed"), stolr.KernelPCA(kernel="precomputed")]:
        tags = est.__sklearn_tags__()
        assert tags.input_tags.pairwise and not tags.input_tags.sparse
    for est in [stolr.KernelRidge(), stolr.KernelPCA(), stolr.KernelRidge(kernel=_rbf)]:
        assert not est.__sklearn_tags__().input_tags.pairwise
    krr = stolr.KernelRidge(kernel="precomputed").fit(K, Y)
    kpca = stolr.KernelPCA(n_components=3, kernel="precomputed", whiten=True).fit(K)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(krr)).predict(K_test), krr.predict(K_test))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(kpca)).transform(K_test), kpca.transform(K_test))


def test_hostile_gram_matrices_are_value_errors(tmp_path):
    X, T, Y = _hostile(seed=7)
    y = Y[:, 0]
    K, K_test = rbf_kernel(X, gamma=GAMMA), rbf_kernel(T, X, gamma=GAMMA)
    asymmetric = K.copy()
    asymmetric[3, 5] += 1e-6
    nan = K.copy()
    nan[4, 4] = np.nan
    for est, fit in [(stolr.KernelRidge(kernel="precomputed"), lambda e, k: e.fit(k, y)),
                     (stolr.KernelPCA(n_components=2, kernel="precomputed"), lambda e, k: e.fit(k))]:
        with pytest.raises(ValueError, match="square"):
            fit(est, K[:, :-1])
        with pytest.raises(ValueError, match="not symmetric"):
            fit(est, asymmetric)
        with pytest.raises(ValueError):
            fit(est, nan)
        fit(est, K)
        with pytest.raises(ValueError, match="features"):
            (est.predict if hasattr(est, "predict") else est.transform)(K_test[:, :-1])
        with pytest.raises(ValueError, match="cannot be saved"):
            est.save(tmp_path / "model.npz")
    for solver in ["nystrom", "slkl", "krr-subset", "uniform"]:
        with pytest.raises(ValueError, match=f"solver='{solver}'"):
            stolr.KernelRidge(kernel="precomputed", solver=solver).fit(K, y)
        with pytest.raises(ValueError, match=f"solver='{solver}'"):
            stolr.KernelRidge(kernel=_rbf, solver=solver).fit(X, y)
    for solver in ["nystrom", "skpca", "kha", "exact-matrix-free"]:
        with pytest.raises(ValueError, match=f"solver='{solver}'"):
            stolr.KernelPCA(kernel="precomputed", solver=solver).fit(K)
    with pytest.raises(ValueError, match="fit_inverse_transform"):
        stolr.KernelPCA(kernel="precomputed", fit_inverse_transform=True).fit(K)
    with pytest.raises(ValueError, match="must return a number"):
        stolr.KernelRidge(kernel=lambda a, b: a * b).fit(X, y)
    # A callable's NaN reaches the library's check (scikit-learn's input check sees only X).
    with pytest.raises(ValueError, match="must be finite"):
        stolr.KernelRidge(kernel=lambda a, b: np.nan if a[0] == X[3, 0] else _rbf(a, b)).fit(X, y)
    with pytest.raises(ValueError, match="must be finite"):
        stolr.KernelPCA(kernel=lambda a, b: np.inf if b[0] == X[5, 0] else _rbf(a, b)).fit(X)


def _checks_kernel(x, y):
    """The linear kernel as a callable, for scikit-learn's estimator checks."""
    return float(np.dot(x, y))


@parametrize_with_checks(estimators=[
    stolr.KernelRidge(kernel="precomputed"),
    stolr.KernelPCA(n_components=2, kernel="precomputed"),
    stolr.KernelRidge(kernel=_checks_kernel),
    stolr.KernelPCA(n_components=2, kernel=_checks_kernel),
])
def test_scikit_learn_estimator_checks_precomputed_and_callable(estimator, check):
    check(estimator)
