"""A worker host reads its engines' prefix-cache summaries: those under its tritonserver's pid,
named by version id, several instances of a version joined, stale files (a gone engine) removed."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from contracts.prefix_summary import CacheSummary, summary_path, write_summary
from serving.prefix_summaries import STALE_S, worker_summaries


def worker(pid: int | None, *models: tuple[str, str]) -> object:
    process = None if pid is None else SimpleNamespace(pid=pid)
    versions = [(None, SimpleNamespace(triton_model_name=name, version_id=vid)) for name, vid in models]
    return SimpleNamespace(server=SimpleNamespace(process=process), versions=versions)


def test_a_workers_summaries_by_version_instances_joined_stale_ones_removed(tmp_path: Path) -> None:
    a = CacheSummary("k", 16, frozenset({b"a" * 8}))
    b = CacheSummary("k", 16, frozenset({b"b" * 8}))
    write_summary(summary_path(tmp_path, 100, "m--1", 201), a)
    write_summary(summary_path(tmp_path, 100, "m--1", 202), b)  # a second instance of the version
    write_summary(summary_path(tmp_path, 100, "other--9", 203), a)  # a model it does not serve
    write_summary(summary_path(tmp_path, 999, "m--1", 301), b)  # another tritonserver's
    stale = summary_path(tmp_path, 100, "m--2", 204)
    write_summary(stale, a)
    old = time.time() - STALE_S - 1
    os.utime(stale, (old, old))
    w = worker(100, ("m--1", "m@1"), ("m--2", "m@2"))
    got = worker_summaries(w, tmp_path)  # type: ignore[arg-type]
    assert got == {"m@1": CacheSummary("k", 16, frozenset({b"a" * 8, b"b" * 8}))}
    assert not stale.exists()
    assert worker_summaries(worker(None, ("m--1", "m@1")), tmp_path) == {}  # type: ignore[arg-type]
