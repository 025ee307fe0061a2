"""A worker host's side of the prefix-cache summaries: each engine (one per model, per Triton
instance) writes its own file under its `tritonserver`'s pid (worker/prefix_summary.py); this reads
a worker's files, joins the instances of one version, and names them by version id for the
registry (serving/supervisor.py publishes them at every heartbeat). A file not rewritten for
STALE_S belongs to an engine that is gone (a restart, an unload) and is removed."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from contracts.prefix_summary import CacheSummary, read_summary
from serving.workers import LocalWorker

STALE_S = 20.0  # a live engine rewrites its file at least every 5 s


def worker_summaries(worker: LocalWorker, folder: Path, now: float | None = None) -> dict[str, CacheSummary]:
    """version id -> what the worker's engines for it hold now ({} while its server is down)."""
    proc = worker.server.process
    if proc is None:
        return {}
    now = time.time() if now is None else now
    by_model = {v.triton_model_name: v.version_id for _, v in worker.versions}
    found: dict[str, CacheSummary] = {}
    for path in sorted((folder / str(proc.pid)).glob("*.json")):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE_S:
                path.unlink()
                continue
        version_id = by_model.get(path.name.split(".")[0])
        summary = read_summary(path)
        if version_id is None or summary is None:
            continue
        held = found.get(version_id)
        found[version_id] = summary if held is None else held.union(summary)
    return found
