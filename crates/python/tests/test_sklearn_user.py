"""The estimators as a scikit-learn user tries them on held-out data (issue 23, Deliver 5):
ConvergenceWarning for unconverged iterative fits, StreamingPCA centred as IncrementalPCA,
PCA's n_components=None/float, whiten, singular_values_ and n_iter_, random_state generators,
feature names and pandas output, stolr.load's hyperparameters, verbose on sys.stderr, Ctrl-C."""

import io
import os
import signal
import sys
import threading
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA as SkPCA
from sklearn.decomposition import IncrementalPCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

import stolr


def _unscaled(seed=0, n=2000, d=50):
    """Correlated Gaussian rows whose columns are scaled from 1e-3 to 1e3."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) @ rng.normal(size=(d, d))) * np.logspace(-3, 3, d)


def _angles(ours, ref):
    """1 - |cos| between matching components (rows)."""
    return np.array([1 - abs(a @ b) for a, b in zip(ours, ref)])


@pytest.mark.parametrize("solver", ["svrg-bb", "vr-pca"])
def test_unconverged_pca_on_unscaled_data_warns(solver):
    X = _unscaled()
    ref = SkPCA(10).fit(X)
    with pytest.warns(ConvergenceWarning, match="not converged"):
        est = stolr.PCA(n_components=10, solver=solver, max_iter=3).fit(X)
    # The warning is deserved: some components are far from scikit-learn's.
    assert _angles(est.components_, ref.components_).max() > 1e-2
    assert est.n_iter_ == 3


def test_vr_pca_default_on_unscaled_data_warns():
    # VR-PCA's 10 default epochs leave components 8-10 1 %-97 % off on these columns.
    X = _unscaled()
    ref = SkPCA(10).fit(X)
    with pytest.warns(ConvergenceWarning):
        est = stolr.PCA(n_components=10, solver="vr-pca").fit(X)
    assert _angles(est.components_, ref.components_).max() > 1e-2


@pytest.mark.parametrize("solver", ["exact", "svrg-bb"])
def test_converged_pca_does_not_warn(solver):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 50)) @ rng.normal(size=(50, 50))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = stolr.PCA(n_components=10, solver=solver).fit(X)
    assert _angles(est.components_, SkPCA(10).fit(X).components_).max() < 1e-5
    assert (est.n_iter_ == 1) == (solver == "exact")


def test_kha_not_converged_is_a_convergence_warning():
    X = np.random.default_rng(1).normal(size=(300, 5))
    with pytest.warns(ConvergenceWarning, match="kha has not converged"):
        stolr.KernelPCA(n_components=3, solver="kha", n_iter=2).fit(X)


def _captured(components, X):
    """The share of the variance of X (centred on its own mean) in span(components)."""
    C = X - X.mean(axis=0)
    Q, _ = np.linalg.qr(np.asarray(components).T)
    return np.linalg.norm(C @ Q) ** 2 / np.linalg.norm(C) ** 2


def _offset_data():
    rng = np.random.default_rng(5)
    return rng.normal(size=(4000, 40)) @ (rng.normal(size=(40, 40)) * np.linspace(3, 0.1, 40)[:, None]) + 5.0


@pytest.mark.parametrize("dataset", ["digits", "offset"])
@pytest.mark.parametrize("k", [None, 5, 10])
def test_streaming_pca_default_matches_incremental_pca_on_held_out_rows(dataset, k):
    X = load_digits().data.astype(float) if dataset == "digits" else _offset_data()
    Xtr, Xte = train_test_split(X, test_size=0.3, random_state=0)
    ours = (stolr.StreamingPCA() if k is None else stolr.StreamingPCA(n_components=k)).fit(Xtr)
    ref = IncrementalPCA(n_components=ours.components_.shape[0]).fit(Xtr)
    assert _captured(ours.components_, Xte) >= (1 - 0.005) * _captured(ref.components_, Xte)
    # Centred as IncrementalPCA: the mean is the training rows'.
    assert np.allclose(ours.mean_, Xtr.mean(axis=0))
    assert np.allclose(ours.transform(Xte), (Xte - Xtr.mean(axis=0)) @ ours.components_.T)


def test_streaming_pca_partial_fit_centres_with_the_running_mean():
    X = _offset_data()
    Xtr, Xte = train_test_split(X, test_size=0.3, random_state=0)
    est = stolr.StreamingPCA(n_components=5)
    for batch in np.array_split(Xtr, 20):
        est.partial_fit(batch)
    assert np.allclose(est.mean_, Xtr.mean(axis=0))
    ref = IncrementalPCA(n_components=5).fit(Xtr)
    assert _captured(est.components_, Xte) >= (1 - 0.01) * _captured(ref.components_, Xte)
    # Without centring, the offset dominates the second moment: the first axis is the mean's.
    raw = stolr.StreamingPCA(n_components=1, center=False).fit(Xtr)
    mean_axis = Xtr.mean(axis=0) / np.linalg.norm(Xtr.mean(axis=0))
    assert abs(raw.components_[0] @ mean_axis) > 0.9


def test_streaming_pca_keeps_feature_names_through_fit_and_partial_fit():
    X = pd.DataFrame(np.random.default_rng(2).normal(size=(200, 4)), columns=["a", "b", "c", "d"])
    est = stolr.StreamingPCA(n_components=2).fit(X)
    assert list(est.feature_names_in_) == ["a", "b", "c", "d"]
    est = stolr.StreamingPCA(n_components=2)
    est.partial_fit(X.iloc[:100])
    est.partial_fit(X.iloc[100:])
    assert list(est.feature_names_in_) == ["a", "b", "c", "d"]
    assert list(est.get_feature_names_out()) == ["streamingpca0", "streamingpca1"]


def test_pca_n_components_none_and_float_as_scikit_learn():
    X = load_digits().data.astype(float)[:500]
    ours = stolr.PCA(n_components=None).fit(X)
    assert ours.n_components_ == min(X.shape)
    for share in (0.5, 0.9, 0.95):
        ours = stolr.PCA(n_components=share).fit(X)
        ref = SkPCA(n_components=share).fit(X)
        assert ours.n_components_ == ref.n_components_
        assert np.allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-10, atol=1e-14)
    for bad in (0.0, 1.0, 1.5, -1):
        with pytest.raises(ValueError):
            stolr.PCA(n_components=bad).fit(X)
    with pytest.raises(TypeError):
        stolr.PCA(n_components="all").fit(X)


def test_pca_whiten_singular_values_as_scikit_learn():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 6)) * [5, 3, 2, 1, 0.5, 0.1] + 2.0
    ours = stolr.PCA(n_components=4, whiten=True).fit(X)
    ref = SkPCA(n_components=4, whiten=True).fit(X)
    assert np.allclose(ours.singular_values_, ref.singular_values_, rtol=1e-10)
    Z, Zref = ours.transform(X), ref.transform(X)
    signs = np.sign(np.sum(Z * Zref, axis=0))
    assert np.allclose(Z * signs, Zref, atol=1e-9)
    assert np.allclose(Z.var(axis=0, ddof=1), 1.0)
    assert np.allclose(ours.inverse_transform(Z), ref.inverse_transform(Zref), atol=1e-9)


def test_streaming_pca_whiten_gives_unit_variance():
    X = np.random.default_rng(4).normal(size=(2000, 6)) * [5, 3, 2, 1, 0.5, 0.1]
    Z = stolr.StreamingPCA(n_components=2, whiten=True).fit(X).transform(X)
    assert np.allclose(Z.var(axis=0, ddof=1), 1.0, rtol=1e-6)


def test_random_state_takes_numpy_generators():
    X = _unscaled(1, n=300, d=8) / np.logspace(-3, 3, 8)
    seed = int(np.random.RandomState(5).randint(0, 2**63 - 1, dtype=np.int64))
    by_int = stolr.PCA(3, solver="svrg-bb", random_state=seed).fit(X)
    by_rs = stolr.PCA(3, solver="svrg-bb", random_state=np.random.RandomState(5)).fit(X)
    assert np.array_equal(by_int.components_, by_rs.components_)
    seed = int(np.random.default_rng(6).integers(0, 2**63 - 1, dtype=np.int64))
    by_int = stolr.StreamingPCA(2, solver="oja", random_state=seed).fit(X)
    by_gen = stolr.StreamingPCA(2, solver="oja", random_state=np.random.default_rng(6)).fit(X)
    assert np.array_equal(by_int.components_, by_gen.components_)
    for bad in ("seed", 1.5, True):
        with pytest.raises(ValueError, match="random_state"):
            stolr.PCA(2, solver="svrg-bb", random_state=bad).fit(X)


@pytest.mark.parametrize("make,prefix", [
    (lambda: stolr.PCA(n_components=2), "pca"),
    (lambda: stolr.KernelPCA(n_components=2), "kernelpca"),
    (lambda: stolr.StreamingPCA(n_components=2), "streamingpca"),
])
def test_pandas_output_and_feature_names(make, prefix):
    X = pd.DataFrame(np.random.default_rng(5).normal(size=(60, 3)), columns=["x", "y", "z"])
    est = make().set_output(transform="pandas").fit(X)
    assert list(est.feature_names_in_) == ["x", "y", "z"]
    assert list(est.get_feature_names_out()) == [f"{prefix}0", f"{prefix}1"]
    out = est.transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [f"{prefix}0", f"{prefix}1"]


def test_kernel_ridge_keeps_feature_names():
    X = pd.DataFrame(np.random.default_rng(6).normal(size=(60, 3)), columns=["x", "y", "z"])
    est = stolr.KernelRidge().fit(X, X["x"].to_numpy())
    assert list(est.feature_names_in_) == ["x", "y", "z"]


def test_load_restores_hyperparameters_and_fitted_attributes(tmp_path):
    X = np.random.default_rng(7).normal(size=(80, 5)) + 1.0
    pca = stolr.PCA(n_components=3, solver="svrg-bb").fit(X)
    pca.save(tmp_path / "pca.npz")
    back = stolr.load(tmp_path / "pca.npz")
    assert (back.n_components, back.solver, back.center) == (3, "svrg-bb", True)
    for attr in ("components_", "explained_variance_", "explained_variance_ratio_", "singular_values_", "mean_"):
        assert np.array_equal(getattr(back, attr), getattr(pca, attr)), attr
    assert back.n_samples_ == 80

    kpca = stolr.KernelPCA(n_components=2, kernel="poly", gamma=0.5, degree=2, coef0=2.0).fit(X)
    kpca.save(tmp_path / "kpca.npz")
    back = stolr.load(tmp_path / "kpca.npz")
    assert (back.kernel, back.degree, back.n_components, back.center) == ("poly", 2, 2, True)
    assert np.isclose(back.gamma, 0.5) and np.isclose(back.coef0, 2.0)
    assert np.array_equal(back.eigenvalues_, kpca.eigenvalues_)
    assert np.array_equal(back.transform(X), kpca.transform(X))
    # The restored hyperparameters refit the same model.
    assert np.allclose(stolr.KernelPCA(**back.get_params()).fit(X).eigenvalues_, kpca.eigenvalues_, rtol=1e-12)

    krr = stolr.KernelRidge(kernel="laplacian", gamma=0.3).fit(X, X[:, 0])
    krr.save(tmp_path / "krr.npz")
    back = stolr.load(tmp_path / "krr.npz")
    assert back.kernel == "laplacian" and np.isclose(back.gamma, 0.3) and back.fit_intercept
    assert back.n_features_in_ == 5
    assert np.array_equal(back.predict(X), krr.predict(X))


def test_verbose_goes_through_python_sys_stderr(monkeypatch):
    # What Jupyter shows is what reaches sys.stderr, not file descriptor 2.
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stderr", captured)
    X = np.random.default_rng(8).normal(size=(100_000, 50))
    stolr.StreamingPCA(n_components=10, verbose=True).fit(X)
    assert "stolr: iteration" in captured.getvalue()


class _Started(io.StringIO):
    """A ``sys.stderr`` that records when the fit's first progress line arrives: the fit is then
    inside the library, so a signal sent after it tests the library's response (a signal that
    lands in NumPy's validation before the fit would raise Python's own KeyboardInterrupt)."""

    def __init__(self):
        super().__init__()
        self.started = threading.Event()

    def write(self, text):
        if "stolr: iteration" in text:
            self.started.set()
        return super().write(text)


@pytest.mark.parametrize("fit", [
    # The streaming pass had no observer before: Ctrl-C ran to the end of the pass.
    lambda X: stolr.StreamingPCA(n_components=10, verbose=True).fit(np.tile(X, (20, 1))),
    lambda X: stolr.PCA(n_components=10, solver="vr-pca", max_iter=1000, verbose=True).fit(X),
])
def test_ctrl_c_raises_keyboard_interrupt(fit, monkeypatch):
    X = np.random.default_rng(9).normal(size=(20_000, 50))
    stderr = _Started()
    monkeypatch.setattr(sys, "stderr", stderr)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    finished = []

    def interrupt_once_started():
        if stderr.started.wait(timeout=60):
            os.kill(os.getpid(), signal.SIGINT)

    try:
        timer = threading.Thread(target=interrupt_once_started)
        timer.start()
        # "the fit was interrupted" is the fit's own exception: a SIGINT that arrives during a
        # fit that ignores it raises Python's plain KeyboardInterrupt after the fit returns.
        with pytest.raises(KeyboardInterrupt, match="the fit was interrupted"):
            fit(X)
            finished.append(True)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stderr.started.is_set() and not finished


def test_ctrl_c_stops_a_long_vr_pca_epoch():
    # One VR-PCA epoch reads n rows (about 5 s here on an idle machine); the observer sees only
    # whole epochs, so before the epoch polled the library's stop hook, Ctrl-C waited for it.
    import time

    X = np.random.default_rng(10).normal(size=(200_000, 50))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = []
    try:
        timer = threading.Timer(0.5, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
        timer.start()
        with pytest.raises(KeyboardInterrupt, match="the fit was interrupted"):
            stolr.PCA(n_components=10, solver="vr-pca", max_iter=1).fit(X)
        raised = time.monotonic()
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    # A generous bound: half an idle epoch.
    assert raised - sent[0] < 2.5


@pytest.mark.parametrize("fit", [
    lambda X: stolr.KernelRidge(solver="nystrom", n_landmarks=1500, gamma=0.05).fit(X, X[:, 0]),
    lambda X: stolr.KernelPCA(n_components=5, solver="nystrom", n_landmarks=1500, gamma=0.05).fit(X),
    # Dense factorizations (faer's, not pollable) run on a thread of their own that the call
    # leaves on Ctrl-C: the n × n kernel matrix's, and the m × m landmark kernel's.
    lambda X: stolr.KernelPCA(n_components=5, solver="exact-dense", gamma=0.05).fit(X[:7000]),
    # The default exact solver takes the matrix-free operator on these rows (20 features), which
    # stops between its block products.
    lambda X: stolr.KernelPCA(n_components=5, solver="exact", gamma=0.05).fit(X[:7000]),
    lambda X: stolr.KernelPCA(n_components=5, solver="nystrom", n_landmarks=4000, gamma=0.05).fit(X[:20000]),
])
def test_ctrl_c_stops_a_long_nystrom_pass(fit):
    # The Nyström passes over the n × M kernel panels (n·M² flops: several seconds here) had no
    # stop point: Ctrl-C waited for the whole pass. They now poll the stop hook between blocks.
    import time

    X = np.random.default_rng(11).normal(size=(300_000, 20))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = []
    try:
        timer = threading.Timer(0.5, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
        timer.start()
        with pytest.raises(KeyboardInterrupt, match="the fit was interrupted"):
            fit(X)
        raised = time.monotonic()
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    # A generous bound: the factorizations of the 1500 × 1500 matrices after the pass stops.
    assert raised - sent[0] < 2.5


def test_streaming_fit_far_from_eigenvectors_warns_and_the_default_does_not():
    Xtr, Xte = train_test_split(load_digits().data.astype(float), test_size=0.3, random_state=0)
    with pytest.warns(ConvergenceWarning, match="after one pass"):
        capped = stolr.StreamingPCA(n_components=10, solver="capped-msg", oversample=0).fit(Xtr)
    ref = IncrementalPCA(n_components=10).fit(Xtr)
    # The warning is deserved: a tenth of IncrementalPCA's held-out variance is missing.
    assert _captured(capped.components_, Xte) < 0.95 * _captured(ref.components_, Xte)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        stolr.StreamingPCA(n_components=10).fit(Xtr)
