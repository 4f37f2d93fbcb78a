"""Hostile input for every estimator: data with an outlier row, duplicate rows and a constant
column, at scales from 1e-8 to 1e8 and with an offset of 1e9, against scikit-learn or NumPy with
kernels formed from direct differences (never the ‖x‖² + ‖y‖² − 2xᵀy expansion, which cancels on
such data). Also the errors users meet: every one a ValueError, TypeError or MemoryError."""

import pickle

import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

import stolr


def _hostile(seed, n=120, d=4, scale=1.0, outlier=1e10, offset=0.0):
    """`(n, d)` normal rows times `scale`, plus `offset`: column 2 constant, rows 5–7 equal, the
    last row `outlier · scale` away from the others (no outlier when `outlier` is None)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 2] = 3.0
    X[6] = X[5]
    X[7] = X[5]
    if outlier is not None:
        X[-1] = outlier * np.abs(rng.normal(size=d))
    return X * scale + offset


def _direct_sq_distances(X, Y):
    """Squared distances by differences: exact up to the rounding of each difference and sum."""
    return ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)


def _up_to_sign(a, b):
    s = np.sign(np.sum(a * b, axis=0))
    s[s == 0] = 1
    return np.max(np.abs(a * s - b)) / np.max(np.abs(b))


CASES = [
    pytest.param(dict(scale=1.0, outlier=1e10), id="outlier-1e10"),
    pytest.param(dict(scale=1.0, outlier=1e20), id="outlier-1e20"),
    pytest.param(dict(scale=1e-8, outlier=1e10), id="scale-1e-8"),
    pytest.param(dict(scale=1e8, outlier=1e10), id="scale-1e8"),
    pytest.param(dict(scale=1.0, outlier=None, offset=1e9), id="offset-1e9"),
    pytest.param(dict(scale=1.0, outlier=30.0), id="outlier-30"),
]


@pytest.mark.parametrize("solver", ["exact", "exact-dense", "exact-matrix-free"])
@pytest.mark.parametrize("case", CASES)
def test_kernel_pca_on_hostile_data_matches_a_direct_difference_kernel(case, solver):
    X = _hostile(1, **case)
    Y = _hostile(2, n=15, **{**case, "outlier": None})
    gamma = 0.2 / case["scale"] ** 2
    ours = stolr.KernelPCA(n_components=4, gamma=gamma, solver=solver).fit(X)
    K = np.exp(-gamma * _direct_sq_distances(X, X))
    ref = SkKernelPCA(n_components=4, kernel="precomputed", eigen_solver="dense").fit(K)
    assert np.allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10, atol=1e-12 * ref.eigenvalues_[0])
    expected = ref.transform(np.exp(-gamma * _direct_sq_distances(Y, X)))
    assert _up_to_sign(ours.transform(Y), expected) < 1e-8
    assert np.all(np.isfinite(ours.transform(X)))


def test_forced_dense_kernel_pca_is_refused_over_the_memory_limit():
    # 300 rows: 703 KiB for the dense kernel matrix; forced, it is a MemoryError naming it, not a
    # switch to the matrix-free operator.
    X = _hostile(4, n=300)
    with pytest.raises(MemoryError, match=r"dense n × n kernel matrix \(n = 300\)"):
        stolr.KernelPCA(n_components=3, gamma=0.2, solver="exact-dense", memory_limit="600K").fit(X)
    free = stolr.KernelPCA(n_components=3, gamma=0.2, solver="exact-matrix-free").fit(X)
    dense = stolr.KernelPCA(n_components=3, gamma=0.2, solver="exact-dense").fit(X)
    assert np.allclose(free.eigenvalues_, dense.eigenvalues_, rtol=1e-9)


def test_matrix_free_kernel_pca_is_right_or_refused_at_every_memory_limit():
    # Hostile rows (an outlier, duplicates, a constant column). As the limit tightens, the
    # automatic Krylov block narrows (a smaller basis, more products) and the eigenpairs stay
    # scikit-learn's; below what the narrowest block needs, the fit is refused naming it.
    X = _hostile(8, n=2500)
    Y = _hostile(9, n=15, outlier=None)
    gamma = 0.2
    ref = SkKernelPCA(n_components=4, kernel="precomputed", eigen_solver="dense").fit(
        np.exp(-gamma * _direct_sq_distances(X, X)))
    expected = ref.transform(np.exp(-gamma * _direct_sq_distances(Y, X)))
    fitted = []
    for mib in range(16, 0, -1):  # the limit where it stops depends on the threads (tile buffers)
        params = dict(n_components=4, gamma=gamma, solver="exact-matrix-free", memory_limit=f"{mib}M")
        try:
            ours = stolr.KernelPCA(**params).fit(X)
        except MemoryError as e:
            assert "block = 4, " in str(e), str(e)
            break
        assert np.allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10), mib
        assert _up_to_sign(ours.transform(Y), expected) < 1e-8, mib
        fitted.append(mib)
    assert len(fitted) >= 2 and fitted[-1] > 1, fitted


@pytest.mark.parametrize("solver", ["nystrom", "skpca", "kha"])
def test_every_kernel_pca_solver_keeps_an_outlier_far_away(solver):
    # An outlier at 1e10 has kernel 0 with every other row: the other rows' spectrum is theirs.
    X = _hostile(3, outlier=1e10)
    params = dict(n_components=2, gamma=0.2, solver=solver, random_state=0)
    if solver == "nystrom":
        params["n_landmarks"] = X.shape[0]
    if solver == "skpca":
        params.update(n_iter=300)
    ours = stolr.KernelPCA(**params).fit(X)
    exact = stolr.KernelPCA(n_components=2, gamma=0.2).fit(X)
    assert np.all(np.isfinite(ours.eigenvalues_))
    if solver == "nystrom":  # every row a landmark: the exact kernel
        assert np.allclose(ours.eigenvalues_, exact.eigenvalues_, rtol=1e-8)
    else:
        assert np.allclose(ours.eigenvalues_, exact.eigenvalues_, rtol=0.2)


@pytest.mark.parametrize("case", CASES)
def test_kernel_ridge_on_hostile_data_matches_scikit_learn(case):
    X = _hostile(4, **case)
    rng = np.random.default_rng(5)
    y = np.sin(X[:, 0] / case["scale"]) + 0.1 * rng.normal(size=X.shape[0]) + 7.0
    gamma = 0.3 / case["scale"] ** 2
    K = np.exp(-gamma * _direct_sq_distances(X, X))
    # Without the intercept, scikit-learn's KernelRidge on the direct-difference kernel.
    ours = stolr.KernelRidge(alpha=0.5, gamma=gamma, fit_intercept=False).fit(X, y)
    ref = SkKernelRidge(alpha=0.5, kernel="precomputed").fit(K, y)
    assert np.allclose(ours.predict(X), ref.predict(K), rtol=1e-8, atol=1e-8)
    # With it, the bordered system [[K + αI, 1], [1ᵀ, 0]] [c; b] = [y; 0].
    n = X.shape[0]
    A = np.block([[K + 0.5 * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    sol = np.linalg.solve(A, np.append(y, 0.0))
    ours = stolr.KernelRidge(alpha=0.5, gamma=gamma).fit(X, y)
    assert np.allclose(ours.predict(X), K @ sol[:n] + sol[n], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("case", CASES)
def test_pca_on_hostile_data_matches_scikit_learn(case):
    X = _hostile(6, **case)
    ours = stolr.PCA(n_components=3).fit(X)
    ref = SkPCA(n_components=3, svd_solver="full").fit(X)
    top = ref.explained_variance_[0]
    # The covariance is accurate to rounding relative to its largest eigenvalue.
    assert np.allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-9, atol=1e-9 * top)
    assert np.abs(np.abs(ours.components_[0] @ ref.components_[0]) - 1) < 1e-9
    assert np.all(np.isfinite(ours.transform(X)))


@pytest.mark.parametrize("solver", ["incremental", "capped-msg", "oja", "msg"])
def test_streaming_pca_on_hostile_data_finds_the_dominant_axis(solver):
    # Uncentred second moment: with a 1e3 outlier row, its direction is the top axis.
    X = _hostile(7, n=600, outlier=1e3)
    est = stolr.StreamingPCA(n_components=1, solver=solver, random_state=0).fit(X)
    w, V = np.linalg.eigh(X.T @ X)
    assert np.all(np.isfinite(est.components_))
    # Oja's rule, [MSG]'s slowest baseline, is still turning after one pass of 600 rows.
    assert abs(est.components_[0] @ V[:, -1]) > (0.85 if solver == "oja" else 0.99)


def test_streaming_pca_pickles_with_its_state():
    X = np.random.default_rng(8).normal(size=(100, 5)) * [3, 2, 1, 0.5, 0.1]
    a = stolr.StreamingPCA(n_components=2, random_state=0)
    a.partial_fit(X[:50])
    b = pickle.loads(pickle.dumps(a))
    assert b.n_samples_seen_ == 50
    a.partial_fit(X[50:])
    b.partial_fit(X[50:])
    assert b.n_samples_seen_ == 100
    assert np.array_equal(a.components_, b.components_)
    assert np.array_equal(a.transform(X), b.transform(X))


@pytest.mark.parametrize("solver", ["capped-msg", "msg", "incremental", "oja"])
def test_every_streaming_solver_resumes_after_pickle(solver):
    X = np.random.default_rng(9).normal(size=(80, 4)) * [3, 2, 1, 0.5]
    a = stolr.StreamingPCA(n_components=2, solver=solver, random_state=0).partial_fit(X[:40])
    b = pickle.loads(pickle.dumps(a))
    assert np.array_equal(a.partial_fit(X[40:]).components_, b.partial_fit(X[40:]).components_)


def test_damaged_pickled_state_is_a_value_error():
    a = stolr.StreamingPCA(n_components=1, random_state=0).partial_fit(np.eye(4) + 1)
    state = a.__getstate__()
    state["state_"] = state["state_"][:-40]
    b = stolr.StreamingPCA.__new__(stolr.StreamingPCA)
    with pytest.raises(ValueError):
        b.__setstate__(state)


@pytest.mark.parametrize("make,X,exc,match", [
    (lambda: stolr.StreamingPCA(n_components=1, batch_size=-3), np.eye(4), ValueError, "batch_size"),
    (lambda: stolr.StreamingPCA(n_components=1, batch_size=2.5), np.eye(4), ValueError, "batch_size"),
    (lambda: stolr.StreamingPCA(n_components="2"), np.eye(4), TypeError, "n_components"),
    (lambda: stolr.KernelPCA(n_components=2, n_iter=0, solver="kha"), np.eye(4), ValueError, "n_iter"),
    (lambda: stolr.KernelPCA(n_components=2, n_features=1.5, solver="skpca", tau=1.0), np.eye(4), TypeError,
     "n_features"),
    (lambda: stolr.KernelRidge(solver="nystrom", n_landmarks=-1), np.eye(4), ValueError, "n_landmarks"),
])
def test_bad_parameters_are_typed_errors(make, X, exc, match):
    with pytest.raises(exc, match=match):
        est = make()
        if isinstance(est, stolr.KernelRidge):
            est.fit(X, np.arange(X.shape[0], dtype=float))
        else:
            est.fit(X)


@pytest.mark.parametrize("solver", ["exact", "svrg-bb", "vr-pca"])
@pytest.mark.parametrize("n_components", [2, 0.9])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pca_refuses_non_finite_rows_naming_the_entry(solver, n_components, dtype):
    # PCA.fit leaves the finite check to the library (one pass, not two): the error must still
    # be a ValueError naming the first bad entry in column order, and nothing is fitted. The
    # rows are hostile otherwise (outlier, duplicates, constant column).
    X = _hostile(12, n=200, d=5).astype(dtype)
    for value, word in [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "-inf")]:
        bad = X.copy()
        bad[150, 3] = value
        bad[40, 4] = value
        est = stolr.PCA(n_components=n_components, solver=solver, random_state=0)
        with pytest.raises(ValueError, match=f"row 150, column 3 is {word}: data must be finite"):
            est.fit(bad)
        assert not hasattr(est, "components_")


def test_pca_rank_error_names_the_binding_dimension():
    X = np.random.default_rng(10).normal(size=(200, 5))
    with pytest.raises(ValueError, match="number of features d = 5"):
        stolr.PCA(n_components=6).fit(X)


def test_huge_sizes_are_refused_not_run():
    X = np.random.default_rng(11).normal(size=(50, 3))
    with pytest.raises((MemoryError, ValueError)):
        stolr.KernelPCA(n_components=2, solver="skpca", tau=1.0, n_features=10**9).fit(X)
    with pytest.raises((MemoryError, ValueError)):
        stolr.KernelPCA(n_components=2, solver="skpca", tau=1.0, n_iter=10**12).fit(X)


def test_nystrom_defaults_adapt_to_small_n_as_kernel_ridge_does():
    X = np.random.default_rng(12).normal(size=(60, 3))
    kp = stolr.KernelPCA(n_components=2, solver="nystrom").fit(X)  # default 500 landmarks > n
    kr = stolr.KernelRidge(solver="nystrom").fit(X, X[:, 0])  # default 200 landmarks > n
    assert np.all(np.isfinite(kp.transform(X))) and np.all(np.isfinite(kr.predict(X)))


def test_loading_a_checkpoint_is_a_value_error(tmp_path):
    a = stolr.StreamingPCA(n_components=1, random_state=0).partial_fit(np.eye(4) + 1)
    path = tmp_path / "state.npz"
    path.write_bytes(a.state_.to_bytes())
    with pytest.raises(ValueError, match="not a fitted model"):
        stolr.load(path)
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ValueError):
        stolr.load(tmp_path / "junk.npz")


def test_exact_pca_with_more_rows_than_its_shift_samples_matches_scikit_learn():
    # d = 600: the one-pass exact fit centres by a shift read off 218 rows spread over the 700.
    # Sorted rows (the first 250 sit 50 above the rest in half the columns), an outlier row,
    # duplicated rows, a column at 1e9 and a constant column of 0.1.
    rng = np.random.default_rng(5)
    X = rng.standard_normal((700, 600))
    X[:250, ::2] += 50.0
    X[:, 1] += 1e9
    X[:, 3] = 0.1
    X[3, 5] = 1e5
    X[20:40] = X[7]
    # scikit-learn's svd_solver="covariance_eigh" is not the reference here: it forms the
    # covariance without centring the rows first, and the 1e9 column costs it the third
    # eigenvalue (1875 against 18.63); "full" and NumPy on the centred rows agree.
    ours = stolr.PCA(n_components=3, solver="exact").fit(X)
    ref = SkPCA(n_components=3, svd_solver="full").fit(X)
    centred = X - X.mean(axis=0)
    dense = np.linalg.eigvalsh(centred.T @ centred / (X.shape[0] - 1))[::-1][:3]
    assert np.allclose(ours.explained_variance_, dense, rtol=1e-9)
    assert np.allclose(ours.mean_, ref.mean_, rtol=1e-14, atol=1e-12)
    assert np.allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-9)
    for a, b in zip(ours.components_, ref.components_):
        assert abs(abs(a @ b) - 1) < 1e-9


@pytest.mark.parametrize("solver", ["capped-msg", "msg"])
def test_msg_rows_in_blocks_equal_rows_one_at_a_time_on_hostile_rows(solver):
    # partial_fit on a batch (and fit) take MSG's rows in blocks of up to 16; partial_fit on one
    # row at a time cannot. Rows with an outlier, repeats and a constant column: the same
    # subspace to rounding, and fit the same bits as one partial_fit of all the rows
    # (center=False: a centred partial_fit centres each batch by the running mean).
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 12)) * np.linspace(3.0, 0.3, 12)
    X[:, 5] = 2.0
    X[17] *= 40.0
    X[40:44] = X[39]
    def make():
        return stolr.StreamingPCA(n_components=3, solver=solver, center=False, random_state=0)

    batch = make().partial_fit(X)
    single = make()
    for row in X:
        single.partial_fit(row[None, :])
    fitted = make().fit(X)

    def projector(est):
        return est.components_.T @ est.components_

    assert np.abs(projector(batch) - projector(single)).max() < 1e-9
    assert np.abs(projector(fitted) - projector(batch)).max() < 1e-12
    assert batch.n_samples_seen_ == single.n_samples_seen_ == 300
