"""``fit(X_local, comm=MPI.COMM_WORLD)`` under ``mpirun -np 1/2/3`` (mpi_fit.py, beside this file):
the same model as the one-process fit of the concatenated rows (bit for bit under -np 1, to
1e-12 relative otherwise), the same error on every rank for bad inputs and for what the library
does not distribute, and a job that ends (non-zero) when one rank fails alone inside the fit.
Skipped without mpi4py or mpirun; every mpirun runs under a deadline, so a hang fails the test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stolr

pytest.importorskip("mpi4py")
MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

SCRIPT = Path(__file__).with_name("mpi_fit.py")
#: Seconds any one mpirun may take before the test fails (a hang).
DEADLINE = 120


def mpirun(np_, case, out=None, **env):
    if out is not None:
        env["STOLR_MPI_OUT"] = str(out)
    environment = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_rmaps_base_oversubscribe="1", **env)
    command = ["timeout", str(DEADLINE), MPIRUN, "-np", str(np_), "--oversubscribe",
               sys.executable, str(SCRIPT), case]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=DEADLINE + 30)


AGREE = ["communicator", "kpca nystrom", "kpca exact-matrix-free", "kpca skpca-rff", "kpca skpca-maclaurin", "kpca kha",
         "kpca skpca-columns", "kpca skpca-columns-sym-centred", "kpca skpca-rff-centred",
         "kpca float32 pre-image", "kpca broadcast=False", "pca exact", "pca vr-pca", "pca svrg-bb", "pca share",
         "krr nystrom", "krr slkl", "krr nystrom cg", "krr slkl nu auto", "krr 2-D y"]


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_every_distributed_solver_equals_the_one_process_fit(np_, tmp_path):
    run = mpirun(np_, "agree", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(np_):
        lines = (tmp_path / f"rank{rank}.txt").read_text().splitlines()
        for name in AGREE:
            assert f"rank {rank} ok {name}" in lines, (name, lines, run.stderr)
        assert f"rank {rank} done agree" in lines


HOSTILE = ["nan", "empty rank", "y length", "sparse", "after errors"]
REFUSED = ["different d", "params", "krr exact"]


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_bad_inputs_and_refused_solvers_raise_on_every_rank(np_, tmp_path):
    run = mpirun(np_, "hostile", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(np_):
        lines = (tmp_path / f"rank{rank}.txt").read_text().splitlines()
        for name in HOSTILE + (REFUSED if np_ > 1 else []):
            assert f"rank {rank} ok {name}" in lines, (name, lines, run.stderr)
        assert f"rank {rank} done hostile" in lines


def test_a_rank_failing_alone_inside_the_fit_aborts_the_job():
    # The last rank's memory_limit is too small: it fails inside the fit while rank 0 waits in
    # a collective. It must end the job (comm.Abort) after STOLR_MPI_ABORT_AFTER seconds,
    # not leave rank 0 waiting (the deadline would fail the test).
    run = mpirun(2, "abort", STOLR_MPI_ABORT_AFTER="2")
    assert run.returncode not in (0, 124), run.stdout + run.stderr  # 124: timeout's, a hang
    assert "rank 1 of 2: the fit failed on this rank (MemoryError" in run.stderr, run.stderr
    assert "aborting every rank" in run.stderr
    assert "finished" not in run.stdout


STOLR_MPI_BIN = os.environ.get("STOLR_MPI_BIN")


@pytest.mark.skipif(STOLR_MPI_BIN is None, reason="STOLR_MPI_BIN (stolr built with --features mpi) not given")
def test_load_joins_a_kernel_pca_model_written_in_parts(tmp_path):
    # stolr kpca --solver exact under mpirun -np 2 writes model.npz (a manifest) and one part per
    # rank; stolr.load joins them into the model whose transform of the training rows gives
    # the fit's projections.npy, and a damaged part raises ValueError naming it.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(240, 4))
    x[0] = 40.0          # an outlier row
    x[10] = x[11]        # duplicate rows
    x[:, 3] = 2.5        # a constant column
    data = tmp_path / "rows.npy"
    np.save(data, x)
    out = tmp_path / "fit"
    environment = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = ["timeout", str(DEADLINE), MPIRUN, "-np", "2", "--oversubscribe", STOLR_MPI_BIN, "kpca",
               "--input", str(data), "--format", "npy", "--solver", "exact", "--rank", "3", "--center",
               "--sigma", "2.0", "--certify", "off", "--out", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=DEADLINE + 30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (out / "model.part-1-of-2.npz").exists()
    model = stolr.load(out)
    z = model.transform(x)
    projections = np.load(out / "projections.npy")
    signs = np.sign(np.sum(z * projections, axis=0))
    np.testing.assert_allclose(z * signs, projections, rtol=0, atol=1e-8 * np.abs(projections).max())
    part = out / "model.part-1-of-2.npz"
    part.write_bytes(part.read_bytes()[:200])
    with pytest.raises(ValueError, match="model.part-1-of-2.npz"):
        stolr.load(out)
