"""Stolr on a sparse LIBSVM file against the same file read dense and against scikit-learn on
the sparse (CSR) matrix: wall time, peak RSS and the agreement of the eigenvalues (issue 23,
Deliver 7).

Usage (normally through `cargo xtask bench sparse`, which builds the CLI first):

    python3 benches/python/sparse_bench.py --stolr target/release/stolr
        [--n 20000] [--d 10000] [--density 0.01] [--exact-n 4000] [--landmarks 500]
        [--rank 10] [--repeats 3] [--seed 0] [--dense-memory-limit 8G] [--out target/bench/sparse]
        [--quick]

The data: a seeded random sparse matrix (n x d, every entry stored with probability
`--density`, values uniform in [0, 1)), with one outlier row (row 0: ten times the density,
values up to 100) and duplicate rows (1 % of the rows repeat an earlier row), written as LIBSVM
text into a temporary folder (deleted at the end; never committed). The exact solver runs on the
first `--exact-n` rows (where the dense n x n kernel matrix fits), Nystrom with `--landmarks`
columns on all n rows. Kernel: Gaussian, sigma = sqrt(median squared row norm), i.e. scikit-learn's
gamma = 1 / (2 sigma^2); centred in feature space; `--rank` eigenpairs.

Contestants, each run in its own fresh process:
- `stolr-sparse`: `stolr kpca --sparse` (rows kept in CSR form);
- `stolr-dense`: `stolr kpca` on the same file (rows densified, n x d float64);
- `sklearn`: scikit-learn on the CSR matrix from `load_svmlight_file`. Exact: `KernelPCA(
  kernel="rbf", eigen_solver="dense")` (LAPACK's partial symmetric eigensolver on the centred
  n x n kernel matrix, the counterpart of Stolr's dense exact solver). Nystrom: `Nystroem(
  n_components=M)` + `PCA` of the features, whose squared singular values are the eigenvalues
  of the centred Nystrom approximation H K_nm K_mm^+ K_mn H, the matrix Stolr's Nystrom solver
  decomposes (checked equal to 1e-12 when every row is a landmark); the landmarks are drawn by
  different generators, so the Nystrom eigenvalues agree only up to the approximation error.

The repeats alternate the contestants (A B C A B C ...) so that a slow spell of this shared
machine hits each of them alike. Every process is started through `/usr/bin/time -f %M` when
present (else its rusage from os.wait4): peak RSS of that process alone. Reported: the medians
of wall time and peak RSS, ratios against the dense run and against scikit-learn measured in the
same run, and the largest relative eigenvalue difference max_i |a_i - b_i| / |b_i| of each
contestant against the dense run and against scikit-learn. Writes sparse.json and sparse.md
into --out and prints the table.

The harness process imports no numpy (the data is generated in a child process), so that the
pages of a large parent cannot leak into a child's peak RSS through fork.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import measure

GENERATE = r'''
import json, sys
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
n, d, density, seed, exact_n, full_path, exact_path = sys.argv[1:]
n, d, density, seed, exact_n = int(n), int(d), float(density), int(seed), int(exact_n)
rng = np.random.default_rng(seed)
X = sp.random(n, d, density=density, format="lil", random_state=rng, data_rvs=rng.random)
# Row 0 is an outlier: ten times the density, values up to 100.
k = min(d, max(1, int(round(10 * density * d))))
cols = np.sort(rng.choice(d, size=k, replace=False))
X[0, :] = 0
X[0, cols] = 100.0 * rng.random(k)
X = X.tocsr()
# 1 % of the rows (at least two) repeat an earlier row, spread over the file (so the exact
# subset has its share too).
dup = max(2, n // 100)
targets = rng.choice(np.arange(1, n), size=dup, replace=False)
rows = np.arange(n)
for t in targets:
    rows[t] = rng.integers(0, t)
X = X[rows].tocsr()
X.sort_indices()
y = rng.integers(0, 2, size=n).astype(np.float64)
dump_svmlight_file(X, y, full_path, zero_based=False)
dump_svmlight_file(X[:exact_n], y[:exact_n], exact_path, zero_based=False)
sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
print(json.dumps({"nnz": int(X.nnz), "nnz_exact": int(X[:exact_n].nnz),
                  "d_max_index": int(X.indices.max()) + 1,
                  "median_sq_norm": float(np.median(sq)), "duplicates": int(dup)}))
'''

SKLEARN = r'''
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from sklearn.datasets import load_svmlight_file
solver, path, d, rank, gamma, landmarks, seed = sys.argv[1:]
d, rank, gamma, landmarks, seed = int(d), int(rank), float(gamma), int(landmarks), int(seed)
t1 = time.perf_counter()
X, _ = load_svmlight_file(path, n_features=d)
X = X.tocsr()
t2 = time.perf_counter()
if solver == "exact":
    from sklearn.decomposition import KernelPCA
    model = KernelPCA(n_components=rank, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(X)
    eig = model.eigenvalues_
else:
    from sklearn.kernel_approximation import Nystroem
    from sklearn.decomposition import PCA
    features = Nystroem(kernel="rbf", gamma=gamma, n_components=landmarks, random_state=seed).fit_transform(X)
    pca = PCA(n_components=rank, svd_solver="full").fit(features)
    eig = pca.singular_values_ ** 2
t3 = time.perf_counter()
print(json.dumps({"eigenvalues": [float(v) for v in eig],
                  "timings_s": {"import": t1 - t0, "read": t2 - t1, "solve": t3 - t2}}))
'''

CONTESTANTS = ["stolr-sparse", "stolr-dense", "sklearn"]


def run_stolr(stolr, contestant, solver, path, args, workdir):
    out = os.path.join(workdir, f"out-{contestant}-{solver}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [stolr, "kpca", "--input", path, "--format", "libsvm", "--kernel", "gaussian",
           "--sigma", repr(args.sigma), "--center", "--rank", str(args.rank), "--certify", "off",
           "--seed", str(args.seed), "--solver", solver, "--out", out]
    if solver == "nystrom":
        cmd += ["--landmarks", str(args.landmarks)]
    if contestant == "stolr-sparse":
        cmd.append("--sparse")
    else:
        cmd += ["--memory-limit", args.dense_memory_limit]
    wall, peak, _ = measure(cmd)
    report = json.load(open(os.path.join(out, "report.json")))
    shutil.rmtree(out, ignore_errors=True)
    t = report["timings_s"]
    return {"wall_s": wall, "peak_rss_bytes": peak, "eigenvalues": report["result"]["eigenvalues"],
            "timings_s": {"read": t.get("read"), "solve": t.get("solve")},
            "reported_peak_memory_bytes": report.get("peak_memory_bytes")}


def run_sklearn(solver, path, args):
    cmd = [sys.executable, "-c", SKLEARN, solver, path, str(args.d), str(args.rank), repr(args.gamma),
           str(args.landmarks), str(args.seed)]
    wall, peak, out = measure(cmd)
    r = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "peak_rss_bytes": peak, "eigenvalues": r["eigenvalues"], "timings_s": r["timings_s"]}


def max_rel_diff(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def summarize(runs):
    """Medians per contestant, ratios and eigenvalue agreement of one solver's runs."""
    rows = {}
    for c in CONTESTANTS:
        rs = runs[c]
        rows[c] = {
            "wall_s_median": statistics.median(r["wall_s"] for r in rs),
            "peak_rss_bytes_median": statistics.median(r["peak_rss_bytes"] for r in rs),
            "read_s_median": statistics.median(r["timings_s"]["read"] for r in rs),
            "solve_s_median": statistics.median(r["timings_s"]["solve"] for r in rs),
            "work_s_median": statistics.median(r["timings_s"]["read"] + r["timings_s"]["solve"] for r in rs),
            "wall_s": [r["wall_s"] for r in rs],
            "peak_rss_bytes": [r["peak_rss_bytes"] for r in rs],
            "eigenvalues": rs[0]["eigenvalues"],
        }
    for c in CONTESTANTS:
        row = rows[c]
        for ref in ["stolr-dense", "sklearn"]:
            row[f"time_vs_{ref}"] = row["wall_s_median"] / rows[ref]["wall_s_median"]
            row[f"work_vs_{ref}"] = row["work_s_median"] / rows[ref]["work_s_median"]
            row[f"rss_vs_{ref}"] = row["peak_rss_bytes_median"] / rows[ref]["peak_rss_bytes_median"]
            row[f"eig_rel_diff_vs_{ref}"] = max_rel_diff(row["eigenvalues"], rows[ref]["eigenvalues"])
        # Repeats of one contestant must give the same eigenvalues (deterministic given the seed).
        row["eig_rel_spread_over_repeats"] = max(max_rel_diff(r["eigenvalues"], runs[c][0]["eigenvalues"])
                                                 for r in runs[c])
    return rows


def markdown(result):
    p = result["parameters"]
    lines = [
        f"n = {p['n']} (exact: first {p['exact_n']} rows), d = {p['d']}, density {p['density']} "
        f"({result['data']['nnz']} stored entries; exact subset {result['data']['nnz_exact']}), "
        f"Gaussian sigma = {p['sigma']:.6g} (gamma = {p['gamma']:.6g}), centred, rank {p['rank']}, "
        f"Nystrom M = {p['landmarks']}; median of {p['repeats']} alternating repeats, each a fresh process.",
        "",
        "| solver | contestant | wall (s) | read + solve (s) | peak RSS (MB) | wall / dense | RSS / dense "
        "| wall / sklearn | read + solve / sklearn | RSS / sklearn | eig. rel. diff vs dense | eig. rel. diff vs sklearn |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for solver, rows in result["solvers"].items():
        for c in CONTESTANTS:
            r = rows[c]
            lines.append(
                f"| {solver} | {c} | {r['wall_s_median']:.2f} | {r['work_s_median']:.2f} "
                f"| {r['peak_rss_bytes_median'] / 1e6:.0f} | {r['time_vs_stolr-dense']:.2f} | {r['rss_vs_stolr-dense']:.2f} "
                f"| {r['time_vs_sklearn']:.2f} | {r['work_vs_sklearn']:.2f} | {r['rss_vs_sklearn']:.2f} "
                f"| {r['eig_rel_diff_vs_stolr-dense']:.1e} | {r['eig_rel_diff_vs_sklearn']:.1e} |")
    lines.append("")
    lines.append("wall: the whole process (start, imports, read, solve, write); read + solve: the "
                 "process's own timings of reading the file and fitting (scikit-learn: load_svmlight_file, "
                 "then fit; without the Python start and imports). Eigenvalue differences: "
                 "max_i |a_i - b_i| / |b_i| over the leading eigenvalues; Nystrom against scikit-learn "
                 "differs by the landmark draw.")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stolr", default="target/release/stolr")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--d", type=int, default=10000)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--exact-n", type=int, default=4000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dense-memory-limit", default="8G")
    ap.add_argument("--solvers", default="exact,nystrom")
    ap.add_argument("--out", default="target/bench/sparse")
    ap.add_argument("--quick", action="store_true", help="n = 300, d = 500, density 0.02, exact on 200 rows, M = 50, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.n, args.d, args.density, args.exact_n, args.landmarks, args.rank, args.repeats = 300, 500, 0.02, 200, 50, 5, 1
    for name in ["n", "d", "exact_n", "landmarks", "rank", "repeats"]:
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 < args.density <= 1:
        ap.error("--density must be in (0, 1]")
    args.exact_n = min(args.exact_n, args.n)
    if args.landmarks > args.n:
        ap.error("--landmarks must not exceed --n")
    if not os.path.exists(args.stolr):
        ap.error(f"no stolr binary at {args.stolr} (cargo build --release -p stolr-cli)")
    solvers = [s for s in args.solvers.split(",") if s]
    if any(s not in ("exact", "nystrom") for s in solvers):
        ap.error("--solvers takes exact and/or nystrom")
    os.makedirs(args.out, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="stolr-sparse-bench-") as workdir:
        full = os.path.join(workdir, "sparse.libsvm")
        exact = os.path.join(workdir, "sparse-exact.libsvm")
        t = time.perf_counter()
        gen = subprocess.run([sys.executable, "-c", GENERATE, str(args.n), str(args.d), str(args.density),
                              str(args.seed), str(args.exact_n), full, exact],
                             check=True, capture_output=True, text=True)
        data = json.loads(gen.stdout.strip().splitlines()[-1])
        data["file_bytes"] = os.path.getsize(full)
        print(f"generated {full}: {data['nnz']} stored entries, {data['file_bytes'] / 1e6:.0f} MB "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        # Gaussian bandwidth from the data: 2 sigma^2 = twice the median squared row norm (about
        # the squared distance between two sparse rows with few shared columns; the median, so
        # that the outlier row does not set it).
        args.sigma = (data["median_sq_norm"]) ** 0.5
        args.gamma = 1.0 / (2.0 * args.sigma ** 2)
        result = {
            "parameters": {k: getattr(args, k) for k in ["n", "d", "density", "exact_n", "landmarks", "rank",
                                                          "repeats", "seed", "dense_memory_limit", "sigma", "gamma"]},
            "data": data,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "load_average_start": os.getloadavg()},
            "sklearn_counterpart": {"exact": "KernelPCA(kernel='rbf', eigen_solver='dense')",
                                    "nystrom": "Nystroem(n_components=M) + PCA(svd_solver='full'); eigenvalues = singular_values_**2"},
            "solvers": {},
        }
        for solver in solvers:
            path = exact if solver == "exact" else full
            runs = {c: [] for c in CONTESTANTS}
            for rep in range(args.repeats):
                for c in CONTESTANTS:
                    r = run_sklearn(solver, path, args) if c == "sklearn" else run_stolr(args.stolr, c, solver, path, args, workdir)
                    runs[c].append(r)
                    print(f"{solver} repeat {rep + 1}/{args.repeats} {c}: {r['wall_s']:.2f} s, "
                          f"{r['peak_rss_bytes'] / 1e6:.0f} MB", file=sys.stderr)
            result["solvers"][solver] = summarize(runs)
        result["machine"]["load_average_end"] = os.getloadavg()

    md = markdown(result)
    with open(os.path.join(args.out, "sparse.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "sparse.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
