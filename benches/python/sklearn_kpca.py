"""scikit-learn's KernelPCA on the same data and kernel as a `stolr kpca` run, for comparison.

Writes eigenvalues.npy, eigenvectors.npy and a report.json in the layout of `stolr kpca --out`,
so that `kpca-eval` / `kpca-bench` evaluate it with the same metric. scikit-learn always centres
in feature space, so compare with `stolr kpca --center`.

Usage: python3 sklearn_kpca.py --input FILE --format libsvm|magic|kdd-csv [--standardize]
           --sigma S --rank R --eigen-solver arpack|randomized|dense --out DIR
"""
import argparse
import json
import os
import resource
import time

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.decomposition import KernelPCA
from sklearn.preprocessing import StandardScaler


def load(path, fmt):
    if fmt == "libsvm":
        x, _ = load_svmlight_file(path)
        return np.asarray(x.todense(), dtype=np.float64)
    if fmt == "magic":
        return np.loadtxt(path, delimiter=",", usecols=range(10), dtype=np.float64)
    if fmt == "kdd-csv":
        # KDD Cup 99 as `stolr kpca --format csv --categorical 2,3,4 --label-column 42` reads it:
        # columns 2-4 one-hot, column 42 (the label) dropped.
        import pandas as pd
        frame = pd.read_csv(path, header=None)
        frame = frame.drop(columns=[41])
        frame = pd.get_dummies(frame, columns=[1, 2, 3], dtype=np.float64)
        return frame.to_numpy(dtype=np.float64)
    raise SystemExit(f"unknown format {fmt}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--format", required=True)
    p.add_argument("--standardize", action="store_true")
    p.add_argument("--sigma", type=float, required=True)
    p.add_argument("--rank", type=int, default=50)
    p.add_argument("--eigen-solver", default="arpack")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    t0 = time.perf_counter()
    x = load(a.input, a.format)
    if a.standardize:
        x = StandardScaler().fit_transform(x)
    t1 = time.perf_counter()
    kpca = KernelPCA(n_components=a.rank, kernel="rbf", gamma=1.0 / (2.0 * a.sigma**2),
                     eigen_solver=a.eigen_solver, random_state=0)
    kpca.fit(x)
    t2 = time.perf_counter()
    values = np.asarray(kpca.eigenvalues_, dtype=np.float64)
    vectors = np.ascontiguousarray(kpca.eigenvectors_, dtype=np.float64)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "eigenvalues.npy"), values)
    np.save(os.path.join(a.out, "eigenvectors.npy"), vectors)
    report = {
        "command": "sklearn KernelPCA",
        "solver": f"sklearn-{a.eigen_solver}",
        "dataset": {"source": a.input, "origin": "file", "format": a.format, "n": x.shape[0],
                    "d": x.shape[1], "standardized": a.standardize},
        "kernel": {"type": "gaussian", "sigma": a.sigma},
        "centered": True,
        "result": {"rank": int(values.size), "eigenvalues": values.tolist(), "rank_trajectory": []},
        "timings_s": {"read": t1 - t0, "solve": t2 - t1, "total": t2 - t0, "per_iteration_ms": None},
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({"solver": report["solver"], "solve_s": t2 - t1, "lambda_1": float(values[0])}))


if __name__ == "__main__":
    main()
