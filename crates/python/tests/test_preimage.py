"""KernelPCA(fit_inverse_transform=True).inverse_transform against scikit-learn's, through
save/load, pickling and the CLI (`stolr inverse-transform`), and its refusals.

The eigenvectors' signs are arbitrary, but the pre-image map is not: the kernel of the embedding
only sees distances and inner products of its rows, which a sign flip of a column keeps. So
``dual_coef_`` and ``inverse_transform(transform(X))`` are compared as they are, and the embedding
``X_transformed_fit_`` and transform outputs after aligning column signs.
"""

import os
import pickle
import subprocess

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import NotFittedError

import stolr

STOLR_BIN = os.environ.get("STOLR_BIN", os.path.join(os.path.dirname(__file__), "../../../target/release/stolr"))


def _data(n=80, d=4, seed=3):
    """Rows with a constant column, duplicate rows and an outlier row; held-out rows apart."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 2.0, 0.5, 1.0][:d]
    X[:, 2] = 1.5  # a constant column
    X[7] = X[3]  # duplicate rows
    X[8] = X[3]
    X[11] = [9.0, -8.0, 1.5, 7.0][:d]  # an outlier row
    X_test = rng.normal(size=(15, d))
    X_test[:, 2] = 1.5
    return X, X_test


def _pair(kernel, gamma, alpha, n_components, **kw):
    ours = stolr.KernelPCA(n_components=n_components, kernel=kernel, gamma=gamma, solver="exact", center=True,
                           fit_inverse_transform=True, alpha=alpha, **kw)
    theirs = SkKernelPCA(n_components=n_components, kernel=_sk_kernel(kernel, gamma), gamma=gamma,
                         eigen_solver="dense", fit_inverse_transform=True, alpha=alpha, **kw)
    return ours, theirs


def _sk_kernel(kernel, gamma):
    """scikit-learn's KernelPCA names no Laplacian kernel: the same function as a callable."""
    if kernel == "laplacian":
        return lambda a, b: np.exp(-gamma * np.sum(np.abs(a - b)))  # called on pairs of rows
    return kernel


def _align(ours, theirs):
    """The column signs that turn ``theirs`` into ``ours`` (columns compared by their dot product)."""
    signs = np.sign(np.sum(ours * theirs, axis=0))
    signs[signs == 0] = 1.0
    return signs


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


@pytest.mark.parametrize("kernel,gamma,kw", [
    ("rbf", 0.3, {}),
    ("rbf", None, {}),  # gamma = 1 / n_features in both
    ("laplacian", 0.2, {}),
    ("poly", 0.1, {"degree": 2, "coef0": 1.0}),
])
def test_inverse_transform_matches_scikit_learn(kernel, gamma, kw):
    X, X_test = _data()
    alpha, r = 0.25, 5
    ours, theirs = _pair(kernel, gamma, alpha, r, **kw)
    ours.fit(X)
    theirs.fit(X)
    # The comparison means something only if the r-th eigenvalue is apart from the next
    # (otherwise the embedding's subspace itself is ambiguous).
    full = SkKernelPCA(n_components=r + 1, kernel=_sk_kernel(kernel, gamma), gamma=gamma, eigen_solver="dense",
                       **kw).fit(X)
    assert full.eigenvalues_[r - 1] - full.eigenvalues_[r] > 1e-3 * full.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)

    signs = _align(ours.X_transformed_fit_, theirs.X_transformed_fit_)
    assert _rel(ours.X_transformed_fit_, theirs.X_transformed_fit_ * signs) < 1e-8
    # The dual coefficients do not depend on the signs.
    assert ours.dual_coef_.shape == theirs.dual_coef_.shape == (X.shape[0], X.shape[1])
    assert _rel(ours.dual_coef_, theirs.dual_coef_) < 1e-8

    # Held-out rows: their projections (up to the signs) and their pre-images.
    z_ours, z_theirs = ours.transform(X_test), theirs.transform(X_test)
    assert _rel(z_ours, z_theirs * signs) < 1e-8
    back_ours = ours.inverse_transform(z_ours)
    back_theirs = theirs.inverse_transform(z_theirs)
    assert back_ours.shape == X_test.shape
    assert _rel(back_ours, back_theirs) < 1e-8
    # Arbitrary points of the embedding, given in scikit-learn's signs.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(6, r)) * np.std(theirs.X_transformed_fit_, axis=0)
    assert _rel(ours.inverse_transform(Z * signs), theirs.inverse_transform(Z)) < 1e-8
    # The training embedding itself (the ridge shrinks: not the training rows back).
    back_train = ours.inverse_transform(ours.X_transformed_fit_)
    assert _rel(back_train, theirs.inverse_transform(theirs.X_transformed_fit_)) < 1e-8


def test_save_load_and_pickle_keep_the_inverse_transform(tmp_path):
    X, X_test = _data()
    est = stolr.KernelPCA(n_components=4, gamma=0.3, fit_inverse_transform=True, alpha=0.5).fit(X)
    Z = est.transform(X_test)
    want = est.inverse_transform(Z)
    est.save(tmp_path / "model.npz")
    back = stolr.load(tmp_path / "model.npz")
    assert back.fit_inverse_transform is True and back.alpha == 0.5
    assert np.array_equal(back.dual_coef_, est.dual_coef_)
    assert np.array_equal(back.X_transformed_fit_, est.X_transformed_fit_)
    assert np.array_equal(back.inverse_transform(Z), want)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.inverse_transform(Z), want)


@pytest.mark.skipif(not os.path.exists(STOLR_BIN), reason="the stolr binary is not built")
def test_cli_inverse_transform_of_a_python_model(tmp_path):
    X, X_test = _data()
    est = stolr.KernelPCA(n_components=4, gamma=0.3, fit_inverse_transform=True, alpha=0.5).fit(X)
    fit = tmp_path / "fit"
    fit.mkdir()
    est.save(fit / "model.npz")
    Z = est.transform(X_test)
    np.save(tmp_path / "z.npy", Z)
    result = subprocess.run([STOLR_BIN, "inverse-transform", "--model", str(fit / "model.npz"), "--input",
                             str(tmp_path / "z.npy"), "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "out" / "preimages.npy"), est.inverse_transform(Z))
    # A model without the map: the CLI refuses, naming the option.
    plain = tmp_path / "plain"
    plain.mkdir()
    stolr.KernelPCA(n_components=4, gamma=0.3).fit(X).save(plain / "model.npz")
    result = subprocess.run([STOLR_BIN, "inverse-transform", "--model", str(plain), "--input",
                             str(tmp_path / "z.npy"), "--out", str(tmp_path / "out2")], capture_output=True, text=True)
    assert result.returncode != 0 and "--fit-inverse-transform" in result.stderr, result.stderr


def test_hostile_inverse_transforms_are_refused():
    X, X_test = _data()
    plain = stolr.KernelPCA(n_components=3, gamma=0.3).fit(X)
    assert not hasattr(plain, "dual_coef_")
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        plain.inverse_transform(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        stolr.KernelPCA(fit_inverse_transform=True).inverse_transform(np.zeros((2, 3)))
    est = stolr.KernelPCA(n_components=3, gamma=0.3, fit_inverse_transform=True).fit(X)
    with pytest.raises(ValueError, match="expected 3, found 4"):
        est.inverse_transform(np.zeros((2, 4)))
    bad = np.zeros((2, 3))
    bad[1, 1] = np.nan
    with pytest.raises(ValueError):
        est.inverse_transform(bad)
    with pytest.raises(ValueError):
        est.inverse_transform(np.zeros(3))
    for alpha in [0.0, -1.0, np.nan, np.inf]:
        with pytest.raises(ValueError, match="alpha"):
            stolr.KernelPCA(n_components=3, gamma=0.3, fit_inverse_transform=True, alpha=alpha).fit(X)
    with pytest.raises(ValueError, match="no inverse transform"):
        stolr.KernelPCA(n_components=3, gamma=0.3, solver="nystrom", n_landmarks=30,
                        fit_inverse_transform=True).fit(X)
    # The eigenproblem fits in 100 KB (8·80² = 51 KB), the map's n × n solve does not.
    assert stolr.KernelPCA(n_components=3, gamma=0.3, memory_limit=100_000).fit(X).eigenvalues_.shape == (3,)
    with pytest.raises(MemoryError):
        stolr.KernelPCA(n_components=3, gamma=0.3, memory_limit=100_000, fit_inverse_transform=True).fit(X)
    # Refitting without the map drops the attributes of the previous fit.
    est.set_params(fit_inverse_transform=False).fit(X)
    assert not hasattr(est, "dual_coef_")
    with pytest.raises(NotFittedError):
        est.inverse_transform(np.zeros((2, 3)))
