"""stolr.IncrementalKernelPCA: scikit-learn's estimator checks, partial_fit over any batches equal
to fit, memmap input, models shared with the CLI, agreement with scikit-learn's exact KernelPCA,
and bad input."""

import os
import pickle
import subprocess

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

import stolr

STOLR_BIN = os.environ.get("STOLR_BIN", os.path.join(os.path.dirname(__file__), "../../../target/release/stolr"))


@parametrize_with_checks(estimators=[
    stolr.IncrementalKernelPCA(n_components=2, n_landmarks=10),
    stolr.IncrementalKernelPCA(n_components=2, solver="rff", n_features=20),
])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def _hostile(n=400, d=5, seed=0):
    """Gaussian rows with an outlier (row 5), rows 10 and 11 duplicating row 3 and a constant
    last column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[5, :-1] = 8.0
    X[10] = X[3]
    X[11] = X[3]
    X[:, -1] = 2.5
    return X


def _up_to_sign(a, b):
    s = np.sign(np.sum(a * b, axis=0))
    s[s == 0] = 1
    return np.max(np.abs(a * s - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("solver", ["nystrom", "rff"])
def test_partial_fit_over_any_batches_equals_fit(solver):
    X = _hostile(700)
    params = dict(n_components=4, solver=solver, n_landmarks=60, n_features=40, gamma=0.2, random_state=3)
    whole = stolr.IncrementalKernelPCA(**params).fit(X)
    Z = whole.transform(X)
    for batch_size in (1, 7, 256, 300, 10_000):
        other = stolr.IncrementalKernelPCA(batch_size=batch_size, **params).fit(X)
        assert np.array_equal(other.eigenvalues_, whole.eigenvalues_), batch_size
        assert np.array_equal(other.transform(X), Z), batch_size
    for sizes in ([13], [1, 255, 2], [700]):
        est = stolr.IncrementalKernelPCA(**params)
        start, i = 0, 0
        while start < len(X):
            size = sizes[i % len(sizes)]
            est.partial_fit(X[start:start + size])
            start, i = start + size, i + 1
        assert est.n_samples_seen_ == 700
        assert np.array_equal(est.eigenvalues_, whole.eigenvalues_), sizes
        assert np.array_equal(est.transform(X), Z), sizes
    # The centred training projections have mean 0 and ZᵀZ = diag(eigenvalues).
    assert np.allclose(Z.T @ Z, np.diag(whole.eigenvalues_), atol=1e-9 * whole.eigenvalues_[0])


def test_fit_reads_a_memmap_batch_by_batch(tmp_path):
    X = _hostile(900)
    np.save(tmp_path / "x.npy", X)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    params = dict(n_components=3, n_landmarks=100, gamma=0.3, batch_size=128)
    ref = stolr.IncrementalKernelPCA(**params).fit(X)
    est = stolr.IncrementalKernelPCA(**params).fit(mm)
    assert np.array_equal(est.eigenvalues_, ref.eigenvalues_)
    assert np.array_equal(est.transform(X), ref.transform(X))
    # float32 rows are read as the same values in float64, bit for bit.
    np.save(tmp_path / "x32.npy", X.astype(np.float32))
    mm32 = np.load(tmp_path / "x32.npy", mmap_mode="r")
    e32 = stolr.IncrementalKernelPCA(**params).fit(mm32)
    e64 = stolr.IncrementalKernelPCA(**params).fit(X.astype(np.float32).astype(np.float64))
    assert np.array_equal(e32.eigenvalues_, e64.eigenvalues_)


@pytest.mark.skipif(not os.path.exists(STOLR_BIN), reason="the stolr binary is not built")
@pytest.mark.parametrize("solver", ["nystrom", "rff"])
def test_saved_model_transforms_the_same_in_the_cli(tmp_path, solver):
    X = _hostile(500)
    Y = np.random.default_rng(9).normal(size=(40, 5))
    est = stolr.IncrementalKernelPCA(n_components=3, solver=solver, n_landmarks=80, n_features=60,
                                     gamma=0.25, random_state=1).fit(X)
    est.save(tmp_path / "model.npz")
    np.save(tmp_path / "y.npy", Y)
    subprocess.run([STOLR_BIN, "transform", "--model", str(tmp_path / "model.npz"), "--input",
                    str(tmp_path / "y.npy"), "--format", "npy", "--out", str(tmp_path / "t")],
                   check=True, capture_output=True)
    cli = np.load(tmp_path / "t" / "projections.npy")
    assert cli.shape == (40, 3)
    assert np.allclose(cli, est.transform(Y), rtol=0, atol=1e-12 * np.max(np.abs(cli)))


@pytest.mark.skipif(not os.path.exists(STOLR_BIN), reason="the stolr binary is not built")
@pytest.mark.parametrize("solver", ["streaming-rff", "streaming-nystrom"])
def test_a_streamed_cli_model_transforms_the_same_in_python(tmp_path, solver):
    X = _hostile(600)
    Y = np.random.default_rng(10).normal(size=(30, 5))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    size = ["--features", "40"] if solver == "streaming-rff" else ["--landmarks", "60"]
    subprocess.run([STOLR_BIN, "kpca", "--input", str(tmp_path / "x.npy"), "--format", "npy", "--solver", solver,
                    *size, "--rank", "3", "--center", "--sigma", "1.5", "--out", str(tmp_path / "fit")],
                   check=True, capture_output=True)
    subprocess.run([STOLR_BIN, "transform", "--model", str(tmp_path / "fit"), "--input", str(tmp_path / "y.npy"),
                    "--format", "npy", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    cli = np.load(tmp_path / "t" / "projections.npy")
    est = stolr.load(tmp_path / "fit")
    expected = stolr.IncrementalKernelPCA if solver == "streaming-rff" else stolr.KernelPCA
    assert isinstance(est, expected) and est.n_features_in_ == 5
    assert np.allclose(est.transform(Y), cli, rtol=0, atol=1e-12 * np.max(np.abs(cli)))
    assert np.array_equal(est.eigenvalues_, np.load(tmp_path / "fit" / "eigenvalues.npy"))
    if solver == "streaming-rff":
        assert est.get_params()["solver"] == "rff" and est.get_params()["n_components"] == 3
        with pytest.raises(ValueError):
            est.transform(Y[:, :4])


def _captured_share(Z, Kc, top):
    """The share of the exact top-k variance captured by span(Z): tr(QᵀKcQ) / Σ top."""
    Q, _ = np.linalg.qr(Z)
    return np.trace(Q.T @ Kc @ Q) / np.sum(top)


@pytest.mark.parametrize("solver,size,floor", [("nystrom", 200, 0.999), ("rff", 1000, 0.95)])
def test_against_scikit_learn_exact_kernel_pca(solver, size, floor):
    X = _hostile(400)
    gamma, k = 0.1, 5
    ref = SkKernelPCA(n_components=k, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(X)
    K = rbf_kernel(X, gamma=gamma)
    H = np.eye(400) - 1.0 / 400
    Kc = H @ K @ H
    est = stolr.IncrementalKernelPCA(n_components=k, solver=solver, n_landmarks=size, n_features=size,
                                     gamma=gamma, random_state=0).fit(X)
    share = _captured_share(est.transform(X), Kc, ref.eigenvalues_)
    assert share >= floor, share
    if solver == "nystrom":
        # The Nyström matrix is below the kernel matrix: so are its eigenvalues (Weyl).
        assert np.all(est.eigenvalues_ <= ref.eigenvalues_ * (1 + 1e-10))


def test_every_row_a_landmark_is_scikit_learn_exact_kernel_pca():
    X = _hostile(120)
    Y = np.random.default_rng(4).normal(size=(25, 5))
    ref = SkKernelPCA(n_components=4, kernel="rbf", gamma=0.3, eigen_solver="dense").fit(X)
    est = stolr.IncrementalKernelPCA(n_components=4, n_landmarks=120, gamma=0.3).fit(X)
    assert np.allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert _up_to_sign(est.transform(Y), ref.transform(Y)) < 1e-8


def test_hostile_input_gives_clear_errors():
    X = _hostile(200)
    est = stolr.IncrementalKernelPCA(n_components=2, n_landmarks=20)
    with pytest.raises(NotFittedError):
        est.transform(X)
    bad = X.copy()
    bad[17, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        stolr.IncrementalKernelPCA(n_components=2, n_landmarks=20).fit(bad)
    # A rejected batch changes nothing.
    est.partial_fit(X[:10])
    with pytest.raises(NotFittedError, match="landmarks"):
        est.transform(X)
    assert est.n_samples_seen_ == 10
    with pytest.raises(ValueError, match="finite"):
        est.partial_fit(bad[10:30])
    with pytest.raises(ValueError):
        est.partial_fit(X[10:30, :3])
    assert est.n_samples_seen_ == 10
    est.partial_fit(X[10:])
    clean = stolr.IncrementalKernelPCA(n_components=2, n_landmarks=20).fit(X)
    assert np.array_equal(est.transform(X), clean.transform(X))
    with pytest.raises(ValueError):
        est.transform(X[:, :3])
    with pytest.raises(ValueError):
        est.transform(bad)
    # Parameters.
    with pytest.raises(ValueError):
        stolr.IncrementalKernelPCA(n_components=30, n_landmarks=20).fit(X)
    with pytest.raises(ValueError):
        stolr.IncrementalKernelPCA(n_components=2, solver="rff", kernel="poly").fit(X)
    with pytest.raises(ValueError):
        stolr.IncrementalKernelPCA(n_components=2, solver="exact").fit(X)
    with pytest.raises(MemoryError):
        stolr.IncrementalKernelPCA(n_components=2, solver="rff", n_features=5000, memory_limit="10M").fit(X)
    # Constant rows: the centred kernel matrix is zero.
    with pytest.raises(ValueError, match="numerically zero"):
        stolr.IncrementalKernelPCA(n_components=2, n_landmarks=5).fit(np.ones((30, 3)))


@pytest.mark.parametrize("solver", ["nystrom", "rff"])
def test_pickled_estimator_transforms_and_continues_the_stream(solver):
    X = _hostile(700)
    params = dict(n_components=3, solver=solver, n_landmarks=60, n_features=50, random_state=5)
    whole = stolr.IncrementalKernelPCA(**params).fit(X)
    for cut in (30, 300, 512):
        est = stolr.IncrementalKernelPCA(**params).partial_fit(X[:cut])
        back = pickle.loads(pickle.dumps(est))
        if hasattr(est, "model_"):
            assert np.array_equal(back.transform(X), est.transform(X))
        back.partial_fit(X[cut:])
        assert back.n_samples_seen_ == 700
        assert np.array_equal(back.eigenvalues_, whole.eigenvalues_), cut
        assert np.array_equal(back.transform(X), whole.transform(X)), cut
    # The saved state is not a model.
    with pytest.raises(ValueError):
        stolr.IncrementalKernelPCA(**params).partial_fit(X[:5]).state_.restore(whole.model_)
