"""Smoke test of the sparse benchmark (`cargo xtask bench sparse`, benches/python/sparse_bench.py):
its --quick run (n = 300, d = 500) finishes, writes sparse.json and sparse.md, and the eigenvalues
of `stolr kpca --sparse` equal the dense read of the same file and scikit-learn's KernelPCA on
the CSR matrix. No timing is asserted."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "../../..")
SCRIPT = os.path.join(ROOT, "benches/python/sparse_bench.py")
STOLR_BIN = os.environ.get("STOLR_BIN", os.path.join(ROOT, "target/release/stolr"))

pytestmark = pytest.mark.skipif(not os.path.exists(STOLR_BIN), reason="the stolr binary is not built")


def test_quick_run_agrees(tmp_path):
    result = subprocess.run([sys.executable, SCRIPT, "--quick", "--stolr", STOLR_BIN, "--out", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.load(open(tmp_path / "sparse.json"))
    assert (tmp_path / "sparse.md").read_text().count("| exact |") == 3
    assert report["data"]["nnz"] > 0 and report["data"]["duplicates"] >= 2
    exact = report["solvers"]["exact"]
    nystrom = report["solvers"]["nystrom"]
    rank = report["parameters"]["rank"]
    for rows in (exact, nystrom):
        for row in rows.values():
            assert len(row["eigenvalues"]) == rank
            assert row["peak_rss_bytes_median"] > 0
    # Sparse rows against the same file read dense: the same eigenvalues (issue 23: 1e-12).
    assert exact["stolr-sparse"]["eig_rel_diff_vs_stolr-dense"] < 1e-12
    assert nystrom["stolr-sparse"]["eig_rel_diff_vs_stolr-dense"] < 1e-12
    # Exact kernel PCA against scikit-learn's on the CSR matrix.
    assert exact["stolr-sparse"]["eig_rel_diff_vs_sklearn"] < 1e-8
    assert exact["stolr-dense"]["eig_rel_diff_vs_sklearn"] < 1e-8
    # The eigenvalues are those of a real centred kernel matrix: positive, nonincreasing, and
    # their sum below the trace of the centred kernel (at most n).
    eig = exact["stolr-sparse"]["eigenvalues"]
    assert all(a >= b > 0 for a, b in zip(eig, eig[1:]))
    assert sum(eig) < report["parameters"]["exact_n"]


def test_bad_options_are_refused(tmp_path):
    for bad in (["--density", "0"], ["--density", "1.5"], ["--n", "0"], ["--solvers", "kha"]):
        result = subprocess.run([sys.executable, SCRIPT, "--stolr", STOLR_BIN, "--out", str(tmp_path), *bad],
                                capture_output=True, text=True)
        assert result.returncode == 2, (bad, result.stderr)
        assert "must" in result.stderr or "takes" in result.stderr
