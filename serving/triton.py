"""Locates the `tritonserver` binary shipped in the nvidia-pytriton wheel, assembles its Python
backend directory, and runs the server over a model repository (worker/deployment.py writes it).

The server is started in its own process group, bound to loopback, in explicit model-control mode;
`TritonServer.stop()` ends it and every Python-backend stub it spawned and removes any shared-memory
region those stubs leaked.

Access: every gRPC protocol and HTTP API but health (inference, model load/unload, metadata,
configs, statistics, shared memory, trace and log settings) needs the server's access key in a
header (Triton's restricted protocols). The key is drawn when the `TritonServer` is made and kept
for its life, so a restart keeps the clients that hold it working. Health (server live/ready, model
ready) stays open: it is what readiness probes ask, and it tells nothing about requests. Triton
takes the key on its command line (it reads it from nowhere else), where a local user who can read
the process table can see it; the tenant's prefix-cache salt never appears there
(frontend/generations/cache_salt.py). The Python backend creates each stub's shared-memory region
in /dev/shm, through which prompts and outputs pass, readable by every local user (0644, set
explicitly, whatever the umask): each load narrows them to 0600 once the model is ready (a window
remains between its stub's start and then). docs/operations.md says what protects both: a
dedicated user, or the pod's own IPC namespace and process table.

Identity: a port in use is a start-up error, and each launch gets a random `--id`, which Triton
reports back as its server metadata's `name` (its API shows no pid). Only a server reporting this
launch's id is taken for ours, at start and at every `check()`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from serving.triton_host import (
    ModelNotReady,
    TritonError,
    TritonInstall,
    assemble_backend_dir,
    dying_with_this_process,
    ensure_free,
    free_port,
    launch_env,
    trace_args,
)

SHM = Path("/dev/shm")
SHM_PREFIX = "triton_python_backend_shm_region"
PROBE_TIMEOUT_S = 5.0  # an identity or readiness probe unanswered this long fails


ACCESS_HEADER = "llm-worker-key"  # the HTTP header; over gRPC Triton expects GRPC_ACCESS_HEADER
GRPC_ACCESS_HEADER = f"triton-grpc-protocol-{ACCESS_HEADER}"
# every protocol group but health (server live/ready, model ready)
RESTRICTED = "inference,model-repository,metadata,model-config,statistics,shared-memory,trace,logging"


class TritonServer:
    """A running `tritonserver` process. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        model_repository: Path,
        work_dir: Path,
        grpc_port: int = 0,
        http_port: int = 0,
        metrics_port: int = 0,
        exit_timeout_s: int = 10,
        trace_url: str = "",
        host: str = "127.0.0.1",
        access_key: str | None = None,
    ) -> None:
        """trace_url: an OTLP/HTTP traces URL; Triton then exports a span per request there,
        joined to the caller's trace through the request's W3C `traceparent` header.
        host: the address it binds (loopback unless frontends on other hosts must reach it).
        access_key: the key its restricted protocols need (None: one drawn for this server; a fleet
        shares one, [fleet] worker_key, with its frontends)."""
        self.install = TritonInstall.locate()
        self.model_repository = model_repository.resolve()
        self.work_dir = work_dir.resolve()
        self.grpc_port = grpc_port or free_port()
        self.http_port = http_port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.exit_timeout_s = exit_timeout_s
        self.trace_url = trace_url
        self.host = host
        self.log_path = work_dir / f"tritonserver-{self.grpc_port}.log"
        self._access_key = access_key or secrets.token_urlsafe(32)
        self.process: subprocess.Popen[bytes] | None = None
        self.server_id = ""  # this launch's --id, new at every start()
        # the Python backend's shared-memory regions of this server carry its own prefix, so a
        # stop (or the clean-up after a crash) never touches another server's regions
        self.shm_prefix = f"{SHM_PREFIX}_{os.getpid()}_{self.grpc_port}_"

    @property
    def grpc_url(self) -> str:
        """Where this process reaches it (loopback when it binds every address)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{host}:{self.grpc_port}"

    @property
    def grpc_headers(self) -> dict[str, str]:
        """The metadata every restricted gRPC call to this server carries (its access key)."""
        return {GRPC_ACCESS_HEADER: self._access_key}

    def start(self, timeout_s: float = 60.0) -> TritonServer:
        """Launches the server and waits until it is live; TritonError when a port is taken, or the
        server exits or does not answer as this launch in time."""
        self.launch()
        self.wait_live(timeout_s)
        return self

    def launch(self) -> None:
        """Starts the server's process (wait_live() waits for it); TritonError when a port is taken.
        The parent-death signal follows the launching thread: launch from one that outlives it."""
        ensure_free(self.host, grpc=self.grpc_port, http=self.http_port, metrics=self.metrics_port)
        self.server_id = f"llm-worker-{secrets.token_hex(8)}"
        backend_dir = assemble_backend_dir(self.install, self.work_dir / "backends")
        args = [
            str(self.install.binary),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backend_dir}",
            f"--cache-directory={self.install.caches}",
            f"--id={self.server_id}",
            "--model-control-mode=explicit",
            # our configs are complete: else the Python backend starts a stub per load only to ask for it
            "--disable-auto-complete-config",
            f"--grpc-address={self.host}",
            f"--http-address={self.host}",
            f"--metrics-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--http-port={self.http_port}",
            f"--metrics-port={self.metrics_port}",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            f"--grpc-restricted-protocol={RESTRICTED}:{ACCESS_HEADER}={self._access_key}",
            f"--http-restricted-api={RESTRICTED}:{ACCESS_HEADER}={self._access_key}",
            *trace_args(self.trace_url),
            "--log-verbose=0",
        ]
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._remove_shm()  # left by an earlier process of this server that was killed
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                dying_with_this_process(args),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=launch_env(self.install),
                start_new_session=True,
                umask=0o077,  # the files it writes: its user's alone
            )

    def _client(self) -> Any:
        import tritonclient.grpc as grpcclient

        return grpcclient.InferenceServerClient(self.grpc_url)

    def wait_live(self, timeout_s: float = 60.0) -> None:
        """Waits until the launched server is live and answers as this launch; TritonError (the
        server stopped) when it exits or does not in `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        client = self._client()
        try:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise TritonError(
                        f"tritonserver exited with {self.process.returncode}; see {self.log_path}"
                    )
                try:
                    live = client.is_server_live()
                except Exception:
                    live = False
                if live:
                    try:
                        self._check_identity(client)
                    except TritonError:
                        self.stop()
                        raise
                    return
                time.sleep(0.1)
        finally:
            client.close()
        self.stop()
        raise TritonError(f"tritonserver did not become live in {timeout_s:.0f}s; see {self.log_path}")

    def _check_identity(self, client: Any) -> None:
        name = client.get_server_metadata(headers=self.grpc_headers, client_timeout=PROBE_TIMEOUT_S).name
        if name != self.server_id:
            raise TritonError(f"{self.grpc_url} is answered by another server ({name!r}), not this launch")

    def check(self, models: list[str]) -> None:
        """TritonError unless the server on our port is this launch and every model is ready."""
        from tritonclient.utils import InferenceServerException

        client = self._client()
        try:
            self._check_identity(client)
            for name in models:
                if not client.is_model_ready(name, client_timeout=PROBE_TIMEOUT_S):
                    raise ModelNotReady(name)
        except InferenceServerException as e:
            raise TritonError(f"{self.grpc_url} did not answer: {e.message()}") from e
        finally:
            client.close()

    def load_model(self, name: str) -> None:
        """Loads a model and waits until it is ready; TritonError with Triton's reason otherwise."""
        from tritonclient.utils import InferenceServerException

        client = self._client()
        try:
            client.load_model(name, headers=self.grpc_headers)
            self._restrict_shm()
            if not client.is_model_ready(name):
                raise TritonError(f"model {name} did not become ready")
        except InferenceServerException as e:
            raise TritonError(f"loading {name} failed: {e.message()}") from e
        finally:
            client.close()

    def unload_model(self, name: str, timeout_s: float = 60.0) -> None:
        """Unloads a model and waits until the repository index shows it unloaded (UNAVAILABLE:
        Triton lets the requests it holds finish first); TritonError with Triton's reason, or when
        it is still unloading after `timeout_s`."""
        from tritonclient.utils import InferenceServerException

        client = self._client()
        try:
            client.unload_model(name, headers=self.grpc_headers)
        except InferenceServerException as e:
            raise TritonError(f"unloading {name} failed: {e.message()}") from e
        finally:
            client.close()
        deadline = time.monotonic() + timeout_s
        while self.repository_index().get(name) in ("READY", "UNLOADING"):
            if time.monotonic() > deadline:
                raise TritonError(f"model {name} is still unloading after {timeout_s:.0f} s")
            time.sleep(0.05)

    def repository_index(self) -> dict[str, str]:
        """Triton's model repository index: model name -> state (READY, UNAVAILABLE, ...)."""
        client = self._client()
        try:
            index = client.get_model_repository_index(headers=self.grpc_headers, as_json=True)
        finally:
            client.close()
        return {m["name"]: m.get("state", "") for m in index.get("models", [])}

    def stop(self, kill: bool = False) -> None:
        """Ends the server (kill: at once, without waiting for its models to finish)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None and not kill:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.exit_timeout_s + 10)
        if proc is not None:
            _kill_group(proc.pid)
            if proc.poll() is None:
                proc.wait(timeout=10)
        self._remove_shm()

    def _restrict_shm(self) -> None:
        """This server's shared-memory regions: readable and writable by its user alone."""
        for name in _shm_regions():
            if name.startswith(self.shm_prefix):
                with contextlib.suppress(FileNotFoundError):
                    (SHM / name).chmod(0o600)

    def _remove_shm(self) -> None:
        for name in _shm_regions():
            if name.startswith(self.shm_prefix):
                (SHM / name).unlink(missing_ok=True)

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill_group(pgid: int) -> None:
    """SIGKILLs whatever is left of the server's process group (Python-backend stubs)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _shm_regions() -> set[str]:
    try:
        return {p.name for p in SHM.iterdir() if p.name.startswith(SHM_PREFIX)}
    except FileNotFoundError:
        return set()
