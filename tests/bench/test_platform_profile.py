"""The through-platform step profile's arithmetic: /proc stat lines, the frontend's relayed worker
counters, and per-step figures from two snapshots (bench/platform_profile.py, bench/processes/proc_cpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.platform_profile import Snapshot, counters, per_step
from bench.processes.proc_cpu import ROLES, TICK_S, cpu_s, tree_cpu

METRICS = """# HELP llm_worker_steps_total relayed from Triton: llm_worker_steps_total
llm_worker_steps_total{model="m",worker="w1"} 1000.0
llm_worker_batched_tokens_total{model="m",worker="w1"} 32000.0
llm_worker_loop_seconds_total{model="m",part="cancel_check",worker="w1"} 0.5
llm_worker_loop_seconds_total{model="m",part="schedule",worker="w1"} 1.0
llm_worker_loop_seconds_total{model="m",part="model",worker="w1"} 50.0
llm_worker_loop_seconds_total{model="m",part="respond",worker="w1"} 2.0
llm_worker_sequences{model="m",state="running",worker="w1"} 32.0
llm_worker_sequences{model="m",state="waiting",worker="w1"} 3.0
"""


def test_a_stat_line_is_read_after_the_command_name_whatever_it_holds(tmp_path: Path) -> None:
    fields = ["S", *["0"] * 10, "250", "50", *["0"] * 30]  # fields 3.., utime and stime at 14, 15
    stat = tmp_path / "stat"
    stat.write_text("4242 (odd (name) x) " + " ".join(fields) + "\n")
    assert cpu_s(stat) == pytest.approx(300 * TICK_S)
    assert cpu_s(tmp_path / "gone") == 0.0


def test_the_relayed_worker_counters_are_read_by_part() -> None:
    steps, tokens, loop, running = counters(METRICS)
    assert (steps, tokens, running) == (1000.0, 32000.0, 32.0)
    assert loop == {"schedule": 1.0, "model": 50.0, "respond": 2.0, "cancel_check": 0.5}


def test_per_step_figures_are_counter_deltas_and_cpu_shares_of_the_step() -> None:
    cpu = dict.fromkeys(ROLES, 0.0)
    loop = {"schedule": 1.0, "model": 50.0, "respond": 2.0, "cancel_check": 0.5}
    a = Snapshot(at=10.0, client_cpu=1.0, cpu=cpu, steps=1000, tokens=32000, loop=loop)
    later = {"schedule": 1.2, "model": 55.0, "respond": 2.1, "cancel_check": 0.5}
    b = Snapshot(10.0 + 5.3, 1.5, cpu | {"frontend": 1.06, "tritonserver": 0.53}, 1100, 35200, later)
    out = per_step(a, b)  # 100 steps of 53 ms: 5.3 s of loop time in a 5.3 s window
    assert out["steps"] == 100 and out["tokens a step"] == 32
    assert (out["schedule"], out["model"], out["respond"]) == pytest.approx((2.0, 50.0, 1.0))
    assert out["step"] == pytest.approx(53.0)
    assert out["cpu frontend"] == pytest.approx(0.2 * 53.0)  # 20% of a CPU over the window
    assert out["cpu tritonserver"] == pytest.approx(0.1 * 53.0)
    assert out["cpu load client"] == pytest.approx(0.5 / 5.3 * 53.0)
    cpus = len(os.sched_getaffinity(0))
    assert out["cpu idle"] == pytest.approx(max(0.0, cpus * 53.0 - 10.6 - 5.3 - 5.0))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_tree_is_counted_once_by_role() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        own = Path(f"/proc/{os.getpid()}/stat")
        before = cpu_s(own)
        spent = tree_cpu(os.getpid())  # this process as the frontend, its child as "other"
        after = cpu_s(own)
        assert set(spent) == set(ROLES)
        assert before <= spent["frontend"] <= after  # read between the two: no tolerance to tune
        assert spent["frontend"] > 0 and spent["tritonserver"] == 0.0 and spent["engine loop"] == 0.0
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_the_request_cost_reads_the_frontends_store_counters() -> None:
    from bench.request_cost import store_work

    text = (
        "# TYPE llm_store_statements_total counter\nllm_store_statements_total 2532.0\n"
        "llm_store_transactions_total 287.0\nllm_store_round_trips_total 3393.0\n"
        'llm_store_statements_created{x="y"} 5.0\n'
    )
    assert store_work(text) == {"statements": 2532.0, "transactions": 287.0, "round_trips": 3393.0}
