"""A peer's HTTP server as a child process on a loopback port, for a `with` block: started in its own
process group (a server that forks workers, as vLLM does, is stopped whole), ready when a URL
answers 200, stopped with SIGTERM to the server and then SIGKILL to anything left in its group, and
the shared memory its processes left in /dev/shm removed (bench/processes/shm_leftovers.py). Its output goes
to a log file, whose tail is shown when it fails to start; the peers are run so that they never log
prompts or outputs."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.processes import shm_leftovers

SHM_SETTLE_S = 5.0  # how long a stop waits for killed processes to unmap what they left


def exit_on_sigterm() -> None:
    """SIGTERM (`timeout`, `kill`) ends this process as SystemExit(143), so its `with` blocks unwind
    and every server it started is stopped. By default the signal ends the process on the spot, and
    a server in its own session (start_new_session) lives on as an orphan, with its memory and CPU."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class LoopbackServer:
    """`argv` serving on 127.0.0.1:`port`; ready when GET `ready_path` answers 200."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        ready_path: str,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        start_timeout_s: float = 300.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.name, self.argv, self.ready_path, self.log = name, list(argv), ready_path, log
        self.env, self.cwd = dict(env) if env is not None else None, cwd
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._shm_before: set[str] = set()

    def __enter__(self) -> LoopbackServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._shm_before = shm_leftovers.snapshot()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        started = time.monotonic()
        while time.monotonic() - started < self.start_timeout_s:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"{self.name} exited with {code}; its log ends:\n{log_tail(self.log)}")
            if self.answers():
                print(f"{self.name} ready in {time.monotonic() - started:.0f} s", flush=True)
                return self
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"{self.name} not ready in {self.start_timeout_s:.0f} s; log: {self.log}")

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM to the server, which stops its own workers (a signal to the whole group would stop
        them under it, mid-shutdown), then SIGKILL to whatever is left in its group."""
        if self.proc is None:
            return
        group = self.proc.pid  # start_new_session: the server leads its own group
        self.proc.terminate()
        try:
            self.proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            print(f"{self.name} did not stop in {self.stop_timeout_s:.0f} s: killing it", flush=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # workers that outlived their leader, if any
        self.proc.wait()
        self.proc = None
        self._remove_shm_leftovers()

    def _remove_shm_leftovers(self) -> None:
        """Removes the shared memory the server's processes left; the processes SIGKILL stopped
        may take a moment to unmap theirs."""
        deadline = time.monotonic() + SHM_SETTLE_S
        removed = shm_leftovers.remove_leftovers(self._shm_before)
        while time.monotonic() < deadline and shm_leftovers.snapshot() - self._shm_before - set(removed):
            time.sleep(0.1)
            removed += shm_leftovers.remove_leftovers(self._shm_before | set(removed))
        if removed:
            print(
                f"{self.name}: removed {len(removed)} shared-memory files its processes left in /dev/shm",
                flush=True,
            )
