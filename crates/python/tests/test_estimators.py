"""The Python package against scikit-learn: its estimator checks, agreement with its KernelPCA,
PCA and KernelRidge, pipelines, pickling, models shared with the CLI, and bad input."""

import os
import pickle
import subprocess

import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import stolr


@parametrize_with_checks(estimators=[
    stolr.KernelPCA(n_components=2),
    stolr.KernelPCA(n_components=2, solver="nystrom", n_landmarks=10),
    stolr.PCA(n_components=1),
    stolr.PCA(n_components=1, solver="svrg-bb"),
    stolr.StreamingPCA(n_components=1),
    stolr.KernelRidge(),
    # 30 landmarks: with 10, no low-rank regressor of this family reaches scikit-learn's R² > 0.5
    # on its check data (neither SLKL nor Nyström KRR, intercept or not).
    stolr.KernelRidge(solver="slkl", n_landmarks=30),
    stolr.KernelRidge(solver="nystrom", n_landmarks=30),
], expected_failed_checks=lambda est: {
    # SLKL draws its landmarks over the rows and descends in a random order: repeated rows change
    # both, so integer weights are not repeated rows (each fit is still the weighted minimiser).
    "check_sample_weight_equivalence_on_dense_data": "landmarks are drawn over the rows",
    # The same on sparse rows, which SLKL takes as they are.
    "check_sample_weight_equivalence_on_sparse_data": "landmarks are drawn over the rows",
} if isinstance(est, stolr.KernelRidge) and est.solver == "slkl" else {})
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def _up_to_sign(a, b):
    s = np.sign(np.sum(a * b, axis=0))
    s[s == 0] = 1
    return np.max(np.abs(a * s - b)) / np.max(np.abs(b))


def test_kernel_pca_matches_scikit_learn():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(200, 4)), rng.normal(size=(30, 4))
    ours = stolr.KernelPCA(n_components=5, gamma=0.2).fit(X)
    ref = SkKernelPCA(n_components=5, kernel="rbf", gamma=0.2, eigen_solver="dense").fit(X)
    assert np.allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert _up_to_sign(ours.transform(Y), ref.transform(Y)) < 1e-8
    assert _up_to_sign(ours.eigenvectors_, ref.eigenvectors_) < 1e-8


@pytest.mark.parametrize("kernel,params", [("laplacian", {}), ("poly", {"degree": 2, "coef0": 1.0})])
def test_other_kernels_match_scikit_learn(kernel, params):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(120, 3))
    ours = stolr.KernelPCA(n_components=3, kernel=kernel, gamma=0.3, **params).fit(X)
    if kernel == "laplacian":  # scikit-learn's KernelPCA takes it as a precomputed kernel
        from sklearn.metrics.pairwise import laplacian_kernel

        ref = SkKernelPCA(n_components=3, kernel="precomputed", eigen_solver="dense").fit(laplacian_kernel(X, X, gamma=0.3))
        expected = ref.transform(laplacian_kernel(X[:10], X, gamma=0.3))
    else:
        ref = SkKernelPCA(n_components=3, kernel=kernel, gamma=0.3, eigen_solver="dense", **params).fit(X)
        expected = ref.transform(X[:10])
    assert np.allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert _up_to_sign(ours.transform(X[:10]), expected) < 1e-8


@pytest.mark.parametrize("kernel", ["linear", "cosine"])
def test_linear_and_cosine_kernels_match_scikit_learn(kernel):
    # An outlier row, duplicate rows, a constant column; for cosine also a zero row, which
    # scikit-learn's cosine_similarity leaves at 0 against every row.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 4))
    X[:, 3] = 2.0
    X[5] = X[2]
    X[6] = [30.0, -25.0, 40.0, 2.0]
    if kernel == "cosine":
        X[7] = 0.0
    Y = rng.normal(size=(12, 4)) * 1e3
    for center in (False, True):
        ours = stolr.KernelPCA(n_components=3, kernel=kernel, center=center).fit(X)
        ref = SkKernelPCA(n_components=3, kernel=kernel, eigen_solver="dense")
        if center:
            ref.fit(X)
            expected = ref.transform(Y)
        else:  # scikit-learn always centres: the uncentred kernel goes in precomputed
            from sklearn.metrics.pairwise import pairwise_kernels

            ref = SkKernelPCA(n_components=3, kernel="precomputed", eigen_solver="dense")
            K = pairwise_kernels(X, X, metric=kernel)
            # KernelPCA centres a precomputed kernel too; undo it by comparing eigenvalues of K itself.
            values = np.sort(np.linalg.eigvalsh(K))[::-1][:3]
            assert np.allclose(ours.eigenvalues_, values, rtol=1e-10)
            continue
        assert np.allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
        assert _up_to_sign(ours.transform(Y), expected) < 1e-8


@pytest.mark.parametrize("solver", ["exact", "svrg-bb", "vr-pca"])
def test_explained_variance_ratio_matches_scikit_learn(solver, tmp_path):
    # An outlier row, duplicate rows and a constant column.
    rng = np.random.default_rng(12)
    X = rng.normal(size=(300, 6)) * [5.0, 3.0, 2.0, 1.0, 0.5, 1.0]
    X[:, 5] = 7.0
    X[10] = X[3]
    X[11] = X[3]
    X[20] = [60.0, -40.0, 10.0, 5.0, 1.0, 7.0]
    ours = stolr.PCA(n_components=3, solver=solver, random_state=0).fit(X)
    ref = SkPCA(n_components=3, svd_solver="full").fit(X)
    tol = 1e-10 if solver == "exact" else 1e-4
    assert np.allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=tol)
    assert ours.explained_variance_ratio_.sum() <= 1.0 + 1e-12
    # A saved model keeps it.
    path = tmp_path / "pca.npz"
    ours.save(path)
    assert np.array_equal(stolr.load(str(path)).explained_variance_ratio_, ours.explained_variance_ratio_)


def test_stochastic_kernel_pca_is_close_to_exact():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(300, 3)) * [3, 1, 0.5], rng.normal(size=(20, 3))
    exact = stolr.KernelPCA(n_components=2, gamma=0.1).fit(X)
    tau = 0.5 * exact.eigenvalues_[1]
    skpca = stolr.KernelPCA(n_components=2, gamma=0.1, solver="skpca", tau=tau, n_iter=1500, random_state=1).fit(X)
    nystrom = stolr.KernelPCA(n_components=2, gamma=0.1, solver="nystrom", n_landmarks=150, random_state=1).fit(X)
    ref = exact.transform(Y)
    assert _up_to_sign(nystrom.transform(Y), ref) < 0.05
    assert _up_to_sign(skpca.transform(Y)[:, :1], ref[:, :1]) < 0.1


def test_pca_matches_scikit_learn_and_inverts():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 6)) @ np.diag([5, 3, 2, 1, 0.5, 0.1]) + 4
    ours = stolr.PCA(n_components=3).fit(X)
    ref = SkPCA(n_components=3).fit(X)
    assert np.allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-10)
    assert _up_to_sign(ours.transform(X), ref.transform(X)) < 1e-8
    full = stolr.PCA(n_components=6).fit(X)
    assert np.allclose(full.inverse_transform(full.transform(X)), X, atol=1e-10)


def test_streaming_pca_finds_the_top_subspace():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 5)) * [4, 2, 0.5, 0.3, 0.1]
    est = stolr.StreamingPCA(n_components=2, random_state=0)
    for batch in np.array_split(X, 40):
        est.partial_fit(batch)
    assert est.n_samples_seen_ == 4000
    v = est.components_
    assert np.linalg.norm(v[:, 2:]) < 0.1


def test_kernel_ridge_matches_scikit_learn():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    y = y + 5.0  # a mean the intercept has to carry
    # Without the intercept: scikit-learn's KernelRidge on the raw targets.
    ours = stolr.KernelRidge(alpha=0.5, gamma=0.3, fit_intercept=False).fit(X, y)
    ref = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, y)
    assert np.allclose(ours.predict(X), ref.predict(X), rtol=1e-9, atol=1e-12)
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-9)
    # With it (the default): b is an unpenalized model term, the bordered system
    # [[K + αI, 1], [1ᵀ, 0]] [c; b] = [y; 0] (not the centred targets plus their mean).
    ours = stolr.KernelRidge(alpha=0.5, gamma=0.3).fit(X, y)
    from sklearn.metrics.pairwise import rbf_kernel

    K, n = rbf_kernel(X, X, gamma=0.3), X.shape[0]
    A = np.block([[K + 0.5 * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    sol = np.linalg.solve(A, np.append(y, 0.0))
    assert np.allclose(ours.predict(X), K @ sol[:n] + sol[n], rtol=1e-9, atol=1e-12)
    centred_targets = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, y - y.mean())
    assert not np.allclose(ours.predict(X), centred_targets.predict(X) + y.mean(), rtol=1e-6)


def test_nystrom_kernel_ridge_equals_the_closed_form():
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(8)
    X = rng.normal(size=(400, 3))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2 + 2.0
    ours = stolr.KernelRidge(solver="nystrom", n_landmarks=40, alpha=0.3, gamma=0.4, random_state=1).fit(X, y)
    # The landmarks are rows of X: the centres in the model file are among them.
    import io

    centres = np.load(io.BytesIO(ours.model_))["centers"]
    assert centres.shape == (40, 3)
    idx = [int(np.flatnonzero(np.all(X == c, axis=1))[0]) for c in centres]
    knm, kmm = rbf_kernel(X, X[idx], gamma=0.4), rbf_kernel(X[idx], X[idx], gamma=0.4)
    # The centred system: columns of K_nM and the targets centred over the training rows,
    # b = ȳ − k̄ᵀα (the intercept as an unpenalized model term).
    kbar, yc = knm.mean(axis=0), y - y.mean()
    kc = knm - kbar
    alpha = np.linalg.solve(kc.T @ kc + 0.3 * kmm, kc.T @ yc)
    assert np.allclose(ours.predict(X), knm @ alpha + y.mean() - kbar @ alpha, rtol=1e-7, atol=1e-7)


def test_pipeline_with_grid_search():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    y = (np.linalg.norm(X, axis=1) > 1.5).astype(int)
    pipe = make_pipeline(StandardScaler(), stolr.KernelPCA(n_components=4), LogisticRegression())
    grid = GridSearchCV(pipe, {"kernelpca__gamma": [0.1, 0.5]}, cv=3).fit(X, y)
    assert grid.best_score_ > 0.8


def test_pickle_round_trip_and_save(tmp_path):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(50, 3))
    for est in [stolr.KernelPCA(n_components=2), stolr.PCA(n_components=2), stolr.StreamingPCA(n_components=2)]:
        est.fit(X)
        back = pickle.loads(pickle.dumps(est))
        assert np.array_equal(back.transform(X), est.transform(X))
        est.save(tmp_path / "m.npz")
        assert np.array_equal(stolr.load(tmp_path / "m.npz").transform(X), est.transform(X))


def test_cli_model_loads_in_python(tmp_path):
    stolr_bin = os.environ.get("STOLR_BIN", os.path.join(os.path.dirname(__file__), "../../../target/release/stolr"))
    if not os.path.exists(stolr_bin):
        pytest.skip("the stolr binary is not built")
    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 3))
    np.save(tmp_path / "x.npy", X)
    subprocess.run([stolr_bin, "pca", "--input", str(tmp_path / "x.npy"), "--format", "npy", "--solver", "exact",
                    "--rank", "2", "--center", "--out", str(tmp_path / "fit")], check=True, capture_output=True)
    subprocess.run([stolr_bin, "transform", "--model", str(tmp_path / "fit"), "--input", str(tmp_path / "x.npy"),
                    "--format", "npy", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    model = stolr.load(tmp_path / "fit")
    assert np.array_equal(model.transform(X), np.load(tmp_path / "t" / "projections.npy"))


@pytest.mark.parametrize("est", [stolr.KernelPCA(n_components=2), stolr.PCA(n_components=2)])
def test_bad_input_is_a_value_error(est):
    with pytest.raises(ValueError):
        est.fit(np.array([[1.0, np.nan], [2.0, 3.0], [4.0, 5.0]]))
    with pytest.raises(ValueError):
        est.fit(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError):
        est.fit(np.array([["a", "b"], ["c", "d"]]))
    est.fit(np.random.default_rng(0).normal(size=(10, 3)))
    with pytest.raises(ValueError):
        est.transform(np.zeros((2, 4)))
    with pytest.raises(ValueError):
        type(est)(n_components=2, solver="nope").fit(np.eye(3))


def test_default_parameters_pass_scikit_learn_checks():
    from sklearn.utils.estimator_checks import check_estimator

    for est in [stolr.KernelPCA(), stolr.PCA(), stolr.StreamingPCA(), stolr.KernelRidge()]:
        failed = [r for r in check_estimator(est, on_fail=None) if r["status"] == "failed"]
        assert not failed, [(r["check_name"], str(r["exception"])) for r in failed]


def test_unknown_kernel_is_an_error():
    with pytest.raises(ValueError):
        stolr.KernelRidge(kernel="poly").fit(np.eye(3), np.ones(3))


def test_memory_error_over_the_memory_limit():
    # Choosing tau for SKPCA decomposes the kernel matrix of a 2000-row subsample (about 96 MB):
    # over a 1 MB limit it is refused before any work, with the CLI's message.
    X = np.random.default_rng(0).normal(size=(2000, 3))
    with pytest.raises(MemoryError, match="memory limit of 1.00 MiB"):
        stolr.KernelPCA(n_components=2, solver="skpca", memory_limit="1M").fit(X)
    with pytest.raises(ValueError, match="cannot read the size"):
        stolr.KernelPCA(n_components=2, memory_limit="lots").fit(X)


def test_ctrl_c_interrupts_a_long_fit_promptly():
    import signal
    import threading
    import time

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        X = np.random.default_rng(8).normal(size=(3000, 10))
        timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
        start = time.time()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            stolr.KernelPCA(n_components=5, solver="skpca", tau=1.0, n_iter=1_000_000).fit(X)
        assert time.time() - start < 5.0
    finally:
        signal.signal(signal.SIGINT, previous)
