"""Helpers shared by the benchmark scripts of this folder (imported by name: the scripts run
as `python3 benches/python/NAME.py`, so this folder is on their path)."""

import os
import subprocess
import tempfile
import time


def measure(cmd):
    """Runs `cmd` in its own process: (wall seconds, peak RSS bytes, stdout). The peak RSS is
    that process's alone: `/usr/bin/time -f %M` when present, else the rusage os.wait4 returns."""
    timer = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        full = [timer, "-f", "%M", "-o", rss.name, *cmd] if timer else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read().decode(errors='replace')[-3000:]}")
        peak_kib = int(rss.read().strip().splitlines()[-1]) if timer else usage.ru_maxrss
        return wall, peak_kib * 1024, out.read().decode()
