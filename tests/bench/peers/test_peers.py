"""Which wanted peers are skipped, and why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.load.metrics import Outcome
from bench.peers.peers import PEERS, Peer, run_http, unavailable


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


def test_the_peers_are_llama_cpp_vllm_openvino_and_ort_genai() -> None:
    assert sorted(PEERS) == [
        "llama.cpp",
        "llama.cpp-server",
        "openvino-int4",
        "openvino-int8",
        "ortgenai-int4",
        "vllm",
    ]


class Recorder:
    """A stand-in for a LoopbackServer and its CompletionsTarget that records what happens to them."""

    url = "http://127.0.0.1:1"

    def __init__(self) -> None:
        self.events: list[str] = []

    def __enter__(self) -> Recorder:
        self.events.append("server started")
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append("server stopped")

    def target(self, url: str) -> Recorder:
        self.events.append(f"client for {url}")
        return self

    def close(self) -> None:
        self.events.append("client closed")


def test_an_interrupted_http_run_stops_the_server_before_joining_its_client() -> None:
    rec = Recorder()

    def interrupted(_: object) -> list[Outcome]:
        rec.events.append("run")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_http(rec, rec.target, interrupted)  # type: ignore[arg-type]
    assert rec.events == [
        "server started",
        "client for http://127.0.0.1:1",
        "run",
        "server stopped",
        "client closed",
    ]


class ProcessRecorder(Recorder):
    """A Recorder whose server is a real process, as a LoopbackServer's is."""

    name = "sleeper"

    def __enter__(self) -> ProcessRecorder:
        code = "import sys; print('ready', flush=True); sys.stdin.read()"  # lives until stdin closes
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"  # started
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.communicate()  # closes its stdin: it exits


def test_a_peer_served_over_http_has_its_process_tree_s_peak_memory_noted() -> None:
    """Its memory is sampled as the platform's is: the same sampling cost, and a figure beside it."""
    rec, notes = ProcessRecorder(), list[str]()
    run_http(rec, rec.target, lambda _: [], notes, "offline")  # type: ignore[arg-type]
    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip()  # the server's name: same executable
    assert len(notes) == 1 and notes[0].startswith("sleeper @ offline: peak memory "), notes
    mib = int(notes[0].removeprefix("sleeper @ offline: peak memory ").split(" MiB")[0])
    assert mib > 0 and f"PSS of its process tree: {comm} " in notes[0]
