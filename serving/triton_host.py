"""What a Triton launch needs from this host: the `tritonserver` install inside the nvidia-pytriton
wheel, the Python-backend directory assembled from it, free loopback ports, the environment and
tracing arguments it runs with, and a launcher that ends it with the process that started it."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path


class TritonError(Exception):
    """The Triton server could not be started or a model could not be loaded."""


class ModelNotReady(TritonError):
    """A probe found one of the server's models not ready."""

    def __init__(self, model: str) -> None:
        super().__init__(f"model {model} is not ready")
        self.model = model


@dataclass(slots=True, frozen=True)
class TritonInstall:
    binary: Path
    python_backend: Path  # folder with libtriton_python.so and triton_python_backend_utils.py
    stub: Path  # triton_python_backend_stub for this interpreter's Python version
    libs: Path  # the wheel's bundled shared libraries
    caches: Path

    @classmethod
    def locate(cls) -> TritonInstall:
        import pytriton

        base = Path(next(iter(pytriton.__path__))) / "tritonserver"
        site = base.parent.parent
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=base / "bin" / "tritonserver",
            python_backend=base / "backends" / "python",
            stub=base / "python_backend_stubs" / py / "triton_python_backend_stub",
            libs=site / "nvidia_pytriton.libs",
            caches=base / "caches",
        )
        for path in (install.binary, install.python_backend, install.stub, install.libs):
            if not path.exists():
                raise TritonError(f"nvidia-pytriton install is missing {path}")
        return install


def assemble_backend_dir(install: TritonInstall, dest: Path) -> Path:
    """dest/python/ holds the Python backend and the stub for this interpreter. Idempotent."""
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for src in (
        install.python_backend / "libtriton_python.so",
        install.python_backend / "triton_python_backend_utils.py",
        install.stub,
    ):
        target = python_dir / src.name
        if not target.exists() or target.stat().st_size != src.stat().st_size:
            shutil.copy2(src, target)
    return dest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_free(host: str = "127.0.0.1", **ports: int) -> None:
    """TritonError when something listens on one of the ports of `host` already (a connection in
    TIME_WAIT does not count: SO_REUSEADDR, as Triton binds them)."""
    for kind, port in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as e:
                raise TritonError(
                    f"Triton {kind} port {port} is already in use on {host} ({e.strerror}): "
                    "another tritonserver or platform holds it; stop it or set other ports in [triton]"
                ) from None


# Execs argv[2:] (tritonserver) to get SIGTERM when the process that started it (pid argv[1])
# dies, from a fresh interpreter: a preexec_fn would run Python in the forked child of this
# threaded process, where gRPC's fork handlers abort it now and then (seen on restarts).
_EXEC_DYING_WITH_PARENT = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "  # PR_SET_PDEATHSIG
    "os.getppid() == int(sys.argv[1]) or sys.exit(1); os.execv(sys.argv[2], sys.argv[2:])"
)


def dying_with_this_process(args: list[str]) -> list[str]:
    """The argv that runs `args` (a binary and its arguments) so that it gets SIGTERM when this
    process dies. The parent-death signal follows the launching thread: launch from one that
    outlives the child."""
    return [sys.executable, "-I", "-c", _EXEC_DYING_WITH_PARENT, str(os.getpid()), *args]


def launch_env(install: TritonInstall) -> dict[str, str]:
    """This process's environment, with the wheel's libraries and this interpreter's on the loader
    path (the Python backend's stub links libpython) and this interpreter's folder first on PATH."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(install.libs), libdir, env.get("LD_LIBRARY_PATH", "")) if p
    )
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    return env


def trace_args(trace_url: str) -> list[str]:
    """tritonserver's arguments to export a span per request to an OTLP/HTTP traces URL ("": none)."""
    if not trace_url:
        return []
    url = trace_url.removeprefix("http://").removeprefix("https://")
    return [
        "--trace-config=mode=opentelemetry",
        f"--trace-config=opentelemetry,url={url}",
        "--trace-config=opentelemetry,resource=service.name=llm-worker",
        "--trace-config=rate=1",
        "--trace-config=level=TIMESTAMPS",
    ]
