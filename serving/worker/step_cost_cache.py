"""The measured step cost (engine/cost_model.py), kept between loads of the same model on the same
machine, so a warm start skips the ~10 s of timed probe steps.

A cost belongs to what shapes a step's time: the model version, its dtypes, the kernels' build (its
path names the build key: sources, compiler, CPU flags), the engine's own Python sources (how a step
runs them), the thread counts, the CPU model and count, and the probe shapes themselves. Each such
key is one JSON file in the cache folder, written atomically. Delete the folder to measure again
(after moving the host to other work, say): a cost measured while the machine was busy stays as
pessimistic as it was.

The versions of a worker load side by side (serving/workers.py), so `loading()` keeps a measurement
to itself: a worker that measures holds the folder's lock exclusively while it loads its weights and
times its steps, one whose cost is cached holds it shared; cached loads overlap one another, never a
measurement.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from engine import cost_model
from engine.step_budget import StepCost


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def engine_sources(folder: Path = Path(cost_model.__file__).parent) -> str:
    """A digest of engine/*.py: an edit of how a step runs measures the cost again."""
    digest = hashlib.sha256()
    for src in sorted(folder.glob("*.py")):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(
    version_id: str, dtype: str, kv_dtype: str, kernels_library: str, torch_threads: int, kernel_threads: int
) -> str:
    parts = {
        "version": version_id,
        "dtype": dtype,
        "kv_dtype": kv_dtype,
        "kernels": kernels_library,
        "engine": engine_sources(),
        "threads": [torch_threads, kernel_threads],
        "cpu": [cpu_model(), os.cpu_count()],
        "probes": [
            list(cost_model.PROBE_TOKENS),
            list(cost_model.PROBE_DECODES),
            list(cost_model.CONTEXT_PROBE),
        ],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def load(folder: Path, key: str) -> StepCost | None:
    """The cost cached under `key`, or None (none yet, or a file that does not parse)."""
    try:
        raw = json.loads((folder / f"{key}.json").read_text())
        cost = StepCost(
            float(raw["fixed_s"]),
            float(raw["per_decode_s"]),
            float(raw["per_prefill_token_s"]),
            float(raw["per_attended_s"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    least = min(cost.fixed_s, cost.per_decode_s, cost.per_prefill_token_s, cost.per_attended_s)
    return cost if least >= 0 else None


def save(folder: Path, key: str, cost: StepCost) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(cost)))
    tmp.replace(folder / f"{key}.json")


@contextmanager
def loading(folder: Path | None, measuring: bool) -> Iterator[None]:
    """Held while a worker loads its weights and then measures (exclusive) or warms up (shared) its
    steps, on `folder`/.lock; no folder: no lock."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if measuring else fcntl.LOCK_SH)
        yield  # closing the file releases the lock
