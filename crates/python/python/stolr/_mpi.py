"""Fits under ``mpirun`` with mpi4py: ``fit(X_local, ..., comm=MPI.COMM_WORLD)``.

Every rank of ``comm`` calls ``fit`` on the same estimator parameters with its own rows; the
ranks hold consecutive blocks of the rows in rank order (rank 0 the first block), so the fit
is the fit of their concatenation. The fit is the library's sharded job, the one
``mpirun stolr kpca|pca|krr`` runs (``_core.fit_kernel_pca``, ``fit_pca_report`` and
``fit_kernel_ridge`` with ``comm=``), with Stolr's communicator calling
the methods of the mpi4py communicator (crates/python/src/mpi.rs): no MPI is compiled into the
package, and the results equal the one-process fit on the concatenated rows up to the rounding
of the rank-ordered sums (bit for bit under ``mpirun -np 1``).

Steps of one fit, each collective over ``comm``:

1. **Inputs, checked together.** Each rank checks its rows (dense, float64 or float32, 2-D,
   finite; the targets' length) and the ranks exchange one small record by ``allgather``
   (the check's error, the shape, the estimator's parameters). Every rank then raises the same
   ``ValueError`` for any rank's bad rows, different widths ``d``, a rank without rows, fewer
   than 2 rows in all, or parameters that differ between ranks (``memory_limit`` and
   ``verbose`` may differ: they are each process's own).
2. **The fit**, on a duplicate of ``comm`` (``comm.Dup()``, so that its messages never meet the
   user's). What the library refuses on several ranks (e.g. ``KernelRidge(solver="krr")``,
   the baselines) is its ``NotDistributed`` error, a ``ValueError`` on every rank.
3. **Errors, agreed.** After the fit every rank posts its status (failed or not) in a
   non-blocking ``Iallgather`` on another duplicate. When every rank gets there, the ranks
   that failed raise their own exception and the others raise the first failing rank's (same
   type, message prefixed with its rank). A rank whose fit failed while another rank is still
   inside the fit (waiting in a collective for it, which would be forever) waits
   ``ABORT_AFTER`` seconds, prints its error to ``sys.stderr`` and calls ``comm.Abort(1)``,
   which ends every rank of the job: the library's contract for a rank that fails between
   collectives (``mpirun stolr`` does the same) — never a hang.
4. **The model.** ``broadcast=True`` (default): every rank gets the fitted estimator (kernel PCA:
   rank 0's model bytes, eigenvalues and warnings sent by ``comm.bcast``, the size of the model
   file; PCA and kernel ridge: the library already leaves the same model on every rank). Then
   each rank can ``transform``/``predict`` its own rows. ``broadcast=False``: only rank 0 is
   fitted (the others stay unfitted: ``NotFittedError``), which saves the broadcast.
   ``KernelPCA.eigenvectors_`` (``n × r``, one row per training row) is set on rank 0 only.
"""

import builtins
import os
import sys
import time
import warnings

import numpy as np

from . import _core

#: Seconds a rank whose fit failed waits for the other ranks to finish theirs before it aborts
#: the job (``comm.Abort(1)``): they are either about to fail the same way (the library's
#: refusals happen on every rank) or stuck in a collective that this rank will never join.
#: The environment variable ``STOLR_MPI_ABORT_AFTER`` sets it.
ABORT_AFTER = float(os.environ.get("STOLR_MPI_ABORT_AFTER", "30"))

#: Parameters that may differ between ranks: each process's own budget and output.
_PER_RANK = ("memory_limit", "verbose", "random_state")


def _check_comm(comm):
    """TypeError unless ``comm`` looks like an mpi4py communicator."""
    for method in ("Get_rank", "Get_size", "Dup", "allgather", "Alltoallv", "Allgatherv", "Iallgather", "Abort"):
        if not hasattr(comm, method):
            raise TypeError(f"comm must be an mpi4py communicator (e.g. mpi4py.MPI.COMM_WORLD), got "
                            f"{type(comm).__name__} (no {method})")


def _params_key(est):
    """The estimator's parameters as text, those that may differ between ranks left out."""
    return sorted((k, repr(v)) for k, v in est.get_params(deep=False).items() if k not in _PER_RANK)


def _agree_inputs(comm, est, check):
    """Runs ``check()`` (this rank's validation; returns the local rows) and exchanges its
    outcome with one ``allgather``; every rank raises the same ``ValueError`` when a rank's
    rows or parameters are bad. Returns ``(rows, n_total, d, seed)``. Collective."""
    from . import _seed
    _check_comm(comm)
    size = comm.Get_size()
    X, seed = None, None
    try:
        seed = _seed(est.random_state)
        X = check()
        problem = None
    except Exception as e:  # reported to every rank below
        problem = f"{type(e).__name__}: {e}"
    shape = None if X is None else tuple(int(s) for s in X.shape)
    records = comm.allgather((problem, shape, _params_key(est), seed))
    bad = [(q, p) for q, (p, _, _, _) in enumerate(records) if p is not None]
    if bad:
        raise ValueError("; ".join(f"rank {q} of {size}: {p}" for q, p in bad))
    widths = [s[1] for _, s, _, _ in records]
    if len(set(widths)) > 1:
        raise ValueError("the ranks' rows have different numbers of features: "
                         + ", ".join(f"rank {q} d = {w}" for q, w in enumerate(widths)))
    counts = [s[0] for _, s, _, _ in records]
    total = sum(counts)
    empty = [q for q, c in enumerate(counts) if c == 0]
    if empty:
        raise ValueError(f"rank {empty[0]} of {size} holds no rows (n = {total} over every rank): every rank "
                         "passes at least one row; use fewer processes")
    if total < 2:
        raise ValueError(f"n_samples = {total} over every rank: at least 2 rows are needed")
    if any(key != records[0][2] for _, _, key, _ in records):
        raise ValueError("the estimator's parameters differ between ranks: every rank fits with the same "
                         "parameters (memory_limit, verbose and random_state excepted)")
    if any(s != records[0][3] for _, _, _, s in records):
        raise ValueError("random_state gives different seeds on different ranks: give every rank the same "
                         "integer (or None)")
    return X, total, widths[0], seed


def _local_rows(X):
    """This rank's rows as the sharded fits take them: a dense float64 or float32 array."""
    import scipy.sparse as sp
    if sp.issparse(X):
        raise ValueError("scipy.sparse rows are not taken under comm=: the library's sharded fits hold dense "
                         "rows (fit sparse rows on one process, or densify each rank's block)")
    return X


def _exception(name, message):
    """An exception of the builtin class ``name`` (``RuntimeError`` for another class)."""
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        cls = RuntimeError
    return cls(message)


def _run(comm, fit):
    """``fit(fit_comm)`` on every rank, then the ranks agree on its errors (see the module
    docs, step 3). Returns this rank's result. Collective."""
    rank, size = comm.Get_rank(), comm.Get_size()
    fit_comm = comm.Dup()
    status = comm.Dup()
    try:
        result, error = fit(fit_comm), None
    except BaseException as e:  # noqa: BLE001 (KeyboardInterrupt and panics included)
        result, error = None, e
    mine = np.array([0 if error is None else 1], dtype=np.intc)
    flags = np.zeros(size, dtype=np.intc)
    request = status.Iallgather(mine, flags)
    if error is None:
        request.Wait()
    else:
        deadline = time.monotonic() + ABORT_AFTER
        while not request.Test():
            if time.monotonic() >= deadline:
                sys.stderr.write(f"stolr: rank {rank} of {size}: the fit failed on this rank "
                                 f"({type(error).__name__}: {error}) while another rank is still in it; "
                                 "aborting every rank (comm.Abort(1))\n")
                sys.stderr.flush()
                comm.Abort(1)
            time.sleep(0.002)
    if flags.any():
        reports = status.allgather(None if error is None else (type(error).__name__, str(error)))
    fit_comm.Free()
    status.Free()
    if error is not None:
        raise error
    if flags.any():
        q = int(np.flatnonzero(flags)[0])
        name, message = reports[q]
        raise _exception(name, f"rank {q} of {size}: {message}")
    return result


def _fresh(est, *attrs):
    """Removes the fitted attributes of an earlier fit."""
    for attr in attrs:
        if hasattr(est, attr):
            delattr(est, attr)


def fit_kernel_pca(est, X, comm, broadcast):
    """``KernelPCA.fit(X, comm=comm)``: the sharded kernel PCA (module docs)."""
    from . import (_DTYPES, _count, _gamma, _gram_kernel, _landmark_kwargs, _set_preimage_attributes,
                   _warning_category, validate_data)

    def check():
        if _gram_kernel(est):
            raise ValueError("kernel='precomputed' or a callable kernel does not run under comm= "
                             "(the Gram matrix is n x n): use a named kernel")
        return np.ascontiguousarray(validate_data(est, _local_rows(X), dtype=_DTYPES, ensure_min_samples=0))

    _fresh(est, "model_", "eigenvalues_", "eigenvectors_", "n_iter_", "dual_coef_", "X_transformed_fit_")
    X, n, d, seed = _agree_inputs(comm, est, check)
    n_components = est.n_components if est.n_components is not None else min(n, d)
    n_landmarks = min(_count("n_landmarks", est.n_landmarks), n)
    given = _landmark_kwargs(est.landmarks)
    if given and est.n_components is None:
        n_components = min(n_components, len(next(iter(given.values()))))
    args = (n_components, est.kernel, _gamma(est.gamma, d), int(est.degree), float(est.coef0), est.solver,
            bool(est.center), est.tau, _count("n_iter", est.n_iter), _count("n_features", est.n_features),
            est.sampler, n_landmarks, seed, bool(est.verbose),
            None if est.memory_limit is None else str(est.memory_limit))
    kwargs = dict(inverse_alpha=float(est.alpha) if est.fit_inverse_transform else None, **given)
    out = _run(comm, lambda c: _core.fit_kernel_pca(X, *args, **kwargs, comm=c))
    rank = comm.Get_rank()
    vectors = None
    if out is not None:
        model, values, vectors, warns, n_iter = out
        out = (model, values, warns, n_iter)
    if broadcast:
        out = comm.bcast(out, root=0)
    if out is None:
        return est
    model, values, warns, n_iter = out
    for message in warns:
        if est.n_components is not None or "requested" not in message:
            warnings.warn(message, _warning_category(message), stacklevel=3)
    est.model_ = model
    est.eigenvalues_ = values
    if rank == 0:
        est.eigenvectors_ = vectors
    est.n_iter_ = max(int(n_iter), 1)
    _set_preimage_attributes(est)
    return est


def fit_pca(est, X, comm, broadcast):
    """``PCA.fit(X, comm=comm)``: the sharded PCA (module docs)."""
    from . import _DTYPES, _count, _pca_components, _rank_for_share, _warn_pca_residuals, validate_data

    def check():
        return np.ascontiguousarray(validate_data(est, _local_rows(X), dtype=_DTYPES, ensure_min_samples=0))

    _fresh(est, "model_", "explained_variance_ratio_", "n_iter_")
    X, n, d, seed = _agree_inputs(comm, est, check)
    max_iter = None if est.max_iter is None else _count("max_iter", est.max_iter)
    k = _pca_components(est.n_components, n, d)
    if isinstance(k, float):
        full = _run(comm, lambda c: _core.fit_pca_report(X, min(n, d), "exact", bool(est.center), seed, False,
                                                         comm=c))[0]
        k = _rank_for_share(_core.pca_explained_variance_ratio(full), k)
    model, stop, epochs, _ = _run(comm, lambda c: _core.fit_pca_report(X, k, est.solver, bool(est.center), seed,
                                                                       bool(est.verbose), max_iter, comm=c))
    exact = est.solver == "exact"
    residuals = None if exact else _ritz_residuals(comm, X, model)
    if not broadcast and comm.Get_rank() != 0:
        return est
    est.model_ = model
    est._set_attributes()
    est.n_iter_ = 1 if exact else int(epochs)
    if residuals is not None:
        _warn_pca_residuals(est.solver, residuals, float(est.tol), epochs, stop)
    return est


def _ritz_residuals(comm, X, model):
    """The relative residual ``||C v - theta v|| / max(theta, 1e-10 theta_max)`` of every
    component of a PCA model on the centred rows of every rank (``C`` their second moment,
    ``theta = v' C v``): ``PCA``'s convergence test, with ``C V`` (``d × r``) added over the
    ranks in rank order. Collective."""
    components, _, mean = _core.pca_attributes(model)
    V = components.T
    Xc = np.asarray(X, dtype=np.float64) - mean
    CV = Xc.T @ (Xc @ V)
    CV = np.asarray(_core.mpi_all_reduce_sum(comm, CV.ravel().tolist())).reshape(CV.shape)
    theta = np.einsum("ij,ij->j", V, CV)
    floor = 1e-10 * max(float(theta.max(initial=0.0)), 0.0)
    return [float(np.linalg.norm(CV[:, j] - theta[j] * V[:, j]) / max(theta[j], floor, np.finfo(float).tiny))
            for j in range(V.shape[1])]


def fit_kernel_ridge(est, X, y, sample_weight, comm, broadcast):
    """``KernelRidge.fit(X, y, comm=comm)``: the sharded kernel ridge regression (module docs)."""
    from . import _DTYPES, _count, _gamma, _gram_kernel, _is_auto, _landmark_kwargs, _warning_category
    from . import validate_data
    held = {}

    def check():
        if _gram_kernel(est):
            raise ValueError("kernel='precomputed' or a callable kernel does not run under comm= "
                             "(the Gram matrix is n x n): use a named kernel")
        if sample_weight is not None:
            raise ValueError("kernel ridge regression with sample weights is not distributed yet: fit it on "
                             "one process")
        rows, target = validate_data(est, _local_rows(X), y, dtype=_DTYPES, y_numeric=True, multi_output=True,
                                     ensure_min_samples=0)
        target = np.asarray(target, dtype=np.float64)
        if target.ndim == 2 and target.shape[1] != 1:
            raise ValueError(f"kernel ridge regression with several outputs (y has {target.shape[1]} columns) is "
                             "not distributed yet: fit one output at a time, or on one process")
        held["ndim"] = target.ndim
        held["y"] = np.ascontiguousarray(target.reshape(-1))
        return np.ascontiguousarray(rows)

    _fresh(est, "model_", "dual_coef_", "n_iter_", "_y_ndim")
    X, n, d, seed = _agree_inputs(comm, est, check)
    n_landmarks = min(_count("n_landmarks", est.n_landmarks), n)
    args = (est.solver, est.kernel, float(est.alpha), _gamma(est.gamma, d), n_landmarks,
            None if _is_auto(est.nu) else float(est.nu), bool(est.fit_intercept), seed, bool(est.verbose))
    solves = dict(max_iter=None if est.max_iter is None else _count("max_iter", est.max_iter),
                  tol=None if est.tol is None else float(est.tol), nystrom_solve=str(est.nystrom_solve))
    solves.update(_landmark_kwargs(est.landmarks))
    model, n_iter, warns = _run(comm, lambda c: _core.fit_kernel_ridge(X, held["y"], *args, **solves, comm=c))
    if not broadcast and comm.Get_rank() != 0:
        return est
    for message in warns:
        warnings.warn(message, _warning_category(message), stacklevel=3)
    est.model_ = model
    est._y_ndim = held["ndim"]
    est.n_iter_ = int(n_iter)
    coef, _ = _core.krr_coefficients(model)
    est.dual_coef_ = coef[:, 0] if held["ndim"] == 1 else coef
    return est
