"""Kernel PCA from a stream (issue 24, Deliver 6): accuracy against exact kernel PCA, agreement
with the in-memory Nyström solver, and time and peak memory up to 10^8 rows, each run a fresh
`stolr` process.

Usage (normally through `cargo xtask bench stream`, which builds the CLI first):

    python3 benches/python/stream_bench.py --stolr target/release/stolr
        [--accuracy-n 8000] [--file-sizes 1000000] [--stream-sizes 10000000,100000000]
        [--landmarks 500] [--rank 10] [--repeats 1] [--seed 0] [--kdd PATH]
        [--out target/bench/stream] [--quick]

Three parts:

1. **Accuracy** on the first `--accuracy-n` MNIST training images (`--data`, scaled to [0, 1]),
   or, without MNIST, on 10-D generated rows (three noisy concentric rings in the first three
   coordinates, six columns of small noise, a constant column, an outlier row and duplicate
   rows); a `.npy` file. The anchor is the exact centred kernel PCA (NumPy's
   `eigh` of the centred Gaussian kernel matrix). Each streaming solver writes the projections
   of the training rows, and the score is the share of the exact top-r variance that their
   span captures: trace(Q^T K_c Q) / (sum of the top r eigenvalues of K_c), with Q an
   orthonormal basis of the projections. Solvers: streaming-nystrom m = 200 and 500,
   streaming-rff D = 500, 1000, 2000 (one pass of capped MSG), and the in-memory Nyström
   m = 500 beside them.
2. **Agreement and scale, from a file**: `--file-sizes` rows of the same kind of data in a `.npy`
   file, streamed by streaming-nystrom (m = `--landmarks`), then the in-memory Nyström solver
   given the same landmark rows (`--landmarks-file`, the rows the streamed model holds): the
   eigenvalues must agree to rounding. Time and peak RSS of both.
3. **Scale, generated**: `--stream-sizes` rows of `--generate rings` (3-D, no disk), streamed by
   streaming-nystrom with `--no-projections`: time, peak RSS, rows per second.

With `--kdd PATH` (KDD Cup 99's gzip CSV), also the streamed Nyström kernel PCA of its 494 021
rows (categorical columns 2-4 one-hot encoded, label column 42 dropped, standardized), time
and peak RSS, against the in-memory Nyström solver on the same file.

The Gaussian bandwidth is fixed per part (the median pairwise distance of a 2000-row sample for
the generated files, 1.5 for the rings stream), so that every contestant decomposes the same
kernel. Repeats alternate the contestants; medians are reported.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from benchlib import measure

RINGS_SIGMA = 1.5


def make_data(n, seed):
    """n x 10 rows: noisy rings (radii 1, 2, 3) in coordinates 0-2, noise of 0.05 in 3-8, a
    constant column 9, an outlier row 0 and 1% duplicate rows."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    radius = rng.integers(1, 4, n).astype(np.float64)
    X = np.empty((n, 10))
    X[:, 0] = radius * np.cos(t) + 0.1 * rng.standard_normal(n)
    X[:, 1] = radius * np.sin(t) + 0.1 * rng.standard_normal(n)
    X[:, 2] = 0.1 * rng.standard_normal(n)
    X[:, 3:9] = 0.05 * rng.standard_normal((n, 6))
    X[:, 9] = 0.25
    X[0, :9] = 12.0
    dup = max(1, n // 100)
    X[n // 2: n // 2 + dup] = X[1: 1 + dup]
    return X


def median_sigma(X, seed):
    rng = np.random.default_rng(seed + 1)
    S = X[rng.choice(X.shape[0], min(2000, X.shape[0]), replace=False)]
    sq = (S * S).sum(1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * S @ S.T, 0)
    return float(np.sqrt(np.median(d2[np.triu_indices_from(d2, 1)])))


def centred_kernel(X, sigma):
    sq = (X * X).sum(1)
    K = np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0) / (2 * sigma * sigma))
    r = K.mean(0)
    K -= r[None, :]
    K -= r[:, None]
    K += r.mean()
    return K


def kpca(stolr, args, solver, source, extra, out, rank):
    """One `stolr kpca` run: (wall s, peak RSS bytes, report)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [stolr, "kpca", *source, "--solver", solver, "--rank", str(rank), "--kernel", "gaussian",
           "--seed", str(args.seed), "--certify", "off", "--out", out, *extra]
    wall, peak, _ = measure(cmd)
    report = json.load(open(os.path.join(out, "report.json"))) if os.path.exists(os.path.join(out, "report.json")) else {}
    return wall, peak, report


def accuracy_rows(args):
    """The first --accuracy-n MNIST training images scaled to [0, 1] when --data holds MNIST,
    else generated rows ([`make_data`])."""
    mnist = os.path.join(args.data, "mnist", "train-images-idx3-ubyte.gz")
    if os.path.exists(mnist):
        import gzip
        with gzip.open(mnist) as f:
            f.read(16)
            X = np.frombuffer(f.read(), dtype=np.uint8).reshape(-1, 784)[: args.accuracy_n]
        return X.astype(np.float64) / 255.0, "MNIST training images"
    return make_data(args.accuracy_n, args.seed), "generated rings, d = 10"


def accuracy(args, workdir):
    X, what = accuracy_rows(args)
    path = os.path.join(workdir, "acc.npy")
    np.save(path, X)
    sigma = median_sigma(X, args.seed)
    t = time.perf_counter()
    K = centred_kernel(X, sigma)
    w = np.linalg.eigvalsh(K)[::-1][: args.rank]
    exact_s = time.perf_counter() - t
    contestants = [("streaming-nystrom", ["--landmarks", "200"], "m = 200"),
                   ("streaming-nystrom", ["--landmarks", "500"], "m = 500"),
                   ("streaming-rff", ["--features", "500"], "D = 500"),
                   ("streaming-rff", ["--features", "1000"], "D = 1000"),
                   ("streaming-rff", ["--features", "2000"], "D = 2000"),
                   ("nystrom", ["--landmarks", "500"], "m = 500, in memory")]
    rows = []
    for solver, extra, label in contestants:
        out = os.path.join(workdir, "acc-out")
        runs = []
        for _ in range(args.repeats):
            wall, peak, _ = kpca(args.stolr, args, solver, ["--input", path, "--format", "npy"],
                                 [*extra, "--center", "--sigma", repr(sigma)], out, args.rank)
            P = np.load(os.path.join(out, "projections.npy"))[:, : args.rank]
            Q, _ = np.linalg.qr(P)
            runs.append((wall, peak, float(np.trace(Q.T @ K @ Q) / w.sum())))
        rows.append({"solver": solver, "setting": label, "wall_s": statistics.median(r[0] for r in runs),
                     "peak_rss_bytes": statistics.median(r[1] for r in runs), "captured": runs[0][2]})
        print(f"accuracy {solver} {label}: captured {runs[0][2]:.5f}", file=sys.stderr)
    return {"n": X.shape[0], "d": X.shape[1], "data": what, "sigma": sigma, "exact_numpy_s": exact_s, "runs": rows}


def from_file(args, n, workdir):
    X = make_data(n, args.seed + n)
    path = os.path.join(workdir, f"file-{n}.npy")
    np.save(path, X)
    del X
    sigma = median_sigma(np.load(path, mmap_mode="r")[:20000], args.seed)
    common = ["--input", path, "--format", "npy"]
    opts = ["--center", "--sigma", repr(sigma)]
    stream_out, memory_out = os.path.join(workdir, "file-stream"), os.path.join(workdir, "file-memory")
    runs = {"streaming-nystrom": [], "nystrom": []}
    for _ in range(args.repeats):
        wall, peak, _ = kpca(args.stolr, args, "streaming-nystrom", common, [*opts, "--landmarks", str(args.landmarks)],
                             stream_out, args.rank)
        runs["streaming-nystrom"].append((wall, peak))
        landmarks = os.path.join(workdir, "landmarks.npy")
        np.save(landmarks, np.load(os.path.join(stream_out, "model.npz"))["rows"])
        wall, peak, _ = kpca(args.stolr, args, "nystrom", common, [*opts, "--landmarks-file", landmarks],
                             memory_out, args.rank)
        runs["nystrom"].append((wall, peak))
    a = np.load(os.path.join(stream_out, "eigenvalues.npy"))
    b = np.load(os.path.join(memory_out, "eigenvalues.npy"))
    agreement = float(np.max(np.abs(a - b) / np.abs(b)))
    os.remove(path)
    print(f"file n = {n}: eigenvalues agree to {agreement:.2e}", file=sys.stderr)
    return {"n": n, "d": 10, "sigma": sigma, "file_bytes": 80 * n + 128,
            "eigenvalue_max_rel_diff": agreement,
            "solvers": {k: {"wall_s": statistics.median(r[0] for r in v),
                            "peak_rss_bytes": statistics.median(r[1] for r in v)} for k, v in runs.items()}}


def generated(args, n, workdir):
    out = os.path.join(workdir, "gen-out")
    runs = []
    for _ in range(args.repeats):
        wall, peak, _ = kpca(args.stolr, args, "streaming-nystrom", ["--generate", "rings", "--n", str(n)],
                             ["--landmarks", str(args.landmarks), "--sigma", repr(RINGS_SIGMA), "--no-projections"],
                             out, args.rank)
        runs.append((wall, peak))
        print(f"generated n = {n}: {wall:.1f} s, {peak / 1e6:.0f} MB", file=sys.stderr)
    wall = statistics.median(r[0] for r in runs)
    return {"n": n, "d": 3, "sigma": RINGS_SIGMA, "wall_s": wall, "rows_per_s": n / wall,
            "peak_rss_bytes": statistics.median(r[1] for r in runs)}


def kdd(args, workdir):
    source = ["--input", args.kdd, "--format", "csv", "--categorical", "2,3,4", "--label-column", "42",
              "--standardize"]
    opts = ["--landmarks", str(args.landmarks), "--center", "--sigma", "auto", "--no-projections"]
    result = {}
    for solver in ["streaming-nystrom", "nystrom"]:
        out = os.path.join(workdir, f"kdd-{solver}")
        extra = [o for o in opts if solver == "streaming-nystrom" or o != "--no-projections"]
        try:
            runs = [kpca(args.stolr, args, solver, source, extra, out, args.rank)[:2] for _ in range(args.repeats)]
            result[solver] = {"wall_s": statistics.median(r[0] for r in runs),
                              "peak_rss_bytes": statistics.median(r[1] for r in runs)}
        except RuntimeError as e:
            result[solver] = {"error": str(e).splitlines()[-1][:300]}
        print(f"kdd {solver}: {result[solver]}", file=sys.stderr)
    return result


def markdown(result):
    mb = lambda b: f"{b / 1e6:.0f} MB"
    lines = ["# Kernel PCA from a stream", "",
             f"Machine: {result['machine']['cpus']} CPUs, load average {result['machine']['load_average_start'][0]:.1f} "
             f"at the start, {result['machine']['load_average_end'][0]:.1f} at the end. Medians of "
             f"{result['parameters']['repeats']} run(s), each a fresh process.", ""]
    acc = result.get("accuracy")
    if acc:
        lines += [f"## Accuracy: {acc['n']} rows of {acc['data']}, d = {acc['d']}, Gaussian sigma = {acc['sigma']:.3g}, centred, "
                  f"top {result['parameters']['rank']}", "",
                  f"Exact kernel PCA (NumPy eigh of the {acc['n']} x {acc['n']} centred kernel): "
                  f"{acc['exact_numpy_s']:.1f} s.", "",
                  "| solver | setting | share of the exact top-r variance captured | time | peak RSS |",
                  "|---|---|---|---|---|"]
        for r in acc["runs"]:
            lines.append(f"| {r['solver']} | {r['setting']} | {r['captured']:.5f} | {r['wall_s']:.2f} s | "
                         f"{mb(r['peak_rss_bytes'])} |")
        lines.append("")
    if result.get("files"):
        lines += ["## Streamed against in memory, the same landmarks (a .npy file, d = 10)", "",
                  "| n | file | streamed: time | streamed: peak RSS | in memory: time | in memory: peak RSS | "
                  "eigenvalues, max relative difference |", "|---|---|---|---|---|---|---|"]
        for f in result["files"]:
            s, m = f["solvers"]["streaming-nystrom"], f["solvers"]["nystrom"]
            lines.append(f"| {f['n']:,} | {mb(f['file_bytes'])} | {s['wall_s']:.1f} s | {mb(s['peak_rss_bytes'])} | "
                         f"{m['wall_s']:.1f} s | {mb(m['peak_rss_bytes'])} | {f['eigenvalue_max_rel_diff']:.1e} |")
        lines.append("")
    if result.get("generated"):
        lines += [f"## Generated rings, streamed (d = 3, m = {result['parameters']['landmarks']}, no disk)", "",
                  "| n | time | rows per second | peak RSS |", "|---|---|---|---|"]
        for g in result["generated"]:
            lines.append(f"| {g['n']:,} | {g['wall_s']:.1f} s | {g['rows_per_s']:,.0f} | {mb(g['peak_rss_bytes'])} |")
        lines.append("")
    if result.get("kdd"):
        lines += ["## KDD Cup 99, 494 021 rows from its gzip file", "", "| solver | time | peak RSS |", "|---|---|---|"]
        for solver, r in result["kdd"].items():
            cell = f"{r['wall_s']:.1f} s | {mb(r['peak_rss_bytes'])}" if "wall_s" in r else f"failed: {r['error']} |"
            lines.append(f"| {solver} | {cell} |")
        lines.append("")
    return "\n".join(lines)


def sizes(text):
    return [int(float(v)) for v in text.split(",") if v]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stolr", default="target/release/stolr")
    ap.add_argument("--accuracy-n", type=int, default=8000)
    ap.add_argument("--file-sizes", type=sizes, default=[1_000_000])
    ap.add_argument("--stream-sizes", type=sizes, default=[10_000_000, 100_000_000])
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kdd", default=None, help="KDD Cup 99's kddcup.data_10_percent.gz")
    ap.add_argument("--data", default="../shared/data", help="folder with mnist/ for the accuracy part")
    ap.add_argument("--out", default="target/bench/stream")
    ap.add_argument("--quick", action="store_true",
                    help="accuracy on 1500 rows, a 20 000-row file, 10^5 generated rows, m = 100")
    args = ap.parse_args()
    if args.quick:
        args.accuracy_n, args.file_sizes, args.stream_sizes, args.landmarks = 1500, [20_000], [100_000], 100
    for name in ["accuracy_n", "landmarks", "rank", "repeats"]:
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if not os.path.exists(args.stolr):
        ap.error(f"no stolr binary at {args.stolr} (cargo build --release -p stolr-cli)")
    os.makedirs(args.out, exist_ok=True)
    result = {"parameters": {k: getattr(args, k) for k in ["accuracy_n", "file_sizes", "stream_sizes", "landmarks",
                                                          "rank", "repeats", "seed", "kdd"]},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_average_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="stolr-stream-bench-") as workdir:
        if args.accuracy_n > 1:
            result["accuracy"] = accuracy(args, workdir)
        result["files"] = [from_file(args, n, workdir) for n in args.file_sizes]
        result["generated"] = [generated(args, n, workdir) for n in args.stream_sizes]
        if args.kdd:
            result["kdd"] = kdd(args, workdir)
    result["machine"]["load_average_end"] = os.getloadavg()
    with open(os.path.join(args.out, "stream.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(os.path.join(args.out, "stream.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
