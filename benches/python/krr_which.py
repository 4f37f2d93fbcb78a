"""SLKL against Nyström KRR (and scikit-learn's Nystroem + Ridge) on one held-out regression
task: test MSE, fit time, centres in the predictor and prediction time, for docs/krr.md.

Usage: python3 benches/python/krr_which.py --stolr target/release/stolr --train T.csv --test S.csv
(CSV, target in the last column). Stolr runs through its CLI (standardized features, σ from its
width rule, printed); scikit-learn uses the same standardization, γ = 1/(2σ²) and alpha = λ.
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np


def stolr_run(binary, train, test, args, out):
    cmd = [binary, "krr", "--train", train, "--test", test, "--format", "csv", "--seed", "1", "--out", out] + args
    subprocess.run(cmd, check=True, capture_output=True)
    with open(os.path.join(out, "report.json")) as f:
        r = json.load(f)
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stolr", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--lambda", dest="lam", type=float, default=1.0)
    a = p.parse_args()
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler

    tr, te = np.loadtxt(a.train, delimiter=","), np.loadtxt(a.test, delimiter=",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = ["--lambda", str(a.lam)]
        runs = [
            ("krr (no intercept)", ["--solver", "krr", "--no-intercept"]),
            ("krr", ["--solver", "krr"]),
            ("nystrom M=200", ["--solver", "nystrom", "--landmarks", "200"]),
            ("nystrom M=500", ["--solver", "nystrom", "--landmarks", "500"]),
            ("slkl M=200 nu auto", ["--solver", "slkl", "--landmarks", "200", "--nu", "auto"]),
            ("slkl M=500 nu auto", ["--solver", "slkl", "--landmarks", "500", "--nu", "auto"]),
        ]
        sigma = None
        for name, extra in runs:
            out = os.path.join(tmp, str(len(rows)))
            t = time.perf_counter()
            r = stolr_run(a.stolr, a.train, a.test, base + extra, out)
            wall = time.perf_counter() - t
            sigma = r["kernel"]["sigma"]
            res, tim = r["result"], r["timings_s"]
            rows.append({"method": "stolr " + name, "test_mse": res["test_mse"], "fit_s": tim["fit"],
                         "nu_selection_s": tim.get("nu_selection", 0.0), "centres": res["centres"],
                         "predict_s": tim["predict"], "wall_s": wall})
        scaler = StandardScaler().fit(tr[:, :-1])
        xtr, xte = scaler.transform(tr[:, :-1]), scaler.transform(te[:, :-1])
        gamma = 1.0 / (2.0 * sigma * sigma)
        for m in (200, 500):
            mses, fits = [], []
            for seed in range(8):
                t = time.perf_counter()
                ny = Nystroem(gamma=gamma, n_components=m, random_state=seed).fit(xtr)
                model = Ridge(alpha=a.lam).fit(ny.transform(xtr), tr[:, -1])
                fits.append(time.perf_counter() - t)
                t = time.perf_counter()
                pred = model.predict(ny.transform(xte))
                mses.append(float(np.mean((pred - te[:, -1]) ** 2)))
            rows.append({"method": f"sklearn Nystroem({m}) + Ridge, 8 seeds", "test_mse": float(np.mean(mses)),
                         "test_mse_sd": float(np.std(mses)), "fit_s": float(np.median(fits)), "centres": m})
    print(json.dumps({"sigma": sigma, "lambda": a.lam, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
