"""Run under ``mpirun -np P python3 mpi_fit.py CASE`` by test_mpi4py.py.

Every rank builds the same data (an outlier row, duplicate rows, a constant column), fits its
block of consecutive rows with ``comm=MPI.COMM_WORLD`` and compares with the one-process fit
of all the rows, computed here on every rank: bit for bit under ``-np 1``, to rounding
otherwise. Each check prints ``rank R ok NAME``; a failed check raises (the job then fails).

CASE ``agree``: every distributed solver; ``hostile``: bad inputs and refused solvers (every
rank must raise); ``abort``: one rank fails alone inside the fit (the job must end, non-zero).
"""

import os
import sys
import warnings

import numpy as np
from mpi4py import MPI

import stolr

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
warnings.simplefilter("ignore")


def data(n=96, d=6, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ np.diag([3.0, 2.0, 1.5, 1.0, 0.5, 1.0])
    X[:, 5] = 2.5            # a constant column
    X[7] = 40.0 * X[7]       # an outlier row
    X[20] = X[21] = X[22]    # duplicate rows
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    return X, y


X, y = data()
Xtest, _ = data(n=25, seed=11)
block = np.array_split(np.arange(X.shape[0]), size)[rank]
X_local, y_local = X[block], y[block]


#: The largest relative difference of every comparison (printed by rank 0 at the end).
MEASURED = {}


#: This rank's lines, also written to ``$STOLR_MPI_OUT/rank<R>.txt`` at the end (the ranks'
#: stdout lines can interleave in mpirun's output).
LINES = []


def ok(name):
    LINES.append(f"rank {rank} ok {name}")
    print(LINES[-1], flush=True)


def close(a, b, rel, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    if size == 1:  # one rank is the one-process fit, bit for bit
        assert np.array_equal(a, b), f"{what}: not the same bits under -np 1 (max diff {np.abs(a - b).max()})"
        return
    scale = max(np.abs(b).max(), 1e-300)
    err = np.abs(a - b).max() / scale
    MEASURED[what] = max(MEASURED.get(what, 0.0), err)
    assert err <= rel, f"{what}: relative difference {err:.3e} > {rel:.0e}"


def same_on_every_rank(model_bytes, what):
    every = comm.allgather(bytes(model_bytes))
    assert all(m == every[0] for m in every), f"{what}: the ranks' models differ"


def agree():
    # The communicator itself: rank-ordered sums (1 + 1e16) - 1e16 = 0, and the same bits on
    # every rank; gathers in rank order.
    parts = [1.0, 1e16, -1e16]
    total = stolr._core.mpi_all_reduce_sum(comm, [parts[rank % 3], float(rank)])
    in_rank_order = parts[0]
    for q in range(1, size):
        in_rank_order += parts[q % 3]
    assert total == [in_rank_order, float(sum(range(size)))], total
    assert size < 3 or total[0] == 0.0, total  # not 1.0, the sum 1 + (1e16 - 1e16)
    everyone, gathered, b = stolr._core.mpi_collectives(comm, [float(rank)] * (rank + 1), size - 1)
    assert everyone == [[float(q)] * (q + 1) for q in range(size)]
    assert (gathered == everyone) if rank == size - 1 else gathered is None
    assert b[0] == float(size - 1)
    ok("communicator")

    kpca = [
        ("nystrom", dict(solver="nystrom", n_landmarks=30, n_components=4, gamma=0.05), 1e-12),
        ("exact-matrix-free", dict(solver="exact-matrix-free", n_components=4, gamma=0.05), 1e-12),
        ("skpca-rff", dict(solver="skpca", sampler="rff", n_features=20, n_iter=30, tau=0.5, center=False,
                           n_components=3, gamma=0.05), 1e-12),
        ("skpca-maclaurin", dict(solver="skpca", sampler="maclaurin", kernel="poly", degree=2, coef0=1.0,
                                 n_features=20, n_iter=30, tau=0.5, center=False, n_components=3,
                                 gamma=0.05), 1e-12),
        # KHA's outputs y are added over the ranks every step: its iterate, hence its Ritz
        # pairs, agree to the rounding of 300 such sums.
        ("kha", dict(solver="kha", n_components=3, n_iter=300, gamma=0.05), 1e-9),
        # Column sampling (indices over all rows from the shared seed) and centring (column
        # means over every rank).
        ("skpca-columns", dict(solver="skpca", sampler="columns", n_features=8, n_iter=30, tau=0.5, center=False,
                               n_components=3, gamma=0.05), 1e-12),
        ("skpca-columns-sym-centred", dict(solver="skpca", sampler="columns-sym", n_features=6, n_iter=30, tau=0.5,
                                           center=True, n_components=3, gamma=0.05), 1e-12),
        ("skpca-rff-centred", dict(solver="skpca", sampler="rff", n_features=20, n_iter=30, tau=0.5, center=True,
                                   n_components=3, gamma=0.05), 1e-12),
    ]
    for name, params, rel in kpca:
        one = stolr.KernelPCA(random_state=5, **params).fit(X)
        est = stolr.KernelPCA(random_state=5, **params).fit(X_local, comm=comm)
        close(est.eigenvalues_, one.eigenvalues_, rel, f"kpca {name} eigenvalues")
        close(est.transform(Xtest), one.transform(Xtest), rel * 100, f"kpca {name} transform")
        # Each rank transforms its own rows with the broadcast model.
        close(est.transform(X_local), one.transform(X)[block], rel * 100, f"kpca {name} own rows")
        if rank == 0:
            # eigenvectors_ are fixed up to sign; compare |.| (the signs are fixed by the largest entry)
            close(np.abs(est.eigenvectors_), np.abs(one.eigenvectors_), rel * 1e2, f"kpca {name} eigenvectors")
        if size == 1:
            assert est.model_ == one.model_, f"kpca {name}: the model bytes differ under -np 1"
        same_on_every_rank(est.model_, f"kpca {name}")
        ok(f"kpca {name}")

    # Float32 rows (converted exactly) and the pre-image map, fitted on rank 0 after the
    # matrix-free solver and broadcast.
    params = dict(solver="exact-matrix-free", n_components=3, gamma=0.05, fit_inverse_transform=True, alpha=0.1)
    one = stolr.KernelPCA(**params).fit(X.astype(np.float32))
    est = stolr.KernelPCA(**params).fit(X_local.astype(np.float32), comm=comm)
    close(est.eigenvalues_, one.eigenvalues_, 1e-12, "kpca float32 eigenvalues")
    Z = one.transform(Xtest)
    close(est.inverse_transform(Z), one.inverse_transform(Z), 1e-10, "kpca float32 inverse_transform")
    ok("kpca float32 pre-image")

    # rank 0 only: the others stay unfitted.
    est = stolr.KernelPCA(solver="nystrom", n_landmarks=30, n_components=4).fit(X_local, comm=comm, broadcast=False)
    assert hasattr(est, "model_") == (rank == 0)
    ok("kpca broadcast=False")

    for solver, rel in [("exact", 1e-12), ("vr-pca", 1e-12), ("svrg-bb", 1e-12)]:
        one = stolr.PCA(n_components=3, solver=solver, random_state=2).fit(X)
        est = stolr.PCA(n_components=3, solver=solver, random_state=2).fit(X_local, comm=comm)
        close(est.explained_variance_, one.explained_variance_, rel, f"pca {solver} variances")
        close(np.abs(est.components_), np.abs(one.components_), rel * 1e2, f"pca {solver} components")
        close(est.mean_, one.mean_, 1e-13, f"pca {solver} mean")
        close(est.transform(Xtest), one.transform(Xtest), rel * 1e2, f"pca {solver} transform")
        close(est.explained_variance_ratio_, one.explained_variance_ratio_, rel, f"pca {solver} ratio")
        assert est.n_samples_ == X.shape[0]
        same_on_every_rank(est.model_, f"pca {solver}")
        ok(f"pca {solver}")
    one = stolr.PCA(n_components=0.9).fit(X)
    est = stolr.PCA(n_components=0.9).fit(X_local, comm=comm)
    assert est.n_components_ == one.n_components_
    ok("pca share")

    for solver, params, rel in [("nystrom", dict(n_landmarks=25, alpha=1e-3), 1e-10),
                                ("slkl", dict(n_landmarks=25, alpha=1e-3, nu=0.01), 1e-10),
                                ("krr-subset", dict(n_landmarks=25, alpha=1e-3), 1e-10),
                                ("uniform", dict(n_landmarks=25, alpha=1e-3, nu=0.01), 1e-10)]:
        one = stolr.KernelRidge(solver=solver, gamma=0.1, random_state=4, **params).fit(X, y)
        est = stolr.KernelRidge(solver=solver, gamma=0.1, random_state=4, **params).fit(X_local, y_local, comm=comm)
        close(est.predict(Xtest), one.predict(Xtest), rel, f"krr {solver} predict")
        close(est.predict(X_local), one.predict(X)[block], rel, f"krr {solver} own rows")
        same_on_every_rank(est.model_, f"krr {solver}")
        if size == 1:
            assert est.model_ == one.model_, f"krr {solver}: the model bytes differ under -np 1"
        ok(f"krr {solver}")
    # Nyström KRR's conjugate gradients (each iteration's product added across ranks), SLKL's
    # and Unif's cross-validated nu (one sharded SLKL or Unif system per fold, folds over the
    # global rows).
    for name, params in [("krr nystrom cg", dict(solver="nystrom", n_landmarks=25, alpha=1e-2, nystrom_solve="cg",
                                                 tol=1e-12)),
                         ("krr slkl nu auto", dict(solver="slkl", n_landmarks=25, alpha=1e-2, nu="auto",
                                                   tol=1e-8)),
                         ("krr uniform nu auto", dict(solver="uniform", n_landmarks=25, alpha=1e-2, nu="auto"))]:
        one = stolr.KernelRidge(gamma=0.1, random_state=4, **params).fit(X, y)
        est = stolr.KernelRidge(gamma=0.1, random_state=4, **params).fit(X_local, y_local, comm=comm)
        close(est.predict(Xtest), one.predict(Xtest), 1e-10, f"{name} predict")
        same_on_every_rank(est.model_, name)
        if size == 1:
            assert est.model_ == one.model_, f"{name}: the model bytes differ under -np 1"
        ok(name)
    # y as one column: 2-D predictions, as one process gives them.
    one = stolr.KernelRidge(solver="nystrom", n_landmarks=25, gamma=0.1).fit(X, y[:, None])
    est = stolr.KernelRidge(solver="nystrom", n_landmarks=25, gamma=0.1).fit(X_local, y_local[:, None], comm=comm)
    close(est.predict(Xtest), one.predict(Xtest), 1e-10, "krr 2-D y")
    ok("krr 2-D y")


def expect_error(name, fit, *words, kind=ValueError):
    try:
        fit()
    except kind as e:
        message = str(e)
        assert all(w in message for w in words), f"{name}: {message!r} lacks {words}"
        ok(name)
        return
    raise AssertionError(f"{name}: no error on rank {rank}")


def hostile():
    kp = dict(solver="nystrom", n_landmarks=20, n_components=3)
    # Different numbers of features on the last rank.
    rows = X_local[:, :5] if rank == size - 1 and size > 1 else X_local
    if size > 1:
        expect_error("different d", lambda: stolr.KernelPCA(**kp).fit(rows, comm=comm), "different numbers of features")
    # NaN on the last rank.
    bad = X_local.copy()
    if rank == size - 1:
        bad[0, 0] = np.nan
    expect_error("nan", lambda: stolr.PCA(n_components=2).fit(bad, comm=comm), f"rank {size - 1} of {size}", "NaN")
    # A rank with no rows.
    empty = X_local[:0] if rank == size - 1 else X_local
    expect_error("empty rank", lambda: stolr.KernelPCA(**kp).fit(empty, comm=comm), "holds no rows")
    # Targets of the wrong length on rank 0.
    yy = y_local[:-1] if rank == 0 else y_local
    expect_error("y length", lambda: stolr.KernelRidge(solver="nystrom").fit(X_local, yy, comm=comm), "rank 0")
    # Sparse rows.
    import scipy.sparse as sp
    expect_error("sparse", lambda: stolr.PCA().fit(sp.csr_matrix(X_local), comm=comm), "scipy.sparse")
    if size > 1:
        # Parameters that differ between ranks.
        expect_error("params", lambda: stolr.PCA(n_components=2 + (rank == size - 1)).fit(X_local, comm=comm),
                     "parameters differ")
        # Solvers and options the library refuses on several ranks: its error on every rank.
        expect_error("krr exact", lambda: stolr.KernelRidge(solver="krr").fit(X_local, y_local, comm=comm),
                     "not distributed")
    # And afterwards the communicator still works: a good fit.
    est = stolr.PCA(n_components=2).fit(X_local, comm=comm)
    one = stolr.PCA(n_components=2).fit(X)
    close(est.explained_variance_, one.explained_variance_, 1e-12, "pca after errors")
    ok("after errors")


def abort():
    # Only the last rank has a budget too small for the fit: it fails alone, inside the fit,
    # while the others wait in a collective; it must end the job (comm.Abort), not hang.
    limit = "1K" if rank == size - 1 else None
    stolr.KernelPCA(solver="nystrom", n_landmarks=30, n_components=3, memory_limit=limit).fit(X_local, comm=comm)
    print(f"rank {rank} finished", flush=True)


{"agree": agree, "hostile": hostile, "abort": abort}[sys.argv[1]]()
LINES.append(f"rank {rank} done {sys.argv[1]}")
if os.environ.get("STOLR_MPI_OUT"):
    with open(os.path.join(os.environ["STOLR_MPI_OUT"], f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(LINES) + "\n")
if rank == 0:
    for what, err in MEASURED.items():
        print(f"measured {what}: {err:.2e}")
print(f"rank {rank} done {sys.argv[1]}", flush=True)
