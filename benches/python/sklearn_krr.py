"""scikit-learn's kernel ridge regression on the same data, features and kernel as a Stolr run.

Two modes.

[SLKL] (paper 004, `slkl-reproduce`): reads the already standardized training and test sets written by
`slkl-reproduce` (train_x.npy, train_y.npy, test_x.npy, test_y.npy, and optionally
landmarks.npy), fits KernelRidge(alpha=lambda, kernel="rbf", gamma=1/(2 sigma^2)) on all
training points (KRR_n) or on the landmark rows only (KRR_M), and prints one JSON line: test MSE,
fit and predict time, peak resident memory of this process (ru_maxrss, which includes the Python
interpreter and numpy).

    python3 sklearn_krr.py --dir DIR --sigma S [--lambda L] [--subset]

Scale (`cargo xtask bench krr-scale`): reads the CSV files Stolr reads (features, target in the
last column, no header), fits one of

- `nystroem`: Nystroem(kernel="rbf", gamma=1/(2 sigma^2), n_components=M, random_state=SEED)
  followed by Ridge(alpha=lambda) (with its intercept), the low-rank baseline users reach for;
- `kernel-ridge`: KernelRidge(alpha=lambda, kernel="rbf", gamma) on the centred targets, the
  training mean added back to the predictions (Stolr's intercept; KernelRidge has none),

and writes DIR/report.json with the fields the benchmark reads from Stolr's reports:
timings_s.fit (Nystroem's fit and transform of the training rows plus Ridge's fit, or
KernelRidge's fit), result.test_mse, peak_memory_bytes (ru_maxrss: interpreter, numpy, the
parsed CSV files included).

    python3 sklearn_krr.py --train CSV --test CSV --method nystroem|kernel-ridge --sigma S
        --lambda L [--components M] [--seed SEED] --out DIR

In both, lambda is Stolr's: the system is (K + lambda I) alpha = y, so it multiplies the squared
norm against the sum (not the mean) of squared errors, exactly scikit-learn's alpha.
"""
import argparse
import json
import os
import resource
import time

import numpy as np
from sklearn.kernel_ridge import KernelRidge


def peak_bytes():
    """Peak resident memory of this process in bytes (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def paper004(a):
    load = lambda name: np.load(os.path.join(a.dir, name))
    x, y, xt, yt = load("train_x.npy"), load("train_y.npy"), load("test_x.npy"), load("test_y.npy")
    if a.subset:
        idx = load("landmarks.npy")
        x, y = x[idx], y[idx]
    model = KernelRidge(alpha=a.lam, kernel="rbf", gamma=1.0 / (2.0 * a.sigma ** 2))
    t0 = time.perf_counter()
    model.fit(x, y)
    t1 = time.perf_counter()
    pred = model.predict(xt)
    t2 = time.perf_counter()
    print(json.dumps({
        "method": "sklearn KernelRidge" + (" (landmarks only)" if a.subset else ""),
        "n_train": int(x.shape[0]),
        "test_mse": float(np.mean((pred - yt) ** 2)),
        "fit_s": t1 - t0,
        "predict_s": t2 - t1,
        "peak_memory_bytes": peak_bytes(),
    }))


def read_csv(path):
    """Features (n, d) and targets (n,) of a CSV file whose last column is the target."""
    table = np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64)
    return np.ascontiguousarray(table[:, :-1]), np.ascontiguousarray(table[:, -1])


def scale(a):
    import sklearn
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge

    start = time.perf_counter()
    x, y = read_csv(a.train)
    xt, yt = read_csv(a.test)
    read_s = time.perf_counter() - start
    gamma = 1.0 / (2.0 * a.sigma ** 2)
    if a.method == "nystroem":
        if a.components is None:
            raise SystemExit("--method nystroem needs --components M")
        t0 = time.perf_counter()
        features = Nystroem(kernel="rbf", gamma=gamma, n_components=a.components, random_state=a.seed)
        z = features.fit_transform(x)
        ridge = Ridge(alpha=a.lam).fit(z, y)
        fit_s = time.perf_counter() - t0
        del z
        t1 = time.perf_counter()
        pred = ridge.predict(features.transform(xt))
        predict_s = time.perf_counter() - t1
        solver = "sklearn Nystroem + Ridge"
    elif a.method == "kernel-ridge":
        t0 = time.perf_counter()
        mean = float(np.mean(y))
        model = KernelRidge(alpha=a.lam, kernel="rbf", gamma=gamma).fit(x, y - mean)
        fit_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        pred = model.predict(xt) + mean
        predict_s = time.perf_counter() - t1
        solver = "sklearn KernelRidge (centred targets)"
    else:
        raise SystemExit(f"unknown --method {a.method} (nystroem or kernel-ridge)")
    report = {
        "command": "sklearn_krr.py",
        "solver": solver,
        "versions": {"sklearn": sklearn.__version__, "numpy": np.__version__},
        "dataset": {"train_source": a.train, "test_source": a.test, "n_train": int(x.shape[0]),
                    "n_test": int(xt.shape[0]), "d": int(x.shape[1])},
        "kernel": {"kind": "gaussian", "sigma": a.sigma, "gamma": gamma},
        "parameters": {"method": a.method, "landmarks": a.components, "lambda": a.lam, "seed": a.seed},
        "result": {"test_mse": float(np.mean((pred - yt) ** 2))},
        "timings_s": {"read": read_s, "fit": fit_s, "predict": predict_s,
                      "total": time.perf_counter() - start},
        "peak_memory_bytes": peak_bytes(),
    }
    os.makedirs(a.out, exist_ok=True)
    tmp = os.path.join(a.out, "report.json.tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(a.out, "report.json"))
    print(json.dumps({"solver": solver, "n_train": int(x.shape[0]), **report["result"], "fit_s": fit_s,
                      "peak_memory_bytes": report["peak_memory_bytes"]}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", help="paper 004 mode: the folder of .npy files")
    p.add_argument("--train", help="scale mode: training CSV (target last)")
    p.add_argument("--test", help="scale mode: test CSV (target last)")
    p.add_argument("--method", choices=["nystroem", "kernel-ridge"], default="nystroem")
    p.add_argument("--components", type=int, help="Nystroem's n_components M")
    p.add_argument("--seed", type=int, default=0, help="Nystroem's random_state")
    p.add_argument("--out", help="scale mode: the folder of report.json")
    p.add_argument("--sigma", type=float, required=True)
    p.add_argument("--lambda", dest="lam", type=float, default=1.0)
    p.add_argument("--subset", action="store_true", help="paper 004: train on the rows of landmarks.npy only")
    a = p.parse_args()
    if a.dir is not None:
        paper004(a)
    elif a.train is not None and a.test is not None and a.out is not None:
        scale(a)
    else:
        p.error("give --dir (paper 004) or --train, --test and --out (scale)")


if __name__ == "__main__":
    main()
