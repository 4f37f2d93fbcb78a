"""scikit-learn's KernelRidge on the same split, features and kernel as a Stolr run, for scale.

Reads the already standardized training and test sets written by `slkl-reproduce`
(train_x.npy, train_y.npy, test_x.npy, test_y.npy, and optionally landmarks.npy), fits
KernelRidge(alpha=lambda, kernel="rbf", gamma=1/(2 sigma^2)) on all training points (KRR_n) or on
the landmark rows only (KRR_M), and prints one JSON line: test MSE, fit and predict time, peak
resident memory of this process (ru_maxrss, which includes the Python interpreter and numpy).

Usage: python3 sklearn_krr.py --dir DIR --sigma S [--lambda L] [--subset]
"""
import argparse
import json
import os
import resource
import time

import numpy as np
from sklearn.kernel_ridge import KernelRidge


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--sigma", type=float, required=True)
    p.add_argument("--lambda", dest="lam", type=float, default=1.0)
    p.add_argument("--subset", action="store_true", help="train on the rows of landmarks.npy only")
    a = p.parse_args()
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
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
