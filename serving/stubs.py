"""The Python-backend stubs of a running `tritonserver`, as the process table shows them: each model
instance runs in a stub process, a child of the server, whose command line starts with the model's
code (`<repository>/<model>/<version>/model.py`). A stub that died is a zombie until Triton reaps it
(or Triton has reaped it already); either way it is no longer a live child.

Triton itself notices a dead stub only when a request reaches it (it answers "Stub process ... is not
healthy"), and still reports the model READY; the supervisor asks here instead, every pass, so the
worker is marked unhealthy (and the health check turns NOT_SERVING) as soon as a stub is gone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
STUB_NAME = "triton_python_backend_stub"[:15]  # the kernel keeps the first 15 characters of a name


@dataclass(slots=True, frozen=True)
class Stub:
    pid: int
    model: str  # the Triton model whose instance it runs


def _stat(pid: int, proc: Path) -> tuple[str, str, int] | None:
    """(name, state, parent pid) of a process; None when it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
    return name, state, int(ppid)


def live_stubs(server_pid: int, proc: Path = PROC) -> list[Stub]:
    """The server's stub children that have not exited (a stopped one is alive: the canary's)."""
    stubs: list[Stub] = []
    if not proc.is_dir():  # no process table to read (not Linux): the canaries still watch
        return stubs
    for entry in proc.iterdir():
        if not entry.name.isdecimal():
            continue
        pid = int(entry.name)
        stat = _stat(pid, proc)
        if stat is None or stat[0] != STUB_NAME or stat[2] != server_pid or stat[1] in "ZX":
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        code = Path(args[1].decode(errors="replace")) if len(args) > 1 else Path()
        stubs.append(Stub(pid, code.parent.parent.name))
    return stubs


def is_live(stub: Stub, server_pid: int, proc: Path = PROC) -> bool:
    """Whether the stub is still the server's live child (a pid reused since is not)."""
    stat = _stat(stub.pid, proc)
    return stat is not None and stat[0] == STUB_NAME and stat[2] == server_pid and stat[1] not in "ZX"


@dataclass(slots=True, eq=False)
class StubWatch:
    """The stubs of one worker's server as last seen live: `gone()` names one that has exited since
    (every pass of the supervisor: a few reads of /proc), `discover()` adds those started since (a
    model loaded, a restart: at each probe interval, a scan of /proc)."""

    server_pid: int = 0  # the server the known stubs belong to
    known: dict[int, Stub] = field(default_factory=dict)  # pid -> stub

    def gone(self, server_pid: int, serving: Iterable[str], proc: Path = PROC) -> str | None:
        """Why the worker failed: a stub of a model it `serving` exited (not one of a model that is
        unloading); None when every known stub lives. Stubs of an earlier server are forgotten."""
        if server_pid != self.server_pid:
            self.server_pid, self.known = server_pid, {}
        models = list(serving)
        for stub in list(self.known.values()):
            if is_live(stub, server_pid, proc):
                continue
            del self.known[stub.pid]
            if stub.model in models and not self._replaced(stub, server_pid, proc):
                return f"model {stub.model}: its Python-backend stub (pid {stub.pid}) exited"
        return None

    def _replaced(self, gone: Stub, server_pid: int, proc: Path) -> bool:
        """Another live stub runs the model: Triton reloaded it (it starts the new instance before
        it ends the old one), which is no failure."""
        for stub in live_stubs(server_pid, proc):
            self.known.setdefault(stub.pid, stub)
        return any(s.model == gone.model for s in self.known.values())

    def discover(self, server_pid: int, proc: Path = PROC) -> None:
        if server_pid != self.server_pid:
            self.server_pid, self.known = server_pid, {}
        for stub in live_stubs(server_pid, proc):
            self.known.setdefault(stub.pid, stub)
