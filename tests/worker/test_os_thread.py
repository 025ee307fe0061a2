"""A thread names itself for the OS (what `top -H`, /proc and bench/processes/proc_cpu.py see)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from worker.os_thread import name_os_thread


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names in /proc are Linux's")
def test_a_thread_names_itself_for_the_os_cut_to_15_bytes() -> None:
    seen: list[str] = []

    def run() -> None:
        name_os_thread("llm-a-name-longer-than-15")
        seen.append(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == ["llm-a-name-long"]
    assert Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip() != "llm-a-name-long"
