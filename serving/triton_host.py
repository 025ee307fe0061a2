"""What a Triton launch needs from this host: the `tritonserver` install inside the nvidia-pytriton
wheel, the Python-backend directory assembled from it, and free loopback ports."""

from __future__ import annotations

import shutil
import socket
import sys
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
