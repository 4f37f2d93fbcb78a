"""Helpers shared by the benchmark scripts of this folder (imported by name: the scripts run
as `python3 benches/python/NAME.py`, so this folder is on their path)."""

import os
import signal
import subprocess
import tempfile
import threading
import time


class MeasureTimeout(RuntimeError):
    """A command given to [`measure`] with a `timeout` ran past it and was killed; `seconds`
    is the timeout."""

    def __init__(self, cmd, seconds):
        super().__init__(f"{' '.join(cmd)} killed after {seconds:g} s (its time cap)")
        self.seconds = seconds


def measure(cmd, timeout=None, env=None):
    """Runs `cmd` in its own process: (wall seconds, peak RSS bytes, stdout). The peak RSS is
    that process's alone: `/usr/bin/time -f %M` when present, else the rusage os.wait4 returns.

    With `timeout` (seconds), the command runs in its own process group, which is killed
    (SIGKILL) at the timeout; [`MeasureTimeout`] is raised then. Without it (the default) the
    command runs in the caller's process group and is waited for however long it takes.
    `env`: the child's environment (default: this process's)."""
    timer = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        full = [timer, "-f", "%M", "-o", rss.name, *cmd] if timer else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, env=env, start_new_session=timeout is not None)
        killed = threading.Event()
        timer_thread = None
        if timeout is not None:
            def kill():
                killed.set()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            timer_thread = threading.Timer(timeout, kill)
            timer_thread.daemon = True
            timer_thread.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if timer_thread is not None:
            timer_thread.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if killed.is_set() and proc.returncode != 0:
            raise MeasureTimeout(cmd, timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read().decode(errors='replace')[-3000:]}")
        peak_kib = int(rss.read().strip().splitlines()[-1]) if timer else usage.ru_maxrss
        return wall, peak_kib * 1024, out.read().decode()
