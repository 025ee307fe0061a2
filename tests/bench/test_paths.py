"""Paths the benchmark computes from where its own files are (a module moved to another folder needs
them changed): the checkout the platform's processes start in, the peers' scratch environments, the
llama.cpp worker that the scratch Python runs by path, and the quality gate's held-out text."""

from __future__ import annotations

from pathlib import Path

from bench import platform_profile, quality, startup
from bench.compare import fleet, platform_process
from bench.peers import llamacpp, llamacpp_worker, scratch_env

CHECKOUT = Path(__file__).resolve().parents[2]


def test_the_platforms_processes_start_in_the_checkout() -> None:
    for module in (fleet, platform_process, platform_profile, startup):
        assert module.ROOT == CHECKOUT, module.__name__
    assert (CHECKOUT / "serving" / "__main__.py").is_file()  # `python -m serving` from there


def test_the_peers_environments_and_the_llamacpp_worker_are_where_they_are_looked_for() -> None:
    assert scratch_env.ENVS_DIR == CHECKOUT / "var" / "bench-envs"
    assert Path(llamacpp_worker.__file__).resolve() == llamacpp.WORKER
    assert llamacpp.WORKER.is_file()


def test_the_quality_gates_held_out_text_is_found() -> None:
    assert quality.HELDOUT.is_file()
