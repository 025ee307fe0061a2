"""Start-up: how long `make serve` (`python -m serving`) takes from launch to ready, cold and warm.

    ready        the frontend serves: every configured version is loaded in Triton (its warm-up
                 done, its checksums passed) and the gRPC and HTTP listeners are bound (the line
                 "Ctrl-C stops everything" on its stdout)
    first token  ready, then one Generate of one output token on every alias, one after another

Each run launches `python -m serving` as a child process with the default models (fp32 and int4)
on free loopback ports, a store and a Triton work folder of this invocation (the first run creates
and migrates the store, the later ones find it), and stops it with SIGTERM once measured. The first
run is cold: the start-up caches under var/ (measured step costs, var/step-cost; checksums already
verified, var/verified; torch's version and ABI for the kernels' key, var/kernels/.torch-*.json)
are deleted first, so it measures, hashes and imports everything again (the kernels' build itself
is kept: that is set-up); the others are warm (second start, caches filled). The operating
system's page cache is left as it is: the artifacts have been read before any run. Take the
machine to yourself while it runs.

Run: `python -m bench startup [--warm 2] [--no-cold]`. Prints one line per run and the child's log
lines with the second at which each arrived (var/bench/startup-<run>.log, and its tritonserver's
beside it: startup-<run>.triton.log); writes
var/bench/startup.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc

from config.settings import DEFAULT_INT4_ALIAS, DEFAULT_MODEL_ALIAS, LOCAL_API_KEY, LOCAL_TENANT
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
CACHES = (ROOT / "var" / "step-cost", ROOT / "var" / "verified")  # and var/kernels/.torch-*.json
READY_LINE = "Ctrl-C stops everything"
ADDRESS_PREFIX = "llm platform: gRPC frontend on "
ALIASES = (DEFAULT_MODEL_ALIAS, DEFAULT_INT4_ALIAS)


@dataclass(slots=True, frozen=True)
class Run:
    kind: str  # "cold" or "warm"
    ready_s: float  # launch -> the frontend serves every configured version
    first_token_s: float  # launch -> one token received from every alias, in turn


def config_toml(folder: Path) -> str:
    """The default config (both versions, the local tenant) on free ports, with its own store."""
    return f"""
[frontend]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
[http]
listen = "127.0.0.1:0"
[store]
url = "sqlite:///{folder / "control.sqlite"}"
[triton]
grpc_port = 0
http_port = 0
metrics_port = 0
work_dir = "{folder / "triton"}"
[[tenants]]
id = "{LOCAL_TENANT}"
api_keys = ["{LOCAL_API_KEY}"]
[[models]]
alias = "{DEFAULT_MODEL_ALIAS}"
[[models]]
alias = "{DEFAULT_INT4_ALIAS}"
quantization = "int4"
"""


class Child:
    """`python -m serving --config ...`, its output lines kept with the second each arrived."""

    def __init__(self, config: Path) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "serving", "--config", str(config)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self.address = ""
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.perf_counter() - self.started, line.rstrip("\n")))
            if line.startswith(ADDRESS_PREFIX):
                self.address = line.removeprefix(ADDRESS_PREFIX).strip()
            if READY_LINE in line:
                self.ready.set()
        self.ready.set()  # it exited: wait_ready() reports it

    def wait_ready(self, timeout_s: float) -> float:
        if not self.ready.wait(timeout_s) or self.proc.poll() is not None:
            tail = "\n".join(line for _, line in self.lines[-20:])
            raise RuntimeError(f"the platform did not become ready; its output ends:\n{tail}")
        return next(t for t, line in self.lines if READY_LINE in line)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout=10)


async def first_tokens(address: str) -> None:
    """One output token from every alias, in turn."""
    metadata = (("authorization", f"Bearer {LOCAL_API_KEY}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = generations_pb2_grpc.GenerationsStub(channel)
        for alias in ALIASES:
            req = pb.GenerateRequest(
                request_id=f"bench-startup-{time.time_ns()}-{alias}",
                model=alias,
                prompt="Hello",
                max_output_tokens=1,
                sampling=pb.SamplingParams(ignore_eos=True),
            )
            async for ev in stub.Generate(req, metadata=metadata):
                if ev.HasField("delta") and ev.delta.token_ids:
                    break


def one_run(kind: str, config: Path, log: Path, timeout_s: float) -> Run:
    """One launch, measured; its output goes to `log`, its tritonservers' logs beside it."""
    if kind == "cold":
        for cache in CACHES:
            shutil.rmtree(cache, ignore_errors=True)
        for record in (ROOT / "var" / "kernels").glob(".torch-*.json"):
            record.unlink()
    child = Child(config)
    try:
        ready = child.wait_ready(timeout_s)
        asyncio.run(first_tokens(child.address))
        first = child.elapsed()
    finally:
        child.stop()
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(f"{t:7.2f} {line}\n" for t, line in child.lines))
        for server_log in (config.parent / "triton").glob("tritonserver-*.log"):
            shutil.move(server_log, log.with_suffix(".triton.log"))
    return Run(kind, round(ready, 2), round(first, 2))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=2, help="warm starts after the cold one")
    parser.add_argument("--no-cold", action="store_true", help="keep the caches: every run is warm")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a start may take")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args()
    kinds = ([] if args.no_cold else ["cold"]) + ["warm"] * args.warm
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        config = Path(tmp) / "platform.toml"
        config.write_text(config_toml(Path(tmp)))
        for i, kind in enumerate(kinds, 1):
            log = args.out / f"startup-{i}.log"
            run = one_run(kind, config, log, args.timeout)
            runs.append(run)
            print(
                f"run {i} ({kind}): ready {run.ready_s:.1f} s, first token {run.first_token_s:.1f} s ({log})"
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0
