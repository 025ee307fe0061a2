"""Which wanted peers are skipped, and why."""

from __future__ import annotations

from bench.metrics import Outcome
from bench.peers import PEERS, Peer, unavailable


def never_run(*args: object) -> list[Outcome]:
    raise AssertionError("a peer is not run while checking availability")


def test_only_wanted_peers_that_cannot_run_are_reported_with_their_reasons() -> None:
    peers = {
        "ready": Peer(lambda: None, never_run),
        "missing": Peer(lambda: "not installed (make bench-deps)", never_run),
        "unwanted": Peer(lambda: "also missing", never_run),
    }
    wanted = ["platform", "ready", "missing"]
    assert unavailable(wanted, peers) == {"missing": "not installed (make bench-deps)"}


def test_the_peers_are_the_two_llama_cpp_targets_and_vllm() -> None:
    assert sorted(PEERS) == ["llama.cpp", "llama.cpp-server", "vllm"]
