"""The measured step cost (engine/cost_model.py), kept between loads of the same model on the same
machine, so a warm start skips the ~10 s of timed probe steps.

A cost belongs to what shapes a step's time: the model version, its dtypes, the kernels' build (its
path names the build key: sources, compiler, CPU flags; and its `LLM_KERNELS_*` path switches), the
engine's own Python sources (how a step runs them), the thread counts, the CPU model and count, and
the probe shapes themselves. Each such key is one JSON file in the cache folder, written
atomically. Delete the folder to measure again.

A cost measured while the host was busy (other versions loading, tests running beside it) would
size every step after it too small, for as long as it is cached: on 2 Zen 3 cores the cached
costs of one day's starts ranged 1.25-2.54 ms a prompt token. So each entry keeps the time of a
reference step (engine/cost_model.py `reference_step`) timed with it, and a load that finds the
entry times that step again (`resolve`): when it now runs more than FASTER faster, the cost is
measured again and replaces the entry. A slower reference step keeps the entry: the host is busier
now than when it was measured, and a cost measured now would be the pessimistic one.

The versions of a worker load side by side (serving/workers.py), so `loading()` keeps a measurement
to itself: a worker that measures holds the folder's lock exclusively while it hashes its artifact,
loads its weights and times its steps; one whose cost is cached holds it shared while it hashes and
loads, then exclusively while it times its reference step (`Hold.exclusive`). Cached loads overlap
one another's weight loads, never a timed step. (Timed beside the other default version's load, the
reference step took twice its time alone.)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from engine import cost_model
from engine.step_budget import StepCost

FASTER = 0.15  # a reference step this much faster than the cached one's: the cost is measured again


@dataclass(slots=True, frozen=True)
class Entry:
    cost: StepCost
    reference_s: float  # the reference step's time when the cost was measured


def stale(entry: Entry, reference_s: float) -> bool:
    """Whether the reference step, now `reference_s`, runs more than FASTER faster than when the
    entry's cost was measured (so it was measured on a busy host)."""
    return reference_s < entry.reference_s * (1.0 - FASTER)


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
        # the kernels' path switches (engine/kernels.py `load`): another path, another cost
        "kernel_settings": {k: v for k, v in sorted(os.environ.items()) if k.startswith("LLM_KERNELS_")},
        "engine": engine_sources(),
        "threads": [torch_threads, kernel_threads],
        "cpu": [cpu_model(), os.cpu_count()],
        "probes": [
            list(cost_model.PROBE_TOKENS),
            list(cost_model.PROBE_DECODES),
            list(cost_model.CONTEXT_PROBE),
            cost_model.REFERENCE_TOKENS,
        ],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def load(folder: Path, key: str) -> Entry | None:
    """The entry cached under `key`, or None (none yet, or a file that does not parse)."""
    try:
        raw = json.loads((folder / f"{key}.json").read_text())
        cost = StepCost(
            float(raw["fixed_s"]),
            float(raw["per_decode_s"]),
            float(raw["per_prefill_token_s"]),
            float(raw["per_attended_s"]),
        )
        reference_s = float(raw["reference_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    least = min(cost.fixed_s, cost.per_decode_s, cost.per_prefill_token_s, cost.per_attended_s)
    return Entry(cost, reference_s) if least >= 0 and reference_s > 0 else None


def save(folder: Path, key: str, entry: Entry) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({**asdict(entry.cost), "reference_s": entry.reference_s}))
    tmp.replace(folder / f"{key}.json")


def resolve(
    cached: Entry | None, reference: Callable[[], float], measure: Callable[[], StepCost]
) -> tuple[Entry, str]:
    """The entry to serve with and how it was found ("cached", "measured", or "measured again" and
    why): `cached` unless it is missing or stale; otherwise `measure()`, then `reference()` timed
    (the caller saves a new entry). The caller holds the folder's lock exclusively: a step timed
    beside another version's load would say nothing of this host."""
    why = "measured"
    if cached is not None:
        now = reference()
        if not stale(cached, now):
            return cached, "cached"
        was = cached.reference_s * 1e3
        why = f"measured again: the reference step took {now * 1e3:.1f} ms, {was:.1f} ms when cached"
    cost = measure()
    return Entry(cost, reference()), why


class Hold:
    """A load's hold on the cache folder's lock (none without a folder)."""

    def __init__(self, lock: IO[str] | None) -> None:
        self._lock = lock

    def exclusive(self) -> None:
        """From shared to exclusive, for a load whose cost is cached once its weights are loaded: its
        reference step is timed alone (Linux converts by releasing first, so two loads converting
        at once never deadlock; they take turns)."""
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_EX)


@contextmanager
def loading(folder: Path | None, measuring: bool) -> Iterator[Hold]:
    """Held while a worker hashes its artifact and loads its weights, exclusive when its cost is
    to be measured, else shared until `Hold.exclusive()` before its steps are timed; on
    `folder`/.lock; no folder: no lock."""
    if folder is None:
        yield Hold(None)
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if measuring else fcntl.LOCK_SH)
        yield Hold(lock)  # closing the file releases the lock
