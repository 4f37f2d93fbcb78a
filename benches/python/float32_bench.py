"""Float32 input kept as float32 (issue 23, Deliver 2): peak memory and time of each fit on a
float32 array against the same values in float64, and against scikit-learn on the float32
array, each in its own fresh process.

Usage (normally through `cargo xtask bench float32`, which builds the CLI first):

    python3 benches/python/float32_bench.py --stolr target/release/stolr
        [--n 200000] [--d 256] [--landmarks 500] [--repeats 3] [--seed 0]
        [--out target/bench/float32] [--quick]

The data: n x d standard normal values drawn in float32 (seeded), a constant column, an offset
of 1e3 on another, an outlier row and duplicate rows, written once to a float32 `.npy` file and
to a float64 `.npy` file of the same values (a temporary folder, deleted at the end). Each
contestant loads its own file (so the process holds B bytes of input before the fit) and fits:

- `pca`: stolr.PCA (exact, 8 components) / scikit-learn PCA(svd_solver="covariance_eigh");
- `streaming`: stolr.StreamingPCA (incremental, 8) / scikit-learn IncrementalPCA(batch 1000);
- `kpca-nystrom`: stolr.KernelPCA(solver="nystrom") on n/4 rows / scikit-learn
  Nystroem + PCA (the same decomposition, its own landmarks);
- `krr-nystrom`: stolr.KernelRidge(solver="nystrom") on n/4 rows (scikit-learn has no Nystrom
  KRR estimator: not run);
- `cli-pca`: `stolr pca --solver exact --format npy` on each file (peak RSS of the process).

Reported per contestant: median wall time of the fit, median peak RSS of the process, and
"extra" = peak RSS minus the RSS after loading the input (what the fit adds to the B bytes the
user already holds). Ratios: float32 against float64 (the same library), Stolr float32 against
scikit-learn float32. The repeats alternate the contestants so that a slow spell of the shared
machine hits each alike.
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

GENERATE = r'''
import sys
import numpy as np
n, d, seed, p32, p64 = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rng = np.random.default_rng(seed)
X = rng.standard_normal((n, d), dtype=np.float32)
X[:, 0] = 0.5
X[:, 1] += 1e3
X[0] = 40.0 * X[0] + 25.0
X[n // 2: n // 2 + n // 100] = X[1: 1 + n // 100]
np.save(p32, X)
np.save(p64, X.astype(np.float64))
'''

FIT = r'''
import json, resource, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
work, path, landmarks = sys.argv[1], sys.argv[2], int(sys.argv[3])
X = np.load(path)
if work in ("kpca-nystrom", "krr-nystrom"):
    X = np.ascontiguousarray(X[: X.shape[0] // 4])
y = None
if work == "krr-nystrom":
    y = np.sin(X[:, 2].astype(np.float64)) + 0.1 * X[:, 3]
lib = sys.argv[4]
# Both libraries imported before the measurement: only the fit is timed and counted.
import stolr
from sklearn.decomposition import PCA, IncrementalPCA
from sklearn.kernel_approximation import Nystroem
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if lib == "stolr":
    if work == "pca":
        stolr.PCA(n_components=8).fit(X)
    elif work == "streaming":
        stolr.StreamingPCA(n_components=8, solver="incremental").fit(X)
    elif work == "kpca-nystrom":
        stolr.KernelPCA(n_components=8, solver="nystrom", n_landmarks=landmarks, gamma=1.0 / X.shape[1]).fit(X)
    elif work == "krr-nystrom":
        stolr.KernelRidge(solver="nystrom", n_landmarks=landmarks, gamma=1.0 / X.shape[1], alpha=0.1).fit(X, y)
else:
    if work == "pca":
        PCA(n_components=8, svd_solver="covariance_eigh").fit(X)
    elif work == "streaming":
        IncrementalPCA(n_components=8, batch_size=1000).fit(X)
    elif work == "kpca-nystrom":
        F = Nystroem(gamma=1.0 / X.shape[1], n_components=landmarks, random_state=0).fit_transform(X)
        PCA(n_components=8).fit(F)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "before_kb": before, "peak_kb": peak}))
'''


def run_child(code_args):
    """Runs python3 with `code_args`; returns the JSON it prints."""
    out = subprocess.run([sys.executable, *code_args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cli(stolr, path, outdir):
    """`stolr pca --solver exact --format npy` on `path`: (seconds, peak RSS in KB)."""
    t = time.perf_counter()
    pid = subprocess.Popen([stolr, "pca", "--solver", "exact", "--rank", "8", "--center", "--format", "npy",
                            "--input", path, "--out", outdir], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(pid.pid, 0)
    if status != 0:
        raise SystemExit(f"stolr pca failed on {path}")
    return time.perf_counter() - t, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stolr", required=True)
    parser.add_argument("--n", type=int, default=200000)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--landmarks", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="target/bench/float32")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats, args.landmarks = 20000, 1, 200
    tmp = tempfile.mkdtemp(prefix="stolr-float32-")
    try:
        p32, p64 = os.path.join(tmp, "x32.npy"), os.path.join(tmp, "x64.npy")
        subprocess.run([sys.executable, "-c", GENERATE, str(args.n), str(args.d), str(args.seed), p32, p64], check=True)
        contestants = []
        for work in ["pca", "streaming", "kpca-nystrom", "krr-nystrom"]:
            contestants += [(work, "stolr", "float32", p32), (work, "stolr", "float64", p64)]
            if work != "krr-nystrom":
                contestants.append((work, "sklearn", "float32", p32))
        contestants += [("cli-pca", "stolr", "float32", p32), ("cli-pca", "stolr", "float64", p64)]
        runs = {c[:3]: [] for c in contestants}
        for _ in range(args.repeats):
            for work, lib, dtype, path in contestants:
                if work == "cli-pca":
                    seconds, peak = run_cli(args.stolr, path, os.path.join(tmp, "out"))
                    runs[(work, lib, dtype)].append({"seconds": seconds, "peak_kb": peak, "before_kb": None})
                else:
                    runs[(work, lib, dtype)].append(run_child(["-c", FIT, work, path, str(args.landmarks), lib]))
        rows = []
        for (work, lib, dtype), rs in runs.items():
            med = lambda key: statistics.median(r[key] for r in rs)
            extra = None if rs[0]["before_kb"] is None else statistics.median(r["peak_kb"] - r["before_kb"] for r in rs)
            rows.append({"work": work, "library": lib, "dtype": dtype, "seconds": med("seconds"),
                         "peak_mb": med("peak_kb") / 1024, "extra_mb": None if extra is None else extra / 1024})
        by = {(r["work"], r["library"], r["dtype"]): r for r in rows}
        lines = ["| workload | library | dtype | fit s | peak MB | extra MB | time vs f64 | peak vs f64 | time vs sklearn f32 | peak vs sklearn f32 |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            f64 = by.get((r["work"], r["library"], "float64"))
            sk = by.get((r["work"], "sklearn", "float32"))
            ratio = lambda a, b, k: "" if b is None or r is b else f"{a[k] / b[k]:.2f}"
            extra = "" if r["extra_mb"] is None else f"{r['extra_mb']:.0f}"
            lines.append(f"| {r['work']} | {r['library']} | {r['dtype']} | {r['seconds']:.2f} | {r['peak_mb']:.0f} | {extra} | "
                         f"{ratio(r, f64, 'seconds')} | {ratio(r, f64, 'peak_mb')} | "
                         f"{ratio(r, sk, 'seconds') if r['library'] == 'stolr' else ''} | "
                         f"{ratio(r, sk, 'peak_mb') if r['library'] == 'stolr' else ''} |")
        table = "\n".join(lines)
        print(f"n = {args.n}, d = {args.d} (float32 input {args.n * args.d * 4 / 2**20:.0f} MB; kernel fits on n/4 rows), "
              f"{args.repeats} alternating repeats, medians\n")
        print(table)
        os.makedirs(args.out, exist_ok=True)
        meta = {"n": args.n, "d": args.d, "landmarks": args.landmarks, "repeats": args.repeats,
                "machine": platform.platform(), "cpus": os.cpu_count()}
        with open(os.path.join(args.out, "float32.json"), "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "float32.md"), "w") as f:
            f.write(table + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
