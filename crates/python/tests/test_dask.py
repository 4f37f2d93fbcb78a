"""The estimators on a row-chunked dask.array.Array (stolr/_dask.py): the fit equals the in-memory
fit on X.compute() to 1e-10 relative (eigenvalues, eigenvectors, components, coefficients,
held-out transform/predict), on the default scheduler and on a 2-worker LocalCluster; the same
chunking gives the same bits; transform/predict return lazy Dask arrays; bad input is refused."""

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import stolr  # noqa: E402
from sklearn.metrics.pairwise import rbf_kernel  # noqa: E402

TOL = 1e-10


def rel(a, b):
    """The largest difference relative to the largest entry of the reference."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def data(n=301, d=6, seed=0):
    """Random rows with an outlier row, duplicate rows and a constant column, and held-out rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 2] = 0.5  # a constant column
    X[7] = X[3]  # duplicate rows
    X[100] = X[3]
    X[42] = 8.0  # an outlier row
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    T = rng.normal(size=(40, d))
    T[:, 2] = 0.5
    return X, y, T


@pytest.fixture(scope="module")
def client():
    """One 2-worker cluster for the module (worker processes, one thread each)."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """The default (threaded) scheduler, or the 2-worker cluster."""
    if request.param == "distributed":
        c = request.getfixturevalue("client")
        with dask.config.set(scheduler=c):
            yield request.param
    else:
        with dask.config.set(scheduler="threads"):
            yield request.param


def kpca(**kw):
    return stolr.KernelPCA(n_components=3, solver="nystrom", n_landmarks=60, gamma=0.2, random_state=5, **kw)


def test_import_does_not_import_dask():
    code = "import sys, stolr; sys.exit(1 if any(m.split('.')[0] == 'dask' for m in sys.modules) else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("center", [True, False])
def test_kernel_pca_nystrom_equals_in_memory(scheduler, center):
    X, _, T = data()
    Xd = da.from_array(X, chunks=(37, -1))  # uneven: 8 chunks of 37 and one of 5
    ref = kpca(center=center).fit(X)
    est = kpca(center=center).fit(Xd)
    assert rel(est.eigenvalues_, ref.eigenvalues_) < TOL
    vectors = est.eigenvectors_
    assert isinstance(vectors, da.Array) and vectors.chunks[0] == Xd.chunks[0]
    assert rel(vectors.compute(), ref.eigenvectors_) < TOL
    Z = est.transform(da.from_array(T, chunks=(13, -1)))
    assert isinstance(Z, da.Array) and Z.chunks[0] == (13, 13, 13, 1)
    assert rel(Z.compute(), ref.transform(T)) < TOL
    # The fitted model on NumPy rows, and the training rows' projections.
    assert rel(est.transform(T), ref.transform(T)) < TOL
    assert rel(est.transform(Xd).compute(), ref.transform(X)) < TOL


def test_pca_exact_equals_in_memory(scheduler):
    X, _, T = data()
    X = X.copy()
    X[:, 4] += 1e9  # an offset the two-pass means must see through
    T = T.copy()
    T[:, 4] += 1e9
    Xd = da.from_array(X, chunks=(37, -1))
    ref = stolr.PCA(n_components=3).fit(X)
    est = stolr.PCA(n_components=3).fit(Xd)
    assert rel(est.explained_variance_, ref.explained_variance_) < TOL
    assert rel(est.explained_variance_ratio_, ref.explained_variance_ratio_) < TOL
    assert rel(est.components_, ref.components_) < TOL
    assert rel(est.mean_, ref.mean_) < 1e-15
    Z = est.transform(da.from_array(T, chunks=(13, -1)))
    assert isinstance(Z, da.Array)
    assert rel(Z.compute(), ref.transform(T)) < TOL
    back = est.inverse_transform(Z)
    assert isinstance(back, da.Array)
    assert rel(back.compute(), ref.inverse_transform(ref.transform(T))) < TOL


def test_pca_offset_is_seen_through():
    """The centred Gram matrix at an offset of 1e9: the variance of a column is its spread."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 3)) + np.array([1e9, 0.0, -1e9])
    est = stolr.PCA(n_components=3).fit(da.from_array(X, chunks=(37, -1)))
    exact = np.sort(np.linalg.eigvalsh(np.cov((X - X.mean(axis=0)).T)))[::-1]
    assert rel(est.explained_variance_, exact) < 1e-6


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_kernel_ridge_nystrom_equals_in_memory(scheduler, fit_intercept):
    X, y, T = data()
    Xd = da.from_array(X, chunks=(37, -1))
    kw = dict(solver="nystrom", alpha=0.1, gamma=0.2, n_landmarks=50, random_state=2, fit_intercept=fit_intercept)
    ref = stolr.KernelRidge(**kw).fit(X, y)
    for targets in (y, da.from_array(y, chunks=37), da.from_array(y, chunks=50)):  # NumPy, same, other chunks
        est = stolr.KernelRidge(**kw).fit(Xd, targets)
        assert rel(est.dual_coef_, ref.dual_coef_) < TOL
        f = est.predict(da.from_array(T, chunks=(13, -1)))
        assert isinstance(f, da.Array) and f.ndim == 1
        assert rel(f.compute(), ref.predict(T)) < TOL


def test_same_chunking_same_bits(client):
    X, y, _ = data()
    Xd = da.from_array(X, chunks=(37, -1))
    with dask.config.set(scheduler=client), distributed.get_task_stream(client=client) as stream:
        a, b = kpca().fit(Xd), kpca().fit(Xd)
    # The chunk tasks ran on the workers (processes), on both of them.
    parts = [t for t in stream.data if "_nystrom_part" in str(t["key"])]
    assert len(parts) >= len(Xd.chunks[0]) and len({t["worker"] for t in stream.data}) == 2
    with dask.config.set(scheduler=client):
        assert a.model_ == b.model_ and np.array_equal(a.eigenvalues_, b.eigenvalues_)
        p, q = stolr.PCA(n_components=3).fit(Xd), stolr.PCA(n_components=3).fit(Xd)
        assert p.model_ == q.model_
        kw = dict(solver="nystrom", alpha=0.1, n_landmarks=30, random_state=1)
        assert stolr.KernelRidge(**kw).fit(Xd, y).model_ == stolr.KernelRidge(**kw).fit(Xd, y).model_
    with dask.config.set(scheduler="threads"):  # the scheduler does not change the bits
        assert kpca().fit(Xd).model_ == a.model_


def test_columns_split_and_float32_and_landmarks():
    X, y, T = data()
    with dask.config.set(scheduler="threads"):
        # Chunks along the columns are rechunked (a chunk task needs whole rows).
        est = kpca().fit(da.from_array(X, chunks=(37, 2)))
        assert rel(est.eigenvalues_, kpca().fit(X).eigenvalues_) < TOL
        # Many small chunks (101 of 3 rows): the chain of additions in the graph.
        Xm = da.from_array(X, chunks=(3, -1))
        assert rel(kpca().fit(Xm).eigenvalues_, kpca().fit(X).eigenvalues_) < TOL
        kw = dict(solver="nystrom", n_landmarks=30, random_state=1)
        assert rel(stolr.KernelRidge(**kw).fit(Xm, y).predict(T), stolr.KernelRidge(**kw).fit(X, y).predict(T)) < TOL
        # Empty chunks (as after a filter) hold no rows and change nothing.
        Xe = da.from_array(X, chunks=((0, 150, 0, 151), (6,)))
        assert rel(kpca().fit(Xe).transform(T), kpca().fit(X).transform(T)) < TOL
        assert rel(stolr.PCA(n_components=3).fit(Xe).components_, stolr.PCA(n_components=3).fit(X).components_) < TOL
        # float32 chunks: the in-memory float32 fit (exact widening).
        X32 = X.astype(np.float32)
        assert rel(kpca().fit(da.from_array(X32, chunks=(37, -1))).transform(T), kpca().fit(X32).transform(T)) < TOL
        # Given landmark indices, and n_landmarks above n (at most one per row, as in memory).
        idx = np.array([5, 42, 3, 200, 17, 250, 99, 1])
        a, b = kpca(landmarks=idx).fit(da.from_array(X, chunks=(37, -1))), kpca(landmarks=idx).fit(X)
        assert rel(a.transform(T), b.transform(T)) < TOL
        big = dict(solver="nystrom", n_landmarks=10_000, random_state=0)
        Xs, ys = X[:50], y[:50]
        assert rel(stolr.KernelRidge(**big).fit(da.from_array(Xs, chunks=(7, -1)), ys).predict(T),
                   stolr.KernelRidge(**big).fit(Xs, ys).predict(T)) < 1e-8


def test_hostile_inputs():
    X, y, _ = data()
    with dask.config.set(scheduler="threads"):
        for bad in (np.nan, np.inf):
            Xb = X.copy()
            Xb[290, 1] = bad  # in the last full chunk, never a landmark of these seeds
            Xd = da.from_array(Xb, chunks=(37, -1))
            for fit in (lambda: kpca().fit(Xd), lambda: stolr.PCA(n_components=2).fit(Xd),
                        lambda: stolr.PCA(n_components=2, center=False).fit(Xd),
                        lambda: stolr.KernelRidge(solver="nystrom", n_landmarks=20).fit(Xd, y)):
                with pytest.raises(ValueError, match="finite|NaN|nan|inf"):
                    fit()
        yb = y.copy()
        yb[3] = np.nan
        with pytest.raises(ValueError):
            stolr.KernelRidge(solver="nystrom", n_landmarks=20).fit(da.from_array(X, chunks=(37, -1)), yb)
        Xd = da.from_array(X, chunks=(37, -1))
        with pytest.raises(ValueError, match="sample"):
            kpca().fit(da.zeros((0, 4), chunks=(10, 4)))
        with pytest.raises(ValueError, match="inconsistent"):
            stolr.KernelRidge(solver="nystrom").fit(Xd, y[:-1])
        with pytest.raises(ValueError, match="inconsistent"):
            stolr.KernelRidge(solver="nystrom").fit(Xd, da.from_array(y[:-1], chunks=37))
        with pytest.raises(ValueError, match="1-D"):
            stolr.KernelRidge(solver="nystrom").fit(Xd, np.c_[y, y])
        with pytest.raises(ValueError, match="2-D"):
            kpca().fit(da.from_array(y, chunks=37))
        with pytest.raises(ValueError, match="landmark|index|range"):
            kpca(landmarks=np.array([1, 2, 10_000])).fit(Xd)
        with pytest.raises(ValueError, match="rank|landmarks"):
            stolr.KernelPCA(n_components=5, solver="nystrom", landmarks=np.array([1, 2, 3])).fit(Xd)
        # Unsupported solvers and options: refused by name.
        for est, args in ((stolr.KernelPCA(solver="kha"), ()), (stolr.KernelPCA(solver="skpca"), ()),
                          (stolr.PCA(solver="svrg-bb"), ()), (stolr.PCA(n_components=0.9), ()),
                          (stolr.KernelRidge(solver="krr"), (y,)),
                          (stolr.KernelRidge(solver="nystrom"), (y, np.ones(len(y)))),
                          (kpca(fit_inverse_transform=True), ())):
            with pytest.raises(NotImplementedError, match="Dask array"):
                est.fit(Xd, *args)
        with pytest.raises(ValueError, match="direct"):
            stolr.KernelRidge(solver="nystrom", nystrom_solve="cg", n_landmarks=20).fit(Xd, y)
        fitted = kpca().fit(Xd)
        with pytest.raises(ValueError, match="features"):
            fitted.transform(da.from_array(X[:, :4], chunks=(37, -1)))
        sparse = pytest.importorskip("scipy.sparse")
        Xs = da.from_array(sparse.csr_matrix(X), chunks=(37, 6), asarray=False)
        with pytest.raises(TypeError, match="sparse"):
            kpca().fit(Xs)


def test_pickled_estimator_transforms_dask_arrays():
    import pickle
    X, _, T = data()
    with dask.config.set(scheduler="threads"):
        est = kpca().fit(da.from_array(X, chunks=(37, -1)))
        back = pickle.loads(pickle.dumps(est))
        assert back.model_ == est.model_
        Td = da.from_array(T, chunks=(13, -1))
        assert np.array_equal(back.transform(Td).compute(), est.transform(Td).compute())
        assert rel(back.transform(Td).compute(), est.transform(T)) < 1e-13


@pytest.mark.parametrize("solver", ["capped-msg", "msg", "incremental", "oja"])
def test_streaming_pca_streams_the_chunks_with_the_in_memory_bits(scheduler, solver):
    # One sequential pass over the chunks in order: the rows the in-memory fit reads, in the same
    # order, so the same bits for any chunking (uneven chunks, a one-row chunk, float32 chunks).
    X, _, T = data(n=301, d=6)
    X = X + 1e9 * (solver == "oja")  # an offset the mean pass sees through
    params = dict(n_components=2, solver=solver, center=True, random_state=4)
    one = stolr.StreamingPCA(**params).fit(X)
    for chunks in ((37, -1), ((1, 150, 150), (6,)), ((301,), (3, 3))):
        est = stolr.StreamingPCA(**params).fit(da.from_array(X, chunks=chunks))
        assert np.array_equal(est.components_, one.components_), (solver, chunks)
        assert np.array_equal(est.explained_variance_, one.explained_variance_)
        assert np.array_equal(est.mean_, one.mean_)
        assert est.n_samples_seen_ == one.n_samples_seen_ == 301
    Z = est.transform(da.from_array(T, chunks=(13, -1)))
    assert isinstance(Z, da.Array)
    assert rel(Z.compute(), one.transform(T)) <= TOL
    # float32 chunks are widened exactly, as in memory.
    X32 = X.astype(np.float32)
    one32 = stolr.StreamingPCA(**params).fit(X32)
    est32 = stolr.StreamingPCA(**params).fit(da.from_array(X32, chunks=(50, -1)))
    assert np.array_equal(est32.components_, one32.components_)
    # partial_fit continues the stream of a Dask fit as it continues an in-memory one.
    assert np.array_equal(est32.partial_fit(T).components_, one32.partial_fit(T).components_)


def test_streaming_pca_refuses_bad_chunks():
    X, _, _ = data()
    with dask.config.set(scheduler="threads"):
        for bad in (np.nan, -np.inf):
            Xb = X.copy()
            Xb[290, 4] = bad  # in the last chunk: found when the pass reaches it
            with pytest.raises(ValueError, match="NaN or infinity.*chunk 7"):
                stolr.StreamingPCA(n_components=2, solver="capped-msg").fit(da.from_array(Xb, chunks=(37, -1)))
        with pytest.raises(ValueError, match="n_components"):
            stolr.StreamingPCA(n_components=6).fit(da.from_array(X, chunks=(37, -1)))
        with pytest.raises(ValueError, match="sample"):
            stolr.StreamingPCA(n_components=1).fit(da.zeros((1, 4), chunks=(1, 4)))
        fitted = stolr.StreamingPCA(n_components=2).fit(da.from_array(X, chunks=(37, -1)))
        with pytest.raises(ValueError, match="features"):
            fitted.transform(da.from_array(X[:, :4], chunks=(37, -1)))


# ---- KernelPCA(solver="exact"): the matrix-free eigensolver on the client, products on the workers


def exact(**kw):
    return stolr.KernelPCA(n_components=4, solver="exact", gamma=0.2, **kw)


def aligned(vectors, reference):
    """``vectors`` with each column's sign flipped to agree with ``reference``'s."""
    signs = np.sign(np.sum(vectors * reference, axis=0))
    return vectors * signs


@pytest.mark.parametrize("chunks", [37, 150])
@pytest.mark.parametrize("center", [True, False])
def test_kernel_pca_exact_equals_in_memory(scheduler, center, chunks):
    X, _, T = data()
    Xd = da.from_array(X, chunks=(chunks, -1))
    ref = exact(center=center).fit(X)  # the dense kernel matrix and a block eigensolver
    est = exact(center=center).fit(Xd)
    assert rel(est.eigenvalues_, ref.eigenvalues_) < TOL
    vectors = est.eigenvectors_
    assert isinstance(vectors, da.Array) and vectors.chunks[0] == Xd.chunks[0]
    vectors = vectors.compute()
    # Both fits stop once every Ritz residual is at most 1e-10·λ1 (the solvers' tolerance), so
    # an eigenvector is accurate to about that residual over the gap to its nearest eigenvalue
    # (in the 2-norm): on these rows the smallest such gap among λ1..λ5 is 0.0085·λ1 uncentred,
    # about 1.2e-8 of error allowed. Each fit is held to that bound against NumPy's full
    # decomposition of the kernel matrix, and the two to twice it against each other.
    k = rbf_kernel(X, gamma=0.2)
    if center:
        k = k - k.mean(axis=0) - k.mean(axis=1)[:, None] + k.mean()
    w, v = np.linalg.eigh(k)
    w, v = w[::-1], v[:, ::-1][:, :4]
    bound = TOL / np.min(-np.diff(w[:5]) / w[0])
    error = lambda a, b: float(np.max(np.linalg.norm(aligned(a, b) - b, axis=0)))  # noqa: E731
    assert error(vectors, ref.eigenvectors_) < 2 * bound
    for fitted in (vectors, ref.eigenvectors_):
        assert error(fitted, v) < bound
    signs = np.sign(np.sum(vectors * ref.eigenvectors_, axis=0))
    Z = est.transform(da.from_array(T, chunks=(13, -1)))
    assert isinstance(Z, da.Array) and Z.chunks[0] == (13, 13, 13, 1)
    assert rel(Z.compute() * signs, ref.transform(T)) < TOL
    assert rel(est.transform(T) * signs, ref.transform(T)) < TOL
    assert rel(est.transform(Xd).compute() * signs, ref.transform(X)) < TOL


def test_kernel_pca_exact_one_chunk_is_the_in_memory_matrix_free_fit():
    """One chunk: every product is the in-memory operator's own, so the same bits."""
    X, _, _ = data()
    with dask.config.set(scheduler="threads"):
        est = exact().fit(da.from_array(X, chunks=(-1, -1)))
    ref = stolr.KernelPCA(n_components=4, solver="exact-matrix-free", gamma=0.2).fit(X)
    assert est.model_ == ref.model_ and np.array_equal(est.eigenvectors_.compute(), ref.eigenvectors_)


def test_kernel_pca_exact_same_chunking_same_bits(client):
    X, _, _ = data()
    Xd = da.from_array(X, chunks=(37, -1))
    with dask.config.set(scheduler=client), distributed.get_task_stream(client=client) as stream:
        a, b = exact().fit(Xd), exact().fit(Xd)
    products = [t for t in stream.data if "_kernel_rows" in str(t["key"])]
    assert len(products) >= 2 * len(Xd.chunks[0]) and len({t["worker"] for t in products}) == 2
    assert a.model_ == b.model_ and np.array_equal(a.eigenvalues_, b.eigenvalues_)
    with dask.config.set(scheduler="threads"):  # the scheduler does not change the bits
        c = exact().fit(Xd)
    assert c.model_ == a.model_ and np.array_equal(c.eigenvectors_.compute(), a.eigenvectors_.compute())


def test_kernel_pca_exact_hostile_inputs():
    X, _, _ = data()
    with dask.config.set(scheduler="threads"):
        for bad in (np.nan, np.inf):
            Xb = X.copy()
            Xb[290, 1] = bad  # in one chunk only
            with pytest.raises(ValueError, match="finite|NaN|nan|inf"):
                exact().fit(da.from_array(Xb, chunks=(37, -1)))
        Xd = da.from_array(X[:20], chunks=(7, -1))
        with pytest.raises(ValueError, match="rank|n_components"):
            stolr.KernelPCA(n_components=21, solver="exact").fit(Xd)
        with pytest.raises(ValueError, match="landmarks"):
            exact(landmarks=np.array([1, 2, 3])).fit(Xd)
        # Constant rows: the centred kernel matrix is zero, refused as in memory.
        with pytest.raises(ValueError, match="numerically zero"):
            exact().fit(da.ones((30, 3), chunks=(8, 3)))
        with pytest.raises(NotImplementedError, match="nystrom.*mpirun stolr kpca --solver skpca"):
            stolr.KernelPCA(solver="skpca", n_components=2).fit(Xd)
