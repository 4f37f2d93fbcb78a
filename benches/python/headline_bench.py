"""The headline numbers (issue 26, Deliver 7): every row beside its anchor (scikit-learn where it
runs, the flop count where it does not), in one process order, repeated, with medians and the
ratio to the limit (the row's flop count at this machine's measured dgemm rate).

Usage (normally through `cargo xtask bench headline`, which builds the CLI first):

    python3 benches/python/headline_bench.py --stolr target/release/stolr
        [--data DIR] [--repeats 3] [--only ROW[,ROW]] [--time-cap 900] [--seed 0]
        [--out target/bench/headline] [--quick] [--publish]

The `pca-exact` row imports the `stolr` Python package (put it on PYTHONPATH) and scikit-learn.

Rows (full size; `--quick` in brackets):

1. `pca-exact`: exact PCA of MNIST train + t10k (70 000 x 784, scaled to [0, 1]; [first
   20 000]), 8 components. One Python worker per repeat loads the rows once, fits each library
   once untimed, then alternates `stolr.PCA(n_components=8, solver="exact").fit(X)` and
   scikit-learn's `PCA(n_components=8, svd_solver="covariance_eigh").fit(X)` (2 [1] timed
   pairs). Beside it `stolr pca --solver exact --rank 8 --center` on the same rows (a `.npy`
   file), its solve time from report.json: the ratio Python over CLI.
   Limit: the symmetric XᵀX, n·d(d+1)/2 multiply-adds.
2. `krr-nystrom-1e6`: `stolr krr --solver nystrom --nystrom-solver direct` on generated
   Friedman #1, n = 10⁶ [10⁵], M = 2000, λ = 0.01. Limit: n·M²/2 (the symmetric K_Mn K_nM) +
   n·M·d (the kernel values) multiply-adds.
3. `kpca-nystrom-kdd`: `stolr kpca --solver nystrom` on KDD Cup 99 (494 021 rows [first
   50 000], one-hot, standardized, uncentred), m = 2000, rank 50. Limit: n·m²/2 + n·m·d.
4. `skpca-kdd-iter`: SKPCA on the same rows, rank 50, 50 random Fourier features (100 columns
   per draw), 20 iterations: ms per iteration from report.json. Limit per iteration (b = the
   iterate's mean rank over the run, a = 100): n·d·50 (features) + n·a(a+1)/2 + n·a·b (the
   Gram matrix of [U, ζ], UᵀU carried) + n·(b + a)·b (U⁺ = [U, ζ] Y).
5. `kpca-exact-mf-20k`: `stolr kpca --solver exact-matrix-free --center` on the first 20 000
   [5 000] KDD Cup rows, top 10, against scikit-learn's `KernelPCA(kernel="rbf",
   eigen_solver="arpack", gamma = 1/(2σ²))` (benches/python/sklearn_kpca.py) with σ from
   Stolr's report. Limit (both exact rows): one evaluation of the symmetric kernel matrix,
   n(n+1)/2·d multiply-adds.
6. `kpca-exact-default-20k`: the same with `--solver exact` (the default operator choice):
   time, peak RSS and the operator report.json names, against the faster of the forced runs
   (matrix-free; dense when the CLI has a way to force it).
7. `msg-capped-mnist`: `stolr pca --solver capped-msg --rank 8` (one pass) on the MNIST rows
   of row 1, samples per second, also with `--batch 16` and `--batch 64`, beside `--solver oja`. Limit per
   sample: 2·d·k multiply-adds (the projection Uᵀx and a rank-one correction of U, k = 8).
8. `slkl-1e5`: `stolr krr --solver slkl --columns on-the-fly --nu 1` on Friedman #1, n = 10⁵
   [10⁴], M = 1000; killed at `--time-cap` and reported as "> S s". Limit: the run's own work by
   the solver's cost model, n·M·d + E·[(M − p)·n·(p + d) + p³] multiply-adds (E epochs, p the
   final active centres; level-2 work, so the dgemm rate flatters it).

The dgemm rate: NumPy's `A @ B` on 4000 x 4000 doubles, best of 3, 2n³ flops (a multiply-add
counts 2). Every limit is its flop count over that rate. Each repeat runs the selected rows in
the order above, Stolr and anchor alternating; medians over the repeats. Every subprocess is
killed at `--time-cap` seconds. Absolute targets are judged at the full sizes only.
Writes `summary.json` and `summary.md` to `--out`; `--publish` also copies them to
`docs/results/headline/`.
"""

import argparse
import gzip
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchlib import MeasureTimeout, measure

ROWS = ["pca-exact", "krr-nystrom-1e6", "kpca-nystrom-kdd", "skpca-kdd-iter", "kpca-exact-mf-20k",
        "kpca-exact-default-20k", "msg-capped-mnist", "slkl-1e5"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
KDD_FILE = os.path.join("kddcup99", "kddcup.data_10_percent.gz")
KDD_ARGS = ["--format", "csv", "--categorical", "2,3,4", "--label-column", "42", "--standardize"]

PCA_WORKER = r'''
import json, resource, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
path, pairs = sys.argv[1], int(sys.argv[2])
X = np.load(path)
import stolr
from sklearn.decomposition import PCA
fits = {"stolr": lambda: stolr.PCA(n_components=8, solver="exact").fit(X),
        "sklearn": lambda: PCA(n_components=8, svd_solver="covariance_eigh").fit(X)}
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
loaded = rss()
fits["stolr"]()  # untimed: the first fit of each library pays for thread pools and page faults
stolr_peak = rss()
fits["sklearn"]()
times = {"stolr": [], "sklearn": []}
for _ in range(pairs):
    for name in ["stolr", "sklearn"]:
        t = time.perf_counter()
        fits[name]()
        times[name].append(time.perf_counter() - t)
print(json.dumps({"times": times, "loaded_rss": loaded, "stolr_peak_rss": stolr_peak, "peak_rss": rss(),
                  "stolr_version": getattr(stolr, "__version__", None), "stolr_file": stolr.__file__}))
'''


def dgemm_rate(n=4000, tries=3):
    """GFLOP/s of NumPy's A @ B on n x n doubles, best of `tries`, counting 2n³ flops."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    best = min(timed(lambda: a @ b) for _ in range(tries))
    return {"n": n, "best_s": best, "gflops": 2.0 * n ** 3 / best / 1e9, "blas": blas_name()}


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def blas_name():
    try:
        info = np.show_config(mode="dicts")
        blas = info["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # older NumPy: no dict mode
        return None


def read_mnist(data, n):
    """MNIST train + t10k images (70 000 x 784) scaled to [0, 1], the first `n` rows if given."""
    parts = []
    for name in ["train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"]:
        with gzip.open(os.path.join(data, "mnist", name)) as f:
            head = np.frombuffer(f.read(16), dtype=">u4")
            parts.append(np.frombuffer(f.read(), dtype=np.uint8).reshape(int(head[1]), int(head[2] * head[3])))
    X = np.concatenate(parts)
    return (X[:n] if n else X).astype(np.float64) / 255.0


def first_rows(gz, n, path):
    """Writes the first `n` lines of the gzip text file `gz` to `path`."""
    with gzip.open(gz, "rt") as src, open(path, "w") as dst:
        for i, line in enumerate(src):
            if i == n:
                break
            dst.write(line)
    return path


class Bench:
    """The selected rows' runs, their results kept per contestant in `runs`."""

    def __init__(self, args, workdir):
        self.args, self.workdir = args, workdir
        self.runs = {}
        self.notes = []
        self.inputs = {}

    def record(self, key, result):
        self.runs.setdefault(key, []).append(result)
        shown = {k: v for k, v in result.items() if k not in ("report",)}
        print(f"{key}: {json.dumps(shown)[:300]}", file=sys.stderr, flush=True)

    def run(self, key, cmd, out=None, env=None):
        """`cmd` in a fresh process under the time cap; its report.json (from `out`) kept."""
        if out:
            shutil.rmtree(out, ignore_errors=True)
        try:
            wall, peak, stdout = measure(cmd, timeout=self.args.time_cap, env=env)
        except MeasureTimeout:
            result = {"timeout_s": self.args.time_cap}
        except RuntimeError as e:
            result = {"error": str(e)[-600:]}
        else:
            result = {"wall_s": wall, "peak_rss_bytes": peak, "stdout": stdout[-4000:]}
            report = os.path.join(out, "report.json") if out else None
            if report and os.path.exists(report):
                with open(report) as f:
                    result["report"] = json.load(f)
        self.record(key, result)
        return result

    def stolr(self, key, sub, args, out_name=None):
        out = os.path.join(self.workdir, out_name or key)
        return self.run(key, [self.args.stolr, sub, *args, "--seed", str(self.args.seed), "--out", out], out)

    # -- the rows ---------------------------------------------------------------------------

    def mnist_npy(self):
        if "mnist" not in self.inputs:
            path = os.path.join(self.workdir, "mnist.npy")
            X = read_mnist(self.args.data, self.args.mnist_n)
            np.save(path, X)
            self.inputs["mnist"] = (path, X.shape)
        return self.inputs["mnist"][0]

    def kdd_first(self, n):
        key = f"kdd-{n}"
        if key not in self.inputs:
            self.inputs[key] = first_rows(os.path.join(self.args.data, KDD_FILE), n,
                                          os.path.join(self.workdir, f"kdd-first-{n}.csv"))
        return self.inputs[key]

    def kdd_input(self):
        """KDD Cup for rows 3 and 4: the gzip file, or its first rows under --quick."""
        if self.args.kdd_rows:
            return self.kdd_first(self.args.kdd_rows)
        return os.path.join(self.args.data, KDD_FILE)

    def pca_exact(self):
        path = self.mnist_npy()
        if importlib.util.find_spec("stolr") is not None:  # the worker imports it
            res = self.run("pca-exact/python", [sys.executable, "-c", PCA_WORKER, path, str(self.args.pairs)])
            if "stdout" in res:
                res["worker"] = json.loads(res.pop("stdout").strip().splitlines()[-1])
        elif "no stolr package" not in " ".join(self.notes):
            self.notes.append("pca-exact: no stolr package importable (set PYTHONPATH): the Python fits were not run.")
        self.stolr("pca-exact/cli", "pca", ["--input", path, "--format", "npy", "--solver", "exact", "--rank", "8",
                                            "--center"])

    def krr_nystrom(self):
        self.stolr("krr-nystrom-1e6", "krr", ["--generate", "friedman1", "--n-train", str(self.args.krr_n),
                                              "--n-test", "1000", "--solver", "nystrom", "--landmarks", "2000",
                                              "--nystrom-solver", "direct", "--lambda", "0.01"])

    def kpca_nystrom(self):
        self.stolr("kpca-nystrom-kdd", "kpca", ["--input", self.kdd_input(), *KDD_ARGS, "--solver", "nystrom",
                                                "--landmarks", "2000", "--rank", "50", "--certify", "off"])

    def skpca(self):
        self.stolr("skpca-kdd-iter", "kpca", ["--input", self.kdd_input(), *KDD_ARGS, "--solver", "skpca",
                                              "--rank", "50", "--features", "50", "--iterations",
                                              str(self.args.skpca_iterations), "--certify", "off"])

    def kpca_exact(self, selected):
        path = self.kdd_first(self.args.exact_rows)
        common = ["--input", path, *KDD_ARGS, "--center", "--rank", "10", "--certify", "off"]
        mf = self.stolr("kpca-exact/matrix-free", "kpca", [*common, "--solver", "exact-matrix-free"])
        if "kpca-exact-mf-20k" in selected:
            sigma = mf.get("report", {}).get("kernel", {}).get("sigma")
            if sigma is None:
                sigma = self.sigma_of("kpca-exact/default")
            if sigma is None:
                self.record("kpca-exact/sklearn", {"error": "no σ from a Stolr run on the same rows"})
            else:
                out = os.path.join(self.workdir, "kpca-exact-sklearn")
                self.run("kpca-exact/sklearn", [sys.executable, os.path.join(HERE, "sklearn_kpca.py"), "--input", path,
                                                "--format", "kdd-csv", "--standardize", "--sigma", repr(sigma),
                                                "--rank", "10", "--eigen-solver", "arpack", "--out", out], out)
        if "kpca-exact-default-20k" in selected:
            self.stolr("kpca-exact/default", "kpca", [*common, "--solver", "exact"])
            dense = self.args.dense_flags
            if dense is not None:
                self.stolr("kpca-exact/dense", "kpca", [*common, *dense])

    def sigma_of(self, key):
        for r in self.runs.get(key, []):
            sigma = r.get("report", {}).get("kernel", {}).get("sigma")
            if sigma is not None:
                return sigma
        return None

    def msg(self):
        path = self.mnist_npy()
        common = ["--input", path, "--format", "npy", "--rank", "8"]
        self.stolr("msg/capped", "pca", [*common, "--solver", "capped-msg"])
        self.stolr("msg/capped-b16", "pca", [*common, "--solver", "capped-msg", "--batch", "16"])
        self.stolr("msg/capped-b64", "pca", [*common, "--solver", "capped-msg", "--batch", "64"])
        self.stolr("msg/oja", "pca", [*common, "--solver", "oja"])

    def slkl(self):
        self.stolr("slkl-1e5", "krr", ["--generate", "friedman1", "--n-train", str(self.args.slkl_n), "--n-test",
                                       "1000", "--solver", "slkl", "--landmarks", "1000", "--columns", "on-the-fly",
                                       "--nu", "1", "--lambda", "0.01"])


def dense_flags(stolr):
    """The `stolr kpca` arguments that force the dense exact operator, if the CLI has any."""
    text = subprocess.run([stolr, "kpca", "--help"], capture_output=True, text=True, timeout=60).stdout
    if "exact-dense" in text:
        return ["--solver", "exact-dense"]
    for flag in ["--exact-operator", "--operator"]:
        if flag + " " in text:
            return ["--solver", "exact", flag, "dense"]
    return None


# -- the summary --------------------------------------------------------------------------------


def ok(runs):
    return [r for r in runs if "wall_s" in r]


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def rep(r, *keys):
    v = r.get("report", {})
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def timing(r, key):
    """The report's `timings_s[key]`, else the process's wall time."""
    v = rep(r, "timings_s", key)
    return v if v is not None else r["wall_s"]


def status(runs):
    """A cell for a contestant none of whose runs finished."""
    if any("timeout_s" in r for r in runs):
        return f"> {runs[0].get('timeout_s', 0):g} s" if all("timeout_s" in r for r in runs) else "timed out"
    errors = [r["error"] for r in runs if "error" in r]
    return "failed: " + errors[0].strip().splitlines()[-1][:160] if errors else "not run"


def summarize(bench, rate_gflops, selected, full):
    """One dict per table row."""
    R = bench.runs
    rate = rate_gflops * 1e9
    limit = lambda madds: 2.0 * madds / rate
    rows = []

    def row(name, **kw):
        base = {"row": name, "value": None, "unit": "s", "peak_rss_bytes": None, "anchor": "flop count",
                "anchor_value": None, "ratio_to_anchor": None, "limit": None, "ratio_to_limit": None,
                "target": None, "met": None, "note": None, "flops": None, "flop_formula": None}
        base.update(kw)
        if base["value"] is not None and base["limit"] is not None:
            v, lim = base["value"], base["limit"]
            base["ratio_to_limit"] = lim / v if base["unit"] == "samples/s" else v / lim
            if base["anchor"] == "flop count":
                base["ratio_to_anchor"] = base["ratio_to_limit"]
        rows.append(base)
        return base

    if "pca-exact" in selected:
        py = [r for r in R.get("pca-exact/python", []) if "worker" in r]
        cli = ok(R.get("pca-exact/cli", []))
        n, d = bench.inputs["mnist"][1]
        madds = n * d * (d + 1) / 2
        st = med([t for r in py for t in r["worker"]["times"]["stolr"]])
        sk = med([t for r in py for t in r["worker"]["times"]["sklearn"]])
        c = med([timing(r, "solve") for r in cli])
        ratio = st / sk if st and sk else None
        row("pca-exact", value=st, peak_rss_bytes=med([r["worker"]["stolr_peak_rss"] for r in py]),
            anchor="scikit-learn", anchor_value=sk, ratio_to_anchor=ratio, limit=limit(madds),
            target="≤ 1.0× scikit-learn", met=None if ratio is None else ratio <= 1.0,
            flops=2 * madds, flop_formula="n·d(d+1)/2 multiply-adds (symmetric XᵀX)",
            note=f"n = {n}, d = {d}; Python, one process; peak RSS: the worker after its first stolr fit "
                 "(data included)" if py else status(R.get("pca-exact/python", [])))
        pc = st / c if st and c else None
        row("pca-exact (CLI)", value=c, peak_rss_bytes=med([r["peak_rss_bytes"] for r in cli]), anchor="Python fit",
            anchor_value=st, ratio_to_anchor=pc, limit=limit(madds), target="Python / CLI < 1.05",
            met=None if pc is None else pc < 1.05, flops=2 * madds, flop_formula="as pca-exact",
            note="`stolr pca --solver exact --rank 8 --center` on the same rows (.npy), solve time of report.json"
                 + ("" if cli else "; " + status(R.get("pca-exact/cli", []))))

    def cli_row(name, key, timing_key, madds_of, formula, target, target_s, full_size, note=""):
        runs = R.get(key, [])
        good = ok(runs)
        value = med([timing(r, timing_key) for r in good])
        first = good[0] if good else {}
        madds = madds_of(first) if good else None
        met = None
        if value is not None and full_size and target_s is not None:
            met = value <= target_s
        elif not good and any("timeout_s" in r for r in runs) and full_size and target_s is not None:
            met = bench.args.time_cap <= target_s
        return row(name, value=value, peak_rss_bytes=med([r["peak_rss_bytes"] for r in good]),
                   limit=limit(madds) if madds else None, flops=2 * madds if madds else None, flop_formula=formula,
                   target=target + ("" if full_size else " (full size only)"), met=met,
                   note=(note + ("" if good else "; " + status(runs))).strip("; "))

    if "krr-nystrom-1e6" in selected:
        cli_row("krr-nystrom-1e6", "krr-nystrom-1e6", "fit",
                lambda r: rep(r, "dataset", "n_train") * (2000 ** 2 / 2 + 2000 * rep(r, "dataset", "d")),
                "n·M²/2 + n·M·d multiply-adds (symmetric K_Mn K_nM; kernel values)", "≤ 45 s", 45.0,
                full["krr"], f"Friedman #1, n = {bench.args.krr_n:,}, M = 2000, direct solve, fit time")
    if "kpca-nystrom-kdd" in selected:
        cli_row("kpca-nystrom-kdd", "kpca-nystrom-kdd", "solve",
                lambda r: rep(r, "dataset", "n") * (2000 ** 2 / 2 + 2000 * rep(r, "dataset", "d")),
                "n·m²/2 + n·m·d multiply-adds", "≤ 10 s", 10.0, full["kdd"],
                kdd_note(R.get("kpca-nystrom-kdd", []), "m = 2000, rank 50, uncentred, solve time"))
    if "skpca-kdd-iter" in selected:
        runs = ok(R.get("skpca-kdd-iter", []))
        ms = med([rep(r, "timings_s", "per_iteration_ms") for r in runs])
        if ms is None and runs:
            ms = med([1e3 * timing(r, "solve") / bench.args.skpca_iterations for r in runs])
        madds, b = None, None
        if runs:
            n, d = rep(runs[0], "dataset", "n"), rep(runs[0], "dataset", "d")
            traj = rep(runs[0], "result", "rank_trajectory") or [50]
            b, a, F = sum(traj) / len(traj), 100, 50
            madds = n * d * F + n * a * (a + 1) / 2 + n * a * b + n * (b + a) * b
        value = ms / 1e3 if ms is not None else None
        r = row("skpca-kdd-iter", value=value, unit="ms/iter",
                peak_rss_bytes=med([x["peak_rss_bytes"] for x in runs]),
                limit=limit(madds) if madds else None, flops=2 * madds if madds else None,
                flop_formula="n·d·F + n·a(a+1)/2 + n·a·b + n·(b+a)·b multiply-adds per iteration "
                             f"(F = 50 frequencies, a = 2F = 100 columns, b = mean iterate rank"
                             + (f" = {b:.1f})" if b else ")"),
                target="≤ 200 ms/iter" + ("" if full["kdd"] else " (full size only)"),
                met=(value <= 0.2) if value is not None and full["kdd"] else None,
                note=kdd_note(R.get("skpca-kdd-iter", []), f"rank 50, {bench.args.skpca_iterations} iterations, "
                              "per_iteration_ms of report.json") + ("" if runs else "; " + status(R.get("skpca-kdd-iter", []))))
    if "kpca-exact-mf-20k" in selected or "kpca-exact-default-20k" in selected:
        exact_rows(bench, row, limit, selected, full)
    if "msg-capped-mnist" in selected:
        n, d = bench.inputs["mnist"][1]
        madds = 2 * d * 8
        for key, name, tgt in [("msg/capped", "msg-capped-mnist", True), ("msg/capped-b16", "msg-capped-mnist --batch 16", True),
                               ("msg/capped-b64", "msg-capped-mnist --batch 64", True),
                               ("msg/oja", "oja-mnist (beside)", False)]:
            runs = ok(R.get(key, []))
            rate_s = med([rep(r, "result", "samples_per_second") or n / timing(r, "solve") for r in runs])
            row(name, value=rate_s, unit="samples/s", peak_rss_bytes=med([r["peak_rss_bytes"] for r in runs]),
                limit=rate / (2 * madds), flops=2 * madds, flop_formula="2·d·k multiply-adds per sample (k = 8)",
                target=("≥ 150 000 samples/s" + ("" if full["mnist"] else " (full size only)")) if tgt else None,
                met=(rate_s >= 150_000) if tgt and rate_s is not None and full["mnist"] else None,
                note=f"one pass over n = {n}" + ("" if runs else "; " + status(R.get(key, []))))
    if "slkl-1e5" in selected:
        cli_row("slkl-1e5", "slkl-1e5", "fit", slkl_madds,
                "n·M·d + E·[(M − p)·n·(p + d) + p³] multiply-adds: the columns' means once, then per epoch an "
                "inactive landmark's column on the fly (n·d) and Woodbury update (n·p), an active one's p² "
                "(E epochs and p = final active centres from report.json; crates/solvers/src/krr/slkl.rs)",
                "≤ 300 s", 300.0, full["slkl"],
                f"Friedman #1, n = {bench.args.slkl_n:,}, M = 1000, columns on the fly, ν = 1, fit time")
    return rows


def slkl_madds(r, M=1000):
    """The multiply-adds of the SLKL run `r` by the cost model of crates/solvers/src/krr/slkl.rs
    (p taken as the final active count: an upper side, p grows over the run)."""
    n, d = rep(r, "dataset", "n_train"), rep(r, "dataset", "d")
    epochs, p = rep(r, "result", "epochs") or 1, rep(r, "result", "centres") or 0
    return n * M * d + epochs * ((M - p) * n * (p + d) + p ** 3)


def kdd_note(runs, text):
    good = ok(runs)
    if not good:
        return text
    return f"n = {rep(good[0], 'dataset', 'n'):,}, d = {rep(good[0], 'dataset', 'd')}, " + text


def exact_rows(bench, row, limit, selected, full):
    R = bench.runs
    mf, sk = ok(R.get("kpca-exact/matrix-free", [])), ok(R.get("kpca-exact/sklearn", []))
    default, dense = ok(R.get("kpca-exact/default", [])), ok(R.get("kpca-exact/dense", []))
    any_run = (mf or default or dense or [None])[0]
    madds = None
    if any_run:
        n, d = rep(any_run, "dataset", "n"), rep(any_run, "dataset", "d")
        madds = n * (n + 1) / 2 * d
    lim = limit(madds) if madds else None
    formula = "n(n+1)/2·d multiply-adds (the symmetric kernel matrix's inner products, once)"
    m = med([timing(r, "solve") for r in mf])
    size = f"first {bench.args.exact_rows:,} KDD Cup rows, centred, top 10, solve time"
    if "kpca-exact-mf-20k" in selected:
        s = med([timing(r, "solve") for r in sk])
        ratio = m / s if m and s else None
        row("kpca-exact-mf-20k", value=m, peak_rss_bytes=med([r["peak_rss_bytes"] for r in mf]), anchor="scikit-learn",
            anchor_value=s, ratio_to_anchor=ratio, limit=lim, flops=2 * madds if madds else None, flop_formula=formula,
            target="≤ 0.35× scikit-learn", met=None if ratio is None else ratio <= 0.35,
            note=f"{size}; scikit-learn ARPACK peak RSS {fmt_bytes(med([r['peak_rss_bytes'] for r in sk]))}"
                 + ("" if sk else " (" + status(R.get("kpca-exact/sklearn", [])) + ")")
                 + ("" if mf else "; " + status(R.get("kpca-exact/matrix-free", []))))
    if "kpca-exact-default-20k" in selected:
        v = med([timing(r, "solve") for r in default])
        d_med = med([timing(r, "solve") for r in dense])
        forced = [(t, name) for t, name in [(m, "matrix-free"), (d_med, "dense")] if t is not None]
        best = min(forced) if forced else None
        ops = sorted({str(rep(r, "exact_operator")) for r in default})
        ratio = v / best[0] if v and best else None
        note = f"{size}; operator chosen: {', '.join(ops) or '?'}"
        if bench.args.dense_flags is None:
            note += "; the CLI has no flag forcing the dense operator: anchor is the forced matrix-free run"
        elif d_med is not None:
            note += f"; forced dense {d_med:.2f} s, forced matrix-free " + (f"{m:.2f} s" if m else "—")
        row("kpca-exact-default-20k", value=v, peak_rss_bytes=med([r["peak_rss_bytes"] for r in default]),
            anchor=f"faster forced ({best[1]})" if best else "faster forced", anchor_value=best[0] if best else None,
            ratio_to_anchor=ratio, limit=lim, flops=2 * madds if madds else None, flop_formula=formula,
            target="≤ 1.10× the faster forced run", met=None if ratio is None else ratio <= 1.10,
            note=note + ("" if default else "; " + status(R.get("kpca-exact/default", []))))


def fmt_bytes(b):
    return "—" if b is None else f"{b / 1e6:,.0f} MB"


def fmt_value(v, unit):
    if v is None:
        return None
    if unit == "samples/s":
        return f"{v:,.0f} samples/s"
    if unit == "ms/iter":
        return f"{v * 1e3:.1f} ms/iter"
    return f"{v:.3g} s" if v < 100 else f"{v:.0f} s"


def markdown(result):
    m, p = result["machine"], result["parameters"]
    lines = ["# Headline numbers", "",
             f"Commit `{result.get('commit') or '?'}`, {'quick' if p['quick'] else 'full'} run, "
             f"{p['repeats']} repeat(s) of the whole list in one process order, Stolr and its anchor alternating; "
             f"medians. {m['cpus']} CPUs, load average {m['load_average_start'][0]:.1f} at the start, "
             f"{m['load_average_end'][0]:.1f} at the end.", "",
             f"dgemm rate: {m['dgemm']['gflops']:.1f} GFLOP/s (NumPy `A @ B`, {m['dgemm']['n']} × {m['dgemm']['n']} "
             f"doubles, best of 3, 2n³ flops: a multiply-add counts 2 flops; BLAS {m['dgemm']['blas']}). "
             "Limit = the row's flop count at that rate; ratio to limit = time over limit (for a rate: the limit's "
             "rate over the measured one). Peak RSS: the process's (`/usr/bin/time`).", "",
             "| row | Stolr (median) | peak RSS | anchor | ratio to anchor | limit | ratio to limit | target | met? |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        value = fmt_value(r["value"], r["unit"]) or (r["note"] or "—").split("; ")[-1]
        if r["anchor"] == "flop count":
            anchor = "flop count"
        elif r["anchor_value"] is None:
            anchor = f"{r['anchor']}: —"
        else:
            anchor = f"{r['anchor']}: {fmt_value(r['anchor_value'], r['unit'])}"
        ratio = "—" if r["ratio_to_anchor"] is None else f"{r['ratio_to_anchor']:.2f}×"
        if r["limit"] is None:
            lim = "—"
        elif r["unit"] == "samples/s":
            lim = f"{r['limit']:,.0f} samples/s"
        else:
            lim = f"{r['limit']:.3g} s" if r["unit"] == "s" else f"{r['limit'] * 1e3:.3g} ms/iter"
        rl = "—" if r["ratio_to_limit"] is None else f"{r['ratio_to_limit']:.1f}×"
        met = {True: "yes", False: "**no**", None: "—"}[r["met"]]
        lines.append(f"| {r['row']} | {value} | {fmt_bytes(r['peak_rss_bytes'])} | {anchor} | {ratio} | {lim} | "
                     f"{rl} | {r['target'] or '—'} | {met} |")
    lines += ["", "Rows:", ""]
    for r in result["rows"]:
        flops = ""
        if r["flops"]:
            flops = (f"; {r['flops'] / 1e3:,.1f} kFLOP per sample" if r["unit"] == "samples/s"
                     else f"; {r['flops'] / 1e9:,.2f} GFLOP" + (" per iteration" if r["unit"] == "ms/iter" else ""))
        lines.append(f"- **{r['row']}**: {r['note'] or ''}. Limit: {r['flop_formula'] or '—'}{flops}.")
    for note in result["notes"]:
        lines.append(f"- {note}")
    return "\n".join(lines)


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stolr", default=os.path.join(ROOT, "target", "release", "stolr"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"),
                    help="folder with mnist/ and kddcup99/ (default ../shared/data beside the workspace)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats of the whole list (default 3; --quick 1)")
    ap.add_argument("--only", default=None, help="comma-separated rows: " + ",".join(ROWS))
    ap.add_argument("--time-cap", type=float, default=900.0, help="seconds after which any subprocess is killed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench", "headline"))
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes: MNIST 20 000 rows, KRR n = 10^5, KDD's first 50 000 rows, exact kernel "
                         "PCA on 5 000 rows, SLKL n = 10^4; one repeat")
    ap.add_argument("--publish", action="store_true", help="also copy summary.{md,json} to docs/results/headline/")
    args = ap.parse_args()
    selected = ROWS if not args.only else [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = [r for r in selected if r not in ROWS]
    if unknown:
        ap.error(f"unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROWS)}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.repeats < 1 or args.time_cap <= 0:
        ap.error("--repeats must be at least 1 and --time-cap positive")
    if not os.path.exists(args.stolr):
        ap.error(f"no stolr binary at {args.stolr} (cargo build --release -p stolr-cli)")
    args.mnist_n = 20_000 if args.quick else None
    args.krr_n = 100_000 if args.quick else 1_000_000
    args.kdd_rows = 50_000 if args.quick else None
    args.exact_rows = 5_000 if args.quick else 20_000
    args.slkl_n = 10_000 if args.quick else 100_000
    args.skpca_iterations = 20
    args.pairs = 1 if args.quick else 2
    args.dense_flags = dense_flags(args.stolr)
    full = {"mnist": not args.quick, "krr": not args.quick, "kdd": not args.quick, "slkl": not args.quick}

    notes = []
    if any(r in selected for r in ("kpca-nystrom-kdd", "skpca-kdd-iter", "kpca-exact-mf-20k", "kpca-exact-default-20k")):
        notes.append("KDD Cup rows: the kernel PCA solvers work on the distinct rows, each weighted by its count, "
                     "when enough rows repeat (docs/derivations.md §7.4: 145 584 of the 494 021 rows are distinct, "
                     "16 285 of the first 20 000); the limits count all n rows, so a ratio to the limit can be below 1.")
    have_mnist = os.path.exists(os.path.join(args.data, "mnist", "train-images-idx3-ubyte.gz"))
    have_kdd = os.path.exists(os.path.join(args.data, KDD_FILE))
    needs = {"pca-exact": have_mnist, "msg-capped-mnist": have_mnist, "kpca-nystrom-kdd": have_kdd,
             "skpca-kdd-iter": have_kdd, "kpca-exact-mf-20k": have_kdd, "kpca-exact-default-20k": have_kdd}
    for r in list(selected):
        if not needs.get(r, True):
            notes.append(f"{r}: skipped, its data is not in {args.data} (see PROVENANCE.md there)")
            selected.remove(r)
    os.makedirs(args.out, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average_start": os.getloadavg()}
    print("measuring the dgemm rate ...", file=sys.stderr, flush=True)
    machine["dgemm"] = dgemm_rate()
    print(f"dgemm: {machine['dgemm']['gflops']:.1f} GFLOP/s", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="stolr-headline-") as workdir:
        bench = Bench(args, workdir)
        steps = [("pca-exact", bench.pca_exact), ("krr-nystrom-1e6", bench.krr_nystrom),
                 ("kpca-nystrom-kdd", bench.kpca_nystrom), ("skpca-kdd-iter", bench.skpca),
                 ("kpca-exact", lambda: bench.kpca_exact(selected)), ("msg-capped-mnist", bench.msg),
                 ("slkl-1e5", bench.slkl)]
        for repeat in range(args.repeats):
            print(f"repeat {repeat + 1} of {args.repeats}", file=sys.stderr, flush=True)
            for name, step in steps:
                if name in selected or (name == "kpca-exact" and any(r.startswith("kpca-exact") for r in selected)):
                    step()
        rows = summarize(bench, machine["dgemm"]["gflops"], selected, full)
        notes += bench.notes
        runs = {k: [{kk: vv for kk, vv in r.items() if kk != "stdout"} for r in v] for k, v in bench.runs.items()}
    machine["load_average_end"] = os.getloadavg()
    params = {k: getattr(args, k) for k in ["quick", "repeats", "time_cap", "seed", "mnist_n", "krr_n", "kdd_rows",
                                            "exact_rows", "slkl_n", "skpca_iterations", "pairs", "dense_flags"]}
    params.update(rows_selected=selected, data=os.path.abspath(args.data), stolr=os.path.abspath(args.stolr))
    result = {"commit": git_commit(), "parameters": params, "machine": machine, "rows": rows, "notes": notes,
              "runs": runs}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    md = markdown(result)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(md + "\n")
    if args.publish:
        dest = os.path.join(ROOT, "docs", "results", "headline")
        os.makedirs(dest, exist_ok=True)
        for name in ["summary.md", "summary.json"]:
            shutil.copy(os.path.join(args.out, name), os.path.join(dest, name))
        print(f"copied summary.md and summary.json to {dest}", file=sys.stderr)
    print(md)


if __name__ == "__main__":
    main()
