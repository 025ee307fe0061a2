"""The serving benchmark's peers, each run from its scratch environment (bench/peers/scratch_env.py) on
the same requests as the platform: whether it can run here, and how one load is run on it (start
it, warm it up with one request, drive the load, stop it).

    llama.cpp          llama_cpp.Llama in-process, one request at a time (bench/peers/llamacpp.py)
    llama.cpp-server   llama-cpp-python's OpenAI server over HTTP (bench/peers/llamacpp.py)
    vllm               vLLM's OpenAI server over HTTP, batching (bench/peers/vllm_peer.py)
    openvino-int4      OpenVINO GenAI's continuous-batching pipeline in-process, int4 and int8
    openvino-int8      weight compression of our weights (bench/peers/openvino_peer.py)
    ortgenai-int4      ONNX Runtime GenAI's engine in-process on its model builder's int4 CPU
                       model of our weights (bench/peers/ortgenai_peer.py)

A peer whose environment is missing is skipped with the reason (`make bench-deps` installs them).
Each peer's own output goes to <out>/<peer>.log; none of them logs prompts or outputs. Its peak
memory over the load is sampled as the platform's is (bench/processes/pss.py): each pays a sampling cost
(a few tenths of a percent of the 2 cores) and the report has both figures.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.load.driver import Job, Target, drive
from bench.load.metrics import Outcome
from bench.load.workload import Load
from bench.peers import llamacpp, openvino_peer, ortgenai_peer, vllm_peer
from bench.peers.completions import CompletionsTarget
from bench.peers.pipe_worker import PipeWorker
from bench.processes.pss import PeakPss, memory_note
from bench.processes.server_process import LoopbackServer

Run = Callable[[list[Job], Load, argparse.Namespace, Job, list[str]], list[Outcome]]
Runner = Callable[[CompletionsTarget], list[Outcome]]


def warm_and_drive(
    target: Target, jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job
) -> list[Outcome]:
    asyncio.run(target.generate(warm_up, Outcome(-1, "warm-up", 0.0, warm_up.spec.output_tokens)))
    return asyncio.run(drive(target, jobs, load, args.seed, args.timeout))


def driver(jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job) -> Runner:
    """warm_and_drive of the load, against whatever target a server's client is."""
    return lambda target: warm_and_drive(target, jobs, load, args, warm_up)


def gguf() -> Path:
    path = llamacpp.gguf_path()
    assert path is not None  # checked by why_not before any run
    return path


def artifact() -> Path | None:
    from config.settings import ModelSettings
    from serving.workers import artifact_for

    try:
        return artifact_for(ModelSettings())
    except Exception:  # no artifact and none can be built: the peer says so
        return None


def sampled(pid: int, who: str, notes: list[str], run: Callable[[], list[Outcome]]) -> list[Outcome]:
    """run() while the peak memory of `pid`'s process tree is sampled; its note goes to notes."""
    with PeakPss(pid) as peak:
        outcomes = run()
    notes.append(memory_note(who, peak))
    print(notes[-1], flush=True)
    return outcomes


def run_llamacpp(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
) -> list[Outcome]:
    with llamacpp.InProcessLlamaCpp(gguf(), args.out / "llama.cpp.log") as target:
        assert target.proc is not None
        return sampled(
            target.proc.pid,
            f"llama.cpp @ {load.label}",
            notes,
            lambda: warm_and_drive(target, jobs, load, args, warm_up),
        )


def run_http(
    server: LoopbackServer,
    target: Callable[[str], CompletionsTarget],
    run: Runner,
    notes: list[str] | None = None,
    label: str = "",
) -> list[Outcome]:
    """Runs `run` against the server's target (with notes: its tree's peak memory sampled, noted as
    `<server> @ <label>`); the server is stopped before the target's client threads are joined, so
    that an interrupted run does not wait for its streams to end."""
    client = None
    try:
        with server:
            client = target(server.url)
            if notes is None or server.proc is None:
                return run(client)
            return sampled(server.proc.pid, f"{server.name} @ {label}", notes, partial(run, client))
    finally:
        if client is not None:
            client.close()


def run_llamacpp_server(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
) -> list[Outcome]:
    server = llamacpp.server(gguf(), args.out / "llama.cpp-server.log")
    return run_http(server, llamacpp.server_target, driver(jobs, load, args, warm_up), notes, load.label)


def run_vllm(
    jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
) -> list[Outcome]:
    folder = artifact()
    assert folder is not None  # checked by why_not before any run
    server = vllm_peer.server(folder, args.out / "vllm.log", args.vllm_dtype)
    return run_http(server, vllm_peer.target, driver(jobs, load, args, warm_up), notes, load.label)


def run_in_process(make: Callable[[Path, argparse.Namespace], PipeWorker]) -> Run:
    """A Run for a peer whose worker process runs it in-process (bench/peers/pipe_worker.py)."""

    def run(
        jobs: list[Job], load: Load, args: argparse.Namespace, warm_up: Job, notes: list[str]
    ) -> list[Outcome]:
        folder = artifact()
        assert folder is not None  # checked by why_not before any run
        with make(folder, args) as target:
            assert target.proc is not None
            notes.append(f"{target.name} ran with {target.settings_note()}")
            return sampled(
                target.proc.pid,
                f"{target.name} @ {load.label}",
                notes,
                lambda: warm_and_drive(target, jobs, load, args, warm_up),
            )

    return run


def openvino(scheme: str) -> Callable[[Path, argparse.Namespace], PipeWorker]:
    def make(folder: Path, args: argparse.Namespace) -> PipeWorker:
        batched = getattr(args, "openvino_batched_tokens", openvino_peer.BATCHED_TOKENS)
        return openvino_peer.worker(folder, scheme, args.out / f"openvino-{scheme}.log", batched)

    return make


@dataclass(slots=True, frozen=True)
class Peer:
    why_not: Callable[[], str | None]  # None when it can run here, else the reason it cannot
    run: Run  # one load on a fresh instance of the peer


PEERS = {
    "llama.cpp": Peer(lambda: llamacpp.available(llamacpp.gguf_path()), run_llamacpp),
    "llama.cpp-server": Peer(lambda: llamacpp.available(llamacpp.gguf_path()), run_llamacpp_server),
    "vllm": Peer(lambda: vllm_peer.available(artifact()), run_vllm),
    "openvino-int4": Peer(lambda: openvino_peer.available(artifact()), run_in_process(openvino("int4"))),
    "openvino-int8": Peer(lambda: openvino_peer.available(artifact()), run_in_process(openvino("int8"))),
    "ortgenai-int4": Peer(
        lambda: ortgenai_peer.available(artifact()),
        run_in_process(lambda folder, args: ortgenai_peer.worker(folder, args.out / "ortgenai-int4.log")),
    ),
}


def unavailable(wanted: list[str], peers: dict[str, Peer] = PEERS) -> dict[str, str]:
    """The wanted peers that cannot run here, each with its reason."""
    reasons = {name: peers[name].why_not() for name in wanted if name in peers}
    return {name: why for name, why in reasons.items() if why is not None}
