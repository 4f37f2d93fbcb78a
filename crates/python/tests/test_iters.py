"""ConvergenceWarning from the iterative solves of KernelRidge and KernelPCA, their n_iter_,
and KernelPCA's whiten."""

import functools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import stolr
from stolr import _core


def _regression(n=300, d=5, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.randn(n)
    return X, y


def _no_convergence_warning(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return fit()


def test_nystrom_cg_stopped_at_max_iter_warns():
    X, y = _regression()
    est = stolr.KernelRidge(solver="nystrom", n_landmarks=60, alpha=1e-3, gamma=0.5, nystrom_solve="cg",
                            max_iter=2, tol=1e-14)
    with pytest.warns(ConvergenceWarning, match="conjugate gradients have not converged after 2 iterations"):
        est.fit(X, y)
    assert est.n_iter_ == 2
    # Several outputs go through the other entry point: the same warning.
    Y = np.column_stack([y, -y])
    with pytest.warns(ConvergenceWarning, match="not converged"):
        est.fit(X, Y)
    assert est.n_iter_ == 4  # summed over the two outputs
    with pytest.warns(ConvergenceWarning, match="not converged"):
        est.fit(X, y, sample_weight=np.ones(len(y)))


def test_converged_nystrom_cg_is_silent_and_equals_the_direct_solve():
    X, y = _regression()
    params = dict(solver="nystrom", n_landmarks=60, alpha=1e-3, gamma=0.5, random_state=3)
    cg = _no_convergence_warning(lambda: stolr.KernelRidge(nystrom_solve="cg", **params).fit(X, y))
    direct = _no_convergence_warning(lambda: stolr.KernelRidge(nystrom_solve="direct", **params).fit(X, y))
    assert 1 <= cg.n_iter_ < 200
    assert direct.n_iter_ == 1
    Xt, _ = _regression(n=50, seed=1)
    f, g = cg.predict(Xt), direct.predict(Xt)
    assert np.max(np.abs(f - g)) <= 1e-6 * np.max(np.abs(g))


def test_slkl_at_its_epoch_cap_warns_and_a_converged_one_does_not():
    X, y = _regression(n=200)
    capped = stolr.KernelRidge(solver="slkl", n_landmarks=40, gamma=0.5, nu=0.01, max_iter=1, tol=1e-12)
    with pytest.warns(ConvergenceWarning, match="slkl has not converged after 1 epochs"):
        capped.fit(X, y)
    assert capped.n_iter_ == 1
    full = _no_convergence_warning(
        lambda: stolr.KernelRidge(solver="slkl", n_landmarks=40, gamma=0.5, nu=0.01, max_iter=5000).fit(X, y))
    assert 1 < full.n_iter_ < 5000


def test_direct_kernel_ridge_is_silent_with_one_iteration():
    X, y = _regression(n=100)
    for solver in ("krr", "krr-subset", "uniform"):
        est = _no_convergence_warning(lambda: stolr.KernelRidge(solver=solver, n_landmarks=30).fit(X, y))
        assert est.n_iter_ == 1, solver


def test_bad_iteration_settings_are_errors():
    X, y = _regression(n=50)
    with pytest.raises(ValueError, match="max_iter"):
        stolr.KernelRidge(solver="nystrom", max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="tol"):
        stolr.KernelRidge(solver="nystrom", tol=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="nystrom_solve"):
        stolr.KernelRidge(solver="nystrom", nystrom_solve="lu").fit(X, y)


def test_kernel_pca_n_iter():
    X = np.random.RandomState(0).randn(80, 4)
    assert stolr.KernelPCA(n_components=3).fit(X).n_iter_ == 1
    assert stolr.KernelPCA(n_components=3, solver="nystrom", n_landmarks=20).fit(X).n_iter_ == 1
    assert stolr.KernelPCA(n_components=2, solver="skpca", tau=0.5, n_iter=37).fit(X).n_iter_ == 37
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # KHA's own residual test
        assert stolr.KernelPCA(n_components=2, solver="kha", n_iter=23).fit(X).n_iter_ == 23


def test_skpca_stopped_by_its_rank_cap_warns(monkeypatch):
    X = np.random.RandomState(0).randn(60, 4)
    # A tiny tau keeps many eigenvalues of the iterate: a rank cap of 2 is crossed at once.
    monkeypatch.setattr(_core, "fit_kernel_pca", functools.partial(_core.fit_kernel_pca, max_rank=2))
    est = stolr.KernelPCA(n_components=2, solver="skpca", tau=1e-6, n_iter=500)
    with pytest.warns(ConvergenceWarning, match="skpca has not converged after"):
        est.fit(X)
    assert est.n_iter_ < 500
    monkeypatch.undo()
    _no_convergence_warning(lambda: stolr.KernelPCA(n_components=2, solver="skpca", tau=1e-6, n_iter=50).fit(X))


def _kpca_pair(**params):
    X = np.random.RandomState(2).randn(70, 3)
    plain = stolr.KernelPCA(n_components=4, gamma=0.3, **params).fit(X)
    white = stolr.KernelPCA(n_components=4, gamma=0.3, whiten=True, **params).fit(X)
    return X, plain, white


def test_whiten_divides_the_projections_by_the_root_eigenvalues():
    X, plain, white = _kpca_pair()
    Xt = np.random.RandomState(5).randn(20, 3)
    np.testing.assert_allclose(white.transform(Xt), plain.transform(Xt) / np.sqrt(plain.eigenvalues_),
                               rtol=1e-12, atol=1e-14)
    # The whitened training projections are orthonormal columns (the eigenvectors): every
    # component has the same variance, 1 / n, where the plain ones have eigenvalues_ / n.
    Z = white.transform(X)
    np.testing.assert_allclose(Z.T @ Z, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(Z.var(axis=0), np.full(4, 1.0 / len(X)), rtol=1e-8)
    np.testing.assert_allclose(np.abs(Z), np.abs(white.eigenvectors_), atol=1e-10)
    # fit_transform goes through transform: whitened as well.
    np.testing.assert_allclose(white.fit_transform(X), Z, atol=1e-12)


def test_whiten_leaves_the_pre_image_unchanged():
    X, plain, white = _kpca_pair(fit_inverse_transform=True, alpha=0.1)
    Xt = np.random.RandomState(6).randn(15, 3)
    back_plain = plain.inverse_transform(plain.transform(Xt))
    back_white = white.inverse_transform(white.transform(Xt))
    np.testing.assert_allclose(back_white, back_plain, rtol=1e-10, atol=1e-12)
    # The map takes the embedding it was fitted on: whitened input is scaled back first.
    assert not np.allclose(white.inverse_transform(plain.transform(Xt)), back_plain, atol=1e-6)
