"""The estimators' ``fit``, ``transform`` and ``predict`` on a row-chunked ``dask.array.Array``.

``KernelPCA(solver="nystrom" or "exact")``, ``PCA(solver="exact")`` and ``KernelRidge(solver="nystrom")``
take a Dask array where they take a NumPy one: ``fit`` runs the library's own fit split where an
MPI run all-reduces (``_core.dask_*``, crates/python/src/dask.rs):

1. the client draws the landmark indices the in-memory fit draws for ``(n, m, random_state)``
   and computes those ``m`` rows (``X[idx]``);
2. every chunk's part (a Gram matrix of ``m`` or ``d`` columns, column sums, sign candidates)
   is computed in Rust by a task on the worker that holds the chunk; only that part (never a
   row) goes back to the client;
3. the parts are added in chunk order, left to right, by a chain of tasks in the graph (so a
   given chunking gives the same bits every time, and only the sum reaches the client), and the
   client solves the small eigenproblem or linear system.

The fitted estimator equals the in-memory fit on ``X.compute()`` with the same parameters to
rounding (about 1e-14 relative; the parts are added chunk by chunk instead of row block by
row block). ``transform`` and ``predict`` of a Dask array return a Dask array computed chunk by
chunk (``map_blocks``). Dask is imported only when a Dask array is given.

``KernelPCA(solver="exact")`` (and ``"exact-matrix-free"``) is the exception to step 2's "never
a row": its eigensolver runs on the client and each kernel product ``K V`` sends ``V`` ``(n, b)``
to the workers and brings its ``(n, b)`` rows back (:func:`_fit_exact_kpca`).

Everything else is refused with a ``NotImplementedError`` naming what runs on Dask arrays
(see docs/distributed.md, "Dask").
"""

import numpy as np

from . import _core

#: What runs on a Dask array, for the refusals' messages.
SUPPORTED = ('KernelPCA(solver="nystrom" or "exact"), PCA(solver="exact"), StreamingPCA (every solver, one pass over '
             'the chunks in order) and KernelRidge(solver="nystrom") (fit, transform, predict)')


def is_dask(X):
    """Whether ``X`` is a ``dask.array.Array`` (checked by type name: dask is not imported)."""
    cls = type(X)
    return cls.__name__ == "Array" and cls.__module__.split(".")[0] == "dask"


def _refuse(what):
    raise NotImplementedError(f"{what} is not available on a Dask array; supported: {SUPPORTED}. "
                              "Compute the array (X.compute()) to use it in memory.")


def _rows(X, min_rows=1, what="X"):
    """``X`` ready for the chunk tasks: 2-D, shape known, float64 or float32 chunks (another
    numeric dtype converted lazily to float64, as the in-memory fit converts it), one chunk
    along the columns (rechunked when split: a chunk task needs whole rows), dense chunks.

    ValueError for another number of dimensions, unknown chunk sizes, fewer than ``min_rows``
    rows or no column, a non-numeric dtype; TypeError for sparse chunks."""
    if X.ndim != 2:
        raise ValueError(f"{what} must be a 2-D Dask array (n_samples, n_features), got {X.ndim} dimension(s)")
    if any(np.isnan(c) for c in X.chunks[0]) or any(np.isnan(c) for c in X.chunks[1]):
        raise ValueError(f"{what} has unknown chunk sizes: call {what}.compute_chunk_sizes() first")
    meta = getattr(X, "_meta", None)
    if meta is not None and not isinstance(meta, np.ndarray):
        raise TypeError(f"{what} has chunks of type {type(meta).__name__}: a Dask array of NumPy chunks is "
                        "needed (sparse chunks are not supported on Dask arrays)")
    n, d = X.shape
    if n < min_rows:
        raise ValueError(f"Found array with {n} sample(s) (shape={X.shape}) while a minimum of {min_rows} is "
                         "required.")
    if d < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.dtype not in (np.float64, np.float32):
        if X.dtype == bool or not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
            raise ValueError(f"{what} must be numeric (float64 or float32), got dtype {X.dtype}")
        X = X.astype(np.float64)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X


def _block(b):
    """A chunk as ``_core`` takes it: C-contiguous float64 or float32."""
    return np.ascontiguousarray(b)


def _chunk_tasks(X, task, shared, y=None):
    """``task(chunk, first_row, shared[, y_chunk])`` for every chunk of rows of ``X``, as delayed
    tasks in chunk order. ``shared`` travels once (one key of the graph), not once per chunk."""
    import dask
    blocks = X.to_delayed().ravel()
    firsts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int)
    shared = dask.delayed(shared, pure=True)
    if y is None:
        return [dask.delayed(task, pure=True)(b, int(f), shared) for b, f in zip(blocks, firsts)]
    ys = y.to_delayed().ravel()
    return [dask.delayed(task, pure=True)(b, int(f), shared, yb) for b, f, yb in zip(blocks, firsts, ys)]


def _per_chunk(X, task, shared, y=None):
    """The results of :func:`_chunk_tasks` in chunk order, computed by the current Dask scheduler
    (a ``distributed`` client when one is active). For small results only (``3r`` numbers):
    the client holds one per chunk."""
    import dask
    return list(dask.compute(*_chunk_tasks(X, task, shared, y)))


def _add_parts(a, b):
    """``a + b`` for parts: arrays (entry by entry, a new array), floats, or tuples of them."""
    if isinstance(a, tuple):
        return tuple(_add_parts(u, v) for u, v in zip(a, b))
    if isinstance(a, float):
        return a + b
    out = np.array(a, dtype=np.float64, copy=True)
    out += b
    return out


def _sum_per_chunk(X, task, shared, y=None):
    """The chunks' parts added **left to right in chunk order** — part 0 + part 1, then + part 2,
    … — as a chain of tasks in the graph, so that only the sum comes back to the client (one
    part's size, whatever the number of chunks) and a given chunking gives the same bits on any
    scheduler: each addition is rounded once, in the same order."""
    import dask
    tasks = _chunk_tasks(X, task, shared, y)
    total = tasks[0]
    for t in tasks[1:]:
        total = dask.delayed(_add_parts, pure=True)(total, t)
    return dask.compute(total)[0]


def _landmarks(X, kind, m, seed, given):
    """The landmark rows ``(m, d)`` of a Dask fit: the rows given, else those at the indices the
    in-memory fit draws for ``kind`` ("kpca" or "krr") with ``m`` and ``seed`` (or the indices
    given), fetched from ``X``."""
    n, d = X.shape
    if "landmark_rows" in given:
        L = given["landmark_rows"]
        if L.shape[1] != d:
            raise ValueError(f"invalid landmarks: the landmark rows have {L.shape[1]} columns, the training "
                             f"rows {d} features")
        return L
    indices = given.get("landmark_indices")
    idx = _core.dask_landmarks(kind, n, d, m, seed, None if indices is None else [int(i) for i in indices])
    return _fetch_rows(X, idx)


def _fetch_rows(X, idx):
    """The rows ``idx`` of ``X`` as a float64 ``(m, d)`` array (float32 widened exactly)."""
    import dask
    rows, = dask.compute(X[np.asarray(idx, dtype=np.int64)])
    return np.ascontiguousarray(rows, dtype=np.float64)


# ---- kernel PCA (Nyström) --------------------------------------------------------------------

def _nystrom_part(block, first, shared):
    basis, kernel = shared
    return _core.dask_nystrom_part(_block(block), basis, kernel)


def _nystrom_signs(block, first, shared):
    basis, solution, kernel = shared
    return np.asarray(_core.dask_nystrom_signs(_block(block), first, basis, solution, kernel))


def _nystrom_vectors(block, basis, solution, kernel, signs):
    return _core.dask_nystrom_signs(_block(block), 0, basis, solution, kernel, signs=list(signs))


def _transform_block(block, model, scale):
    Z = _core.transform(model, _block(block))
    if scale is not None:
        Z /= scale
    return Z


def _check_width(est, X):
    if X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
                         f"{est.n_features_in_} features as input.")


def fit_kernel_pca(est, X):
    """``KernelPCA.fit`` on a Dask array: Nyström only (the chunk tasks return ``m′ × m′`` and
    ``3r`` numbers each). ``eigenvectors_`` is a lazy Dask array ``(n, r)`` chunked as ``X``
    (computing it runs one more pass); every other attribute is in memory."""
    import stolr as s
    if s._gram_kernel(est):
        _refuse(f"kernel={est.kernel!r}")
    if est.solver == "skpca":
        raise NotImplementedError(
            'KernelPCA(solver="skpca") is not available on a Dask array: each of its thousands of iterations '
            "reads every row, so it would be one cluster round trip per iteration (docs/distributed.md, "
            '"Dask"). Use KernelPCA(solver="nystrom") or solver="exact" on the Dask array, or run SKPCA '
            "on rows sharded across processes: mpirun stolr kpca --solver skpca.")
    if est.solver not in ("nystrom", "exact", "exact-matrix-free"):
        _refuse(f'KernelPCA(solver="{est.solver}")')
    if est.fit_inverse_transform:
        _refuse("KernelPCA(fit_inverse_transform=True)")
    if est.solver != "nystrom":
        return _fit_exact_kpca(est, X)
    X = _rows(X, min_rows=2)
    n, d = X.shape
    n_components = est.n_components if est.n_components is not None else min(n, d)
    n_components = s._count("n_components", n_components)
    m = min(s._count("n_landmarks", est.n_landmarks), n)
    given = s._landmark_kwargs(est.landmarks)
    if given and est.n_components is None:
        n_components = min(n_components, len(next(iter(given.values()))))
    seed = s._seed(est.random_state)
    kernel = (str(est.kernel), s._gamma(est.gamma, d), int(est.degree), float(est.coef0))
    L = _landmarks(X, "kpca", m, seed, given)
    if n_components > L.shape[0]:
        raise ValueError(f"invalid rank: n_components = {n_components} exceeds the {L.shape[0]} landmarks")
    center = bool(est.center)
    scaled, shift, max_diagonal = _core.dask_nystrom_basis(L, kernel, center)
    basis = (L, scaled, shift, float(max_diagonal), center)
    total = _sum_per_chunk(X, _nystrom_part, (basis, kernel))
    values, coefficients, t = _core.dask_nystrom_solve([total], basis, n, n_components)
    solution = (values, coefficients, t)
    candidates = _per_chunk(X, _nystrom_signs, (basis, solution, kernel))
    model, signs = _core.dask_nystrom_model(basis, solution, kernel, [list(c) for c in candidates])
    r = len(values)
    if r < n_components and est.n_components is not None:
        import warnings
        warnings.warn(f"nystrom returned {r} eigenpairs, {n_components} requested: the Nyström kernel matrix "
                      f"has numerical rank {r}", UserWarning, stacklevel=3)
    s._drop(est, "K_fit_rows_", "K_fit_all_", "feature_names_in_")
    est.model_ = model
    est.eigenvalues_ = values
    # (n, r): lazy, chunked as X; the training rows' eigenvectors, as the in-memory fit's.
    est.eigenvectors_ = X.map_blocks(_nystrom_vectors, basis, solution, kernel, np.asarray(signs),
                                     chunks=(X.chunks[0], (r,)), dtype=np.float64,
                                     meta=np.empty((0, 0), dtype=np.float64))
    est.n_features_in_ = d
    est.n_iter_ = 1
    s._set_preimage_attributes(est)
    return est


def _kernel_rows(chunks, first, rows, V, kernel, means):
    return _core.dask_kernel_rows([_block(c) for c in chunks], first, rows, V, kernel, means)


def _scheduler_client():
    """The ``distributed`` client the current Dask scheduler is, or None (threads, processes,
    synchronous)."""
    import dask
    client = getattr(dask.base.get_scheduler(), "__self__", None)
    return client if type(client).__name__ == "Client" else None


def _fit_exact_kpca(est, X):
    """``KernelPCA(solver="exact")`` (or ``"exact-matrix-free"``) on a Dask array: the in-memory
    matrix-free solver (block Krylov–Schur, residual 1e-10) with its eigensolver, Krylov basis
    ``(n, ~2r + 8b)`` and every decision on the client, and each kernel product computed on the
    workers: ``X`` is persisted once, the block ``V`` ``(n, b)`` is sent to the workers (scattered
    on ``distributed``), one task per chunk ``i`` returns its rows of ``K V`` (the tiled operator
    over every chunk, stacked on the worker: the MPI ranks' scheme, so a given chunking gives the
    same bits), and the client stacks them in chunk order. With ``center``, the first product is
    asked for uncentred on the block and a column of ones, which gives the row means; the client
    centres it, and every later product is centred on the workers. Bytes per product: ``8·n·b``
    out to each worker, ``8·n·b`` back; every worker ends up holding all of ``X`` (``8·n·d``),
    fetched once.

    The model keeps every training row, as the in-memory exact model does: ``X`` is computed once
    on the client at the end (``8·n·d`` bytes in ``model_``), and ``transform`` sends that model
    to each worker once. ``eigenvectors_`` ``(n, r)`` is computed on the client and returned as a
    Dask array chunked as ``X``."""
    import dask
    import dask.array as da
    import stolr as s
    if est.landmarks is not None:
        raise ValueError(f"the {est.solver} solver takes no landmarks: only nystrom does")
    X = _rows(X, min_rows=2)
    n, d = X.shape
    n_components = est.n_components if est.n_components is not None else min(n, d)
    n_components = s._count("n_components", n_components)
    if n_components > n:
        raise ValueError(f"invalid rank: n_components = {n_components} exceeds the {n} training rows")
    kernel = (str(est.kernel), s._gamma(est.gamma, d), int(est.degree), float(est.coef0))
    memory = None if est.memory_limit is None else str(est.memory_limit)
    X = X.persist()
    blocks = list(X.to_delayed().ravel())
    sizes = [int(c) for c in X.chunks[0]]
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    client = _scheduler_client()

    def share(value):
        if client is not None:
            return client.scatter(value, broadcast=False, hash=False)
        return dask.delayed(value, pure=False)

    shared_means = []

    def products(V, means, grand):
        if means is not None and not shared_means:  # the same means for every later product
            shared_means.append(share((np.asarray(means), float(grand))))
        m = shared_means[0] if means is not None else None
        Vs = share(np.ascontiguousarray(V))
        tasks = [dask.delayed(_kernel_rows, pure=False)(blocks, int(f), r, Vs, kernel, m)
                 for f, r in zip(firsts, sizes)]
        return np.ascontiguousarray(np.concatenate(dask.compute(*tasks), axis=0))

    values, vectors, means, _ = _core.dask_exact_kpca(products, n, d, n_components, bool(est.center),
                                                      memory_limit=memory)
    rows, = dask.compute(X)
    model, values, vectors, warns, _ = _core.dask_exact_model(_block(rows), kernel, n_components, list(values),
                                                              vectors, means)
    del rows
    import warnings
    for message in warns:
        if est.n_components is not None or "requested" not in message:
            warnings.warn(message, s._warning_category(message), stacklevel=3)
    s._drop(est, "K_fit_rows_", "K_fit_all_", "feature_names_in_")
    est.model_ = model
    est.eigenvalues_ = values
    est.eigenvectors_ = da.from_array(vectors, chunks=(X.chunks[0], (vectors.shape[1],)))
    est.n_features_in_ = d
    est.n_iter_ = 1
    s._set_preimage_attributes(est)
    return est


def transform_kernel_pca(est, X):
    """``KernelPCA.transform`` on a Dask array: a Dask array ``(n, r)`` chunked as ``X``."""
    import stolr as s
    from sklearn.utils.validation import check_is_fitted
    if s._gram_kernel(est):
        _refuse(f"kernel={est.kernel!r}")
    check_is_fitted(est, "model_")
    X = _rows(X)
    _check_width(est, X)
    scale = s._whiten_scale(est.eigenvalues_) if getattr(est, "whiten", False) else None
    r = len(est.eigenvalues_)
    # The model as one key of the graph: an exact model keeps every training row, so it travels
    # to each worker once rather than with each task.
    import dask
    model = dask.delayed(est.model_, pure=True)
    return X.map_blocks(_transform_block, model, scale, chunks=(X.chunks[0], (r,)), dtype=np.float64,
                        meta=np.empty((0, 0), dtype=np.float64))


# ---- PCA (exact) -----------------------------------------------------------------------------

def _means_round(block, first, combined):
    return _core.dask_pca_means_round(_block(block), combined)


def _gram_part(block, first, mean):
    return _core.dask_pca_gram_part(_block(block), mean)


def _inverse_block(block, model, scale):
    Z = np.array(block, dtype=np.float64, copy=True)
    if scale is not None:
        Z *= scale
    return _core.inverse_transform(model, np.ascontiguousarray(Z))


def fit_pca(est, X):
    """``PCA.fit`` on a Dask array: the exact solver, as the processes of an MPI run fit it:
    two passes for the column means (sums, then sums around the first mean: right at an offset
    of 1e9), one for the centred Gram matrix (``d × d`` per chunk), the ``d × d``
    eigenproblem on the client."""
    import stolr as s
    if est.solver != "exact":
        _refuse(f'PCA(solver="{est.solver}")')
    X = _rows(X, min_rows=2)
    n, d = X.shape
    k = s._pca_components(est.n_components, n, d)
    if isinstance(k, float):
        _refuse(f"PCA(n_components={est.n_components!r}) (a share of the variance)")
    center = bool(est.center)
    if center:
        sums = _sum_per_chunk(X, _means_round, [[float(n)]])
        corrections = _sum_per_chunk(X, _means_round, [[float(n)], list(sums)])
        mean = _core.dask_pca_means_round(np.zeros((0, d)), [[float(n)], list(sums), list(corrections)])
    else:
        mean = np.zeros(d)
    mean = [float(v) for v in mean]
    gram = _sum_per_chunk(X, _gram_part, mean)
    s._drop(est, "feature_names_in_")
    est.model_ = _core.dask_pca_model([gram], mean, n, k, center)
    est._set_attributes()
    est.n_features_in_ = d
    est.n_iter_ = 1
    return est


def transform_pca(est, X):
    """``PCA.transform`` on a Dask array: a Dask array ``(n, n_components_)`` chunked as ``X``."""
    import stolr as s
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est, "model_")
    X = _rows(X)
    _check_width(est, X)
    scale = s._whiten_scale(est.explained_variance_) if getattr(est, "whiten", False) else None
    return X.map_blocks(_transform_block, est.model_, scale, chunks=(X.chunks[0], (est.n_components_,)),
                        dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64))


def inverse_transform_pca(est, Z):
    """``PCA.inverse_transform`` on a Dask array ``(n, n_components_)``: a Dask array
    ``(n, n_features_in_)`` chunked as ``Z``'s rows."""
    import stolr as s
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est, "model_")
    Z = _rows(Z, what="Z")
    if Z.shape[1] != est.n_components_:
        raise ValueError(f"Z has {Z.shape[1]} columns, expected n_components_ = {est.n_components_}")
    scale = s._whiten_scale(est.explained_variance_) if getattr(est, "whiten", False) else None
    return Z.map_blocks(_inverse_block, est.model_, scale, chunks=(Z.chunks[0], (est.n_features_in_,)),
                        dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64))


# ---- streaming PCA (one sequential pass) ------------------------------------------------------

def fit_streaming_pca(est, X):
    """``StreamingPCA.fit`` on a Dask array: the library's streaming job (the in-memory fit's)
    fed the chunks' rows in order, each chunk computed by the current scheduler when the pass
    reaches it (the client holds one chunk; each pass — the means with ``center``, the solver's,
    the Rayleigh–Ritz one — computes the chunks again). The same rows in the same order, so the
    in-memory fit's bits for every chunking. The residual warning of the in-memory fit (a test
    on all of ``X`` at once) is not computed."""
    import stolr as s
    X = _rows(X, min_rows=2)
    n, d = X.shape
    est._check_params()
    if not 1 <= int(est.n_components) < d:
        raise ValueError(f"n_components={est.n_components} must be at least 1 and below the "
                         f"number of features (n_features = {d})")
    for attr in ("state_", "model_", "feature_names_in_"):
        s._drop(est, attr)
    blocks = X.to_delayed().ravel()

    def chunk(i):
        return _block(blocks[i].compute())

    est.state_, model = _core.dask_fit_streaming(
        chunk, len(blocks), d, est.solver, est._tracked(d), float(est.eta_scale), est.cap,
        s._seed(est.random_state), bool(getattr(est, "center", False)), bool(getattr(est, "verbose", False)))
    est.model_ = est._keep(model)
    est.components_, est.explained_variance_, est.mean_ = _core.pca_attributes(est.model_)
    est.n_samples_seen_ = est.state_.samples_seen()
    est.n_features_in_ = d
    return est


def transform_streaming_pca(est, X):
    """``StreamingPCA.transform`` on a Dask array: a Dask array ``(n, n_components)`` chunked as
    ``X``."""
    import stolr as s
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est, "model_")
    X = _rows(X)
    _check_width(est, X)
    k = est.components_.shape[0]
    scale = s._whiten_scale(est.explained_variance_) if getattr(est, "whiten", False) else None
    return X.map_blocks(_transform_block, est.model_, scale, chunks=(X.chunks[0], (k,)),
                        dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64))


# ---- kernel ridge regression (Nyström) -------------------------------------------------------

def _krr_part(block, first, shared, y):
    basis, kernel = shared
    y = np.asarray(y, dtype=np.float64).ravel()
    return _core.dask_krr_part(_block(block), [float(v) for v in y], basis, kernel)


def _y_sum(block, first, shared, y):
    return float(np.sum(np.asarray(y, dtype=np.float64)))


def _predict_block(block, model):
    return _core.predict(model, _block(block))


def _predict_outputs_block(block, model):
    return _core.predict_outputs(model, _block(block))


def _targets(y, X):
    """``y`` as a 1-D float64 Dask array chunked as the rows of ``X``: a NumPy ``y`` is split,
    a Dask one rechunked. ValueError for 2-D targets (one output only on Dask arrays) or
    another length than ``X``."""
    import dask.array as da
    n = X.shape[0]
    if is_dask(y):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (one output) on a Dask array, got shape {y.shape}")
        if any(np.isnan(c) for c in y.chunks[0]):
            raise ValueError("y has unknown chunk sizes: call y.compute_chunk_sizes() first")
        if y.shape[0] != n:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n}, {y.shape[0]}]")
        if y.chunks[0] != X.chunks[0]:
            y = y.rechunk((X.chunks[0],))
        return y.astype(np.float64)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (one output) with a Dask array X, got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n}, {y.shape[0]}]")
    if not np.issubdtype(y.dtype, np.number) or y.dtype == bool:
        raise ValueError(f"y must be numeric, got dtype {y.dtype}")
    return da.from_array(y.astype(np.float64), chunks=(X.chunks[0],))


def fit_kernel_ridge(est, X, y, sample_weight=None):
    """``KernelRidge.fit`` on a Dask array ``X`` and targets ``y`` (NumPy or Dask, 1-D):
    Nyström with the direct solve only (the chunk tasks return ``M × M`` and ``2M`` numbers
    each; with the intercept, one more pass first for ȳ)."""
    import stolr as s
    if s._gram_kernel(est):
        _refuse(f"kernel={est.kernel!r}")
    if est.solver != "nystrom":
        _refuse(f'KernelRidge(solver="{est.solver}")')
    if sample_weight is not None:
        _refuse("KernelRidge.fit(sample_weight=...)")
    X = _rows(X)
    n, d = X.shape
    y = _targets(y, X)
    m = min(s._count("n_landmarks", est.n_landmarks), n)
    given = s._landmark_kwargs(est.landmarks)
    seed = s._seed(est.random_state)
    kernel = (str(est.kernel), s._gamma(est.gamma, d), 0, 0.0)
    L = _landmarks(X, "krr", m, seed, given)
    mean = None
    if est.fit_intercept:
        mean = _sum_per_chunk(X, _y_sum, None, y=y) / n
    kmm, factor, jitter = _core.dask_krr_basis(L, kernel, mean)
    basis = (L, kmm, factor, float(jitter), mean)
    total = _sum_per_chunk(X, _krr_part, (basis, kernel), y=y)
    est.model_ = _core.dask_krr_model([total], basis, kernel, n, float(est.alpha), str(est.nystrom_solve))
    s._drop(est, "feature_names_in_")
    est.n_features_in_ = d
    est._y_ndim = 1
    est.n_iter_ = 1
    coef, _ = _core.krr_coefficients(est.model_)
    est.dual_coef_ = coef[:, 0]
    return est


def predict_kernel_ridge(est, X):
    """``KernelRidge.predict`` on a Dask array: a 1-D Dask array chunked as ``X``'s rows
    (several outputs: ``(n, t)``)."""
    import stolr as s
    from sklearn.utils.validation import check_is_fitted
    if s._gram_kernel(est):
        _refuse(f"kernel={est.kernel!r}")
    check_is_fitted(est, "model_")
    X = _rows(X)
    _check_width(est, X)
    t = _core.krr_coefficients(est.model_)[1]
    if t > 1 or getattr(est, "_y_ndim", 1) == 2:
        return X.map_blocks(_predict_outputs_block, est.model_,
                            chunks=(X.chunks[0], (t,)), dtype=np.float64, meta=np.empty((0, 0)))
    return X.map_blocks(_predict_block, est.model_, drop_axis=1, chunks=(X.chunks[0],), dtype=np.float64,
                        meta=np.empty((0,), dtype=np.float64))
