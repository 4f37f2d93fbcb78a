"""The command-line tool and the Python estimators run the library's one fit per solver: with the
same data, parameters and seed they write identical arrays (bit for bit), for every solver.

The data hold an outlier row, duplicate rows and a constant column; sigma = 2 is gamma = 0.125
exactly. Python's defaults differ from the CLI's only by convention (KernelPCA and PCA centre by
default, as scikit-learn does; the CLI centres with --center), so every test passes both
explicitly.
"""

import os
import subprocess

import numpy as np
import pytest

import stolr

STOLR_BIN = os.environ.get("STOLR_BIN", os.path.join(os.path.dirname(__file__), "../../../target/release/stolr"))

pytestmark = pytest.mark.skipif(not os.path.exists(STOLR_BIN), reason="the stolr binary is not built")


def _data(n=150, d=5, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 2.0, 0.5, 1.0, 3.0]
    X[:, 2] = 1.5  # a constant column
    X[7] = X[3]  # duplicate rows
    X[8] = X[3]
    X[11] = [40.0, -35.0, 1.5, 60.0, 25.0]  # an outlier row
    y = np.sin(X[:, 0]) * 10 + X[:, 1] ** 2 + 40 + rng.normal(size=n)
    return X, y


def _cli(*args):
    result = subprocess.run([STOLR_BIN, *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _same(python, path):
    cli = np.load(path)
    python = np.asarray(python)
    if python.shape != cli.shape and python.T.shape == cli.shape:
        python = python.T
    assert python.shape == cli.shape
    assert np.array_equal(python, cli), f"largest difference {np.max(np.abs(python - cli)):.3e}"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    X, y = _data()
    folder = tmp_path_factory.mktemp("same-bits")
    np.save(folder / "x.npy", X)
    np.savetxt(folder / "train.csv", np.column_stack([X[:110], y[:110]]), delimiter=",", fmt="%.17g")
    np.savetxt(folder / "test.csv", np.column_stack([X[110:], y[110:]]), delimiter=",", fmt="%.17g")
    return folder, X, y


KPCA = {
    "exact": ([], {}),
    "exact-matrix-free": ([], {}),
    "nystrom": (["--landmarks", 60], {"n_landmarks": 60}),
    "skpca": (["--tau", 2, "--iterations", 60, "--features", 40], {"tau": 2.0, "n_iter": 60, "n_features": 40}),
    "kha": (["--iterations", 80], {"n_iter": 80}),
}


@pytest.mark.parametrize("solver", list(KPCA))
def test_kernel_pca(data, solver):
    folder, X, _ = data
    cli_args, python_args = KPCA[solver]
    center = solver != "skpca"  # SKPCA centres on one process only; both front ends run it uncentred here
    out = folder / f"kpca-{solver}"
    _cli("kpca", "--input", folder / "x.npy", "--format", "npy", "--sigma", 2, "--rank", 4, "--seed", 7,
         "--solver", solver, *(["--center"] if center else []), *cli_args, "--certify", "off", "--out", out)
    model = stolr.KernelPCA(n_components=4, gamma=0.125, solver=solver, center=center, random_state=7,
                            **python_args).fit(X)
    _same(model.eigenvalues_, out / "eigenvalues.npy")
    _same(model.eigenvectors_, out / "eigenvectors.npy")
    _same(model.transform(X[:20]), _transform(folder, out, X[:20]))


def _transform(folder, fit, rows):
    np.save(folder / "rows.npy", rows)
    out = folder / f"{fit.name}-applied"
    _cli("transform", "--model", fit, "--input", folder / "rows.npy", "--format", "npy", "--out", out)
    return out / "projections.npy"


@pytest.mark.parametrize("solver", ["exact", "svrg-bb", "vr-pca"])
def test_pca(data, solver):
    folder, X, _ = data
    out = folder / f"pca-{solver}"
    _cli("pca", "--input", folder / "x.npy", "--format", "npy", "--solver", solver, "--rank", 3, "--center",
         "--seed", 7, "--out", out)
    model = stolr.PCA(n_components=3, solver=solver, center=True, random_state=7).fit(X)
    _same(model.components_, out / "components.npy")
    assert np.array_equal(model.explained_variance_, stolr.load(out).explained_variance_)


@pytest.mark.parametrize("solver", ["capped-msg", "msg", "incremental", "oja"])
def test_streaming_pca(data, solver):
    folder, X, _ = data
    out = folder / f"stream-{solver}"
    # StreamingPCA centres by default, as the CLI's --center; oversample=0 tracks --rank directions.
    _cli("pca", "--input", folder / "x.npy", "--format", "npy", "--solver", solver, "--rank", 2, "--seed", 7,
         "--center", "--out", out)
    model = stolr.StreamingPCA(n_components=2, solver=solver, random_state=7, oversample=0).fit(X)
    _same(model.components_, out / "components.npy")
    assert np.array_equal(model.explained_variance_, stolr.load(out).explained_variance_)


@pytest.mark.parametrize("solver", ["krr", "nystrom", "slkl", "krr-subset", "uniform"])
def test_kernel_ridge(data, solver):
    folder, X, y = data
    out = folder / f"krr-{solver}"
    _cli("krr", "--train", folder / "train.csv", "--test", folder / "test.csv", "--format", "csv", "--solver", solver,
         "--sigma", 2, "--lambda", 1, "--nu", 0.01, "--landmarks", 40, "--no-standardize", "--seed", 7, "--out", out)
    model = stolr.KernelRidge(solver=solver, alpha=1.0, gamma=0.125, n_landmarks=40, nu=0.01,
                              random_state=7).fit(X[:110], y[:110])
    _same(model.predict(X[110:]), out / "predictions.npy")


@pytest.mark.parametrize("solver", ["slkl", "uniform"])
def test_kernel_ridge_with_nu_cross_validated(data, solver):
    # nu='auto' is the CLI's --nu auto: the same job chooses the same nu, so the same model.
    folder, X, y = data
    out = folder / f"krr-{solver}-nu-auto"
    _cli("krr", "--train", folder / "train.csv", "--test", folder / "test.csv", "--format", "csv", "--solver", solver,
         "--sigma", 2, "--lambda", 1, "--nu", "auto", "--landmarks", 40, "--no-standardize", "--seed", 7, "--out", out)
    model = stolr.KernelRidge(solver=solver, alpha=1.0, gamma=0.125, n_landmarks=40, nu="auto",
                              random_state=7).fit(X[:110], y[:110])
    _same(model.predict(X[110:]), out / "predictions.npy")


def test_kernel_ridge_refuses_nu_auto_without_nu():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="nu='auto' applies to slkl and uniform"):
        stolr.KernelRidge(solver="nystrom", nu="auto").fit(X, y)
