"""The one-machine HA store's processes: etcd, then one Patroni per PostgreSQL node.

Each daemon is started in its own session with its pid in `<dir>/<name>.pid`; Patroni starts its
own postgres, whose pid is in the node's `data/postmaster.pid`. As root, postgres (which refuses to
run as root) and Patroni run as the `postgres` user. Ports, all on 127.0.0.1: etcd's client port,
and per node i (1..n) PostgreSQL on `pg_port + i - 1` and Patroni's REST API on `rest_port + i - 1`.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serving.store_ha.patroni_config import node_config, write_config
from serving.store_ha.processes import exists, kill, listening, own_by_postgres

PG_BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")
DEBIAN_PACKAGES = ("etcd-server", "patroni")
UP_TIMEOUT_S = 120.0
DOWN_TIMEOUT_S = 30.0


class StoreHaError(RuntimeError):
    """The HA store could not be started, reached or stopped."""


@dataclass(slots=True, frozen=True)
class ClusterLayout:
    work_dir: Path
    nodes: int = 3
    etcd_port: int = 23790
    etcd_peer_port: int = 23800
    pg_port: int = 5441
    rest_port: int = 8441

    def names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def node_ports(self, name: str) -> tuple[int, int]:
        """(PostgreSQL port, Patroni REST port) of a node."""
        i = int(name.removeprefix("node")) - 1
        return self.pg_port + i, self.rest_port + i

    def ports(self) -> list[int]:
        return [self.etcd_port, self.etcd_peer_port, *(p for n in self.names() for p in self.node_ports(n))]

    def store_url(self, database: str = "postgres") -> str:
        """The platform's `[store] url`: every node, libpq picking the primary."""
        hosts = ",".join(f"127.0.0.1:{self.node_ports(n)[0]}" for n in self.names())
        return f"postgresql+psycopg://postgres@{hosts}/{database}?target_session_attrs=read-write"


@dataclass(slots=True, frozen=True)
class Member:
    name: str
    role: str  # "leader", "sync_standby", "replica"
    state: str  # "running", "streaming", "starting", ...
    port: int


class Cluster:
    def __init__(self, layout: ClusterLayout) -> None:
        self.layout = layout
        self.dir = layout.work_dir

    # ---- up ------------------------------------------------------------------------------------
    def up(self, timeout_s: float = UP_TIMEOUT_S) -> str:
        """Starts what is not running and waits for a primary with a synchronous standby; returns
        the store URL. Idempotent."""
        etcd, patroni, bin_dir = self._tools()
        self.dir.mkdir(parents=True, exist_ok=True)
        _check_reachable(self.dir)
        self._check_ports()
        if not self._alive("etcd"):
            self._spawn("etcd", [etcd, *self._etcd_args()], as_postgres=False)
        self._wait(lambda: self._etcd_healthy(), timeout_s, "etcd did not become healthy")
        for name in self.layout.names():
            if self._alive(name):
                continue
            node_dir = self.dir / name
            node_dir.mkdir(exist_ok=True)
            pg_port, rest_port = self.layout.node_ports(name)
            config = node_config(
                name=name,
                pg_port=pg_port,
                rest_port=rest_port,
                etcd_port=self.layout.etcd_port,
                node_dir=node_dir,
                bin_dir=bin_dir,
            )
            write_config(node_dir / "patroni.yml", config)
            own_by_postgres(node_dir)
            self._spawn(name, [patroni, str(node_dir / "patroni.yml")], as_postgres=True)
        self._wait(self.healthy, timeout_s, "no primary with a synchronous standby")
        return self.layout.store_url()

    def _check_ports(self) -> None:
        """A port of a process this folder did not start is a conflict, never adopted."""
        own = {"etcd": [self.layout.etcd_port, self.layout.etcd_peer_port]}
        own |= {n: list(self.layout.node_ports(n)) for n in self.layout.names()}
        for name, ports in own.items():
            busy = [p for p in ports if listening(p)]
            if busy and not self._alive(name):
                raise StoreHaError(f"port(s) {busy} of {name} are in use by another process")

    def _tools(self) -> tuple[str, str, str]:
        etcd, patroni = shutil.which("etcd"), shutil.which("patroni")
        if (etcd is None or patroni is None) and os.geteuid() == 0:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            cmd = ["apt-get", "install", "-y", "--no-install-recommends", *DEBIAN_PACKAGES]
            if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
                subprocess.run(cmd, env=env, capture_output=True, check=True)
            etcd, patroni = shutil.which("etcd"), shutil.which("patroni")
        bin_dir = next((d for d in PG_BIN_DIRS if Path(d, "postgres").exists()), None)
        if etcd is None or patroni is None or bin_dir is None:
            raise StoreHaError(
                "the HA store needs etcd, patroni and PostgreSQL's server binaries "
                f"(Debian: apt-get install {' '.join(DEBIAN_PACKAGES)} postgresql)"
            )
        return etcd, patroni, bin_dir

    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.layout.etcd_port}"
        peer = f"http://127.0.0.1:{self.layout.etcd_peer_port}"
        return [
            "--name=store-ha",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=store-ha={peer}",
            "--initial-cluster-state=new",
            "--enable-v2=true",
        ]

    def _spawn(self, name: str, argv: list[str], *, as_postgres: bool) -> None:
        user = "postgres" if as_postgres and os.geteuid() == 0 else None
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 (the daemon keeps it)
        env = {**os.environ, "PATRONI_LOG_LEVEL": "INFO"}
        if user is not None:
            env["HOME"] = pwd.getpwnam(user).pw_dir
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, user=user, group=user, extra_groups=[] if user else None,
            cwd=self.dir, env=env,
        )  # fmt: skip
        log.close()
        (self.dir / f"{name}.pid").write_text(f"{process.pid}\n")

    # ---- status --------------------------------------------------------------------------------
    def members(self) -> list[Member]:
        """The members as Patroni sees them (from any node's REST API); [] when none answers."""
        for name in self.layout.names():
            rest = self.layout.node_ports(name)[1]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{rest}/cluster", timeout=2) as answer:
                    doc = json.load(answer)
            except (OSError, ValueError):
                continue
            return [
                Member(m["name"], m.get("role", ""), m.get("state", ""), int(m.get("port", 0)))
                for m in doc.get("members", [])
            ]
        return []

    def healthy(self) -> bool:
        """A running primary and a streaming synchronous standby."""
        members = self.members()
        leader = any(m.role == "leader" and m.state == "running" for m in members)
        standby = any(m.role == "sync_standby" and m.state in ("streaming", "running") for m in members)
        return leader and standby

    def primary(self) -> Member | None:
        return next((m for m in self.members() if m.role == "leader" and m.state == "running"), None)

    def postmaster_pid(self, name: str) -> int | None:
        """The pid of a node's postgres (from its data folder), None when it is not running."""
        try:
            pid = int((self.dir / name / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if exists(pid) else None

    def _etcd_healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.layout.etcd_port}/health"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(json.load(answer).get("health") in ("true", True))
        except (OSError, ValueError):
            return False

    # ---- down ----------------------------------------------------------------------------------
    def down(self, *, purge: bool = False, timeout_s: float = DOWN_TIMEOUT_S) -> None:
        """Stops every node (Patroni stops its postgres), then etcd; kills what outlives the
        timeout; returns once no process of it is left and its ports are free."""
        names = self.layout.names()
        postmasters = {n: self.postmaster_pid(n) for n in names}
        for name in names:
            self._signal(name, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(self._alive(n) for n in names):
            time.sleep(0.2)
        for name in names:
            self._signal(name, signal.SIGKILL)
            pid = postmasters[name] or self.postmaster_pid(name)
            if pid is not None:
                kill(pid, signal.SIGKILL)
        self._signal("etcd", signal.SIGTERM)
        self._wait(lambda: not self._alive("etcd"), 10, "etcd did not stop", on_timeout=signal.SIGKILL)
        ports = self.layout.ports()
        self._wait(lambda: not any(listening(p) for p in ports), timeout_s, "ports still bound")
        for name in ["etcd", *names]:
            (self.dir / f"{name}.pid").unlink(missing_ok=True)
        if purge:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers -------------------------------------------------------------------------------
    def _pid(self, name: str) -> int | None:
        try:
            return int((self.dir / f"{name}.pid").read_text())
        except (OSError, ValueError):
            return None

    def _alive(self, name: str) -> bool:
        pid = self._pid(name)
        return pid is not None and exists(pid)

    def _signal(self, name: str, sig: signal.Signals) -> None:
        pid = self._pid(name)
        if pid is not None and exists(pid):
            kill(-pid, sig)  # its whole session's group

    def _wait(
        self,
        done: Callable[[], bool],
        timeout_s: float,
        what: str,
        on_timeout: signal.Signals | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                if on_timeout is not None:
                    self._signal("etcd", on_timeout)
                    return
                raise StoreHaError(f"{what} within {timeout_s:.0f}s (logs in {self.dir})")
            time.sleep(0.25)


def _check_reachable(path: Path) -> None:
    """As root the nodes run as `postgres`, which must be able to reach the work folder."""
    if os.geteuid() != 0:
        return
    for folder in [path, *path.parents]:
        if not folder.stat().st_mode & 0o001:
            raise StoreHaError(f"{folder} is not searchable by the postgres user: use another --dir")
