"""vLLM (CPU build) as a peer: its OpenAI-compatible server from the scratch environment
var/bench-envs/vllm, on the platform's own unquantized artifact, on a loopback port.

The artifact is a Hugging Face folder (config.json, model.safetensors, tokenizer.json, chat template)
and vLLM starts on it as it is, but without a tokenizer_config.json transformers loads a tokenizer
that knows no special tokens (no EOS), and without a generation_config.json vLLM reads its EOS from
that tokenizer. `model_folder` makes a scratch copy under var/bench-envs/vllm-models/ with links to
the artifact's files and those two files written beside them; the artifact itself is never changed.

Requests send the prompt as token ids (vLLM then sees exactly the tokens the platform sees), greedy
(temperature 0), with ignore_eos and max_tokens = the forced output length, streamed with
return_token_ids so that each chunk's tokens are counted exactly. The server keeps request logging
off (its default), so prompts and outputs never reach its log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.load.driver import Job
from bench.peers.completions import Chunk, CompletionsTarget, first_choice
from bench.peers.scratch_env import ENVS_DIR, VLLM_ENV
from bench.processes.server_process import LoopbackServer, free_port

SERVED_NAME = "smollm2-135m"
START_TIMEOUT_S = 600.0  # about 90 s on 2 cores; more while something else runs
LINKED = ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja")


def available(artifact: Path | None) -> str | None:
    """None when the vLLM peer can run, else why not."""
    if why := VLLM_ENV.missing():
        return why
    if artifact is None or not (artifact / "model.safetensors").exists():
        return "no model artifact (make artifact)"
    return None


def special_tokens(tokenizer_json: dict[str, Any], config: dict[str, Any]) -> dict[str, str]:
    """The tokenizer_config.json names of the config's special token ids (bos, eos, pad, unk)."""
    names = {t["id"]: t["content"] for t in tokenizer_json.get("added_tokens", [])}
    out = {}
    for key in ("bos", "eos", "pad", "unk"):
        token_id = config.get(f"{key}_token_id")
        if isinstance(token_id, int) and token_id in names:
            out[f"{key}_token"] = names[token_id]
    return out


def tokenizer_config(tokenizer_json: dict[str, Any], config: dict[str, Any], context: int) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": context,
        "add_bos_token": False,  # the artifact's tokenizer adds no special tokens
        "clean_up_tokenization_spaces": False,
        **special_tokens(tokenizer_json, config),
    }


def generation_config(config: dict[str, Any]) -> dict[str, Any]:
    """Token ids only: no sampling defaults, so a request's own settings are the ones used."""
    keys = ("bos_token_id", "eos_token_id", "pad_token_id")
    return {k: config[k] for k in keys if k in config}


def model_folder(artifact: Path, scratch: Path) -> Path:
    """A Hugging Face folder for vLLM at scratch/<artifact version>/: links to the artifact's files
    plus the two configuration files it lacks. Idempotent; rewritten only when missing."""
    folder = scratch / artifact.name
    folder.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link, source = folder / name, (artifact / name).resolve()
        if source.exists() and not link.exists():
            link.symlink_to(source)
    config = json.loads((artifact / "config.json").read_text())
    tokenizer = json.loads((artifact / "tokenizer.json").read_text())
    context = int(config.get("max_position_embeddings", 2048))
    written = {
        "tokenizer_config.json": tokenizer_config(tokenizer, config, context),
        "generation_config.json": generation_config(config),
    }
    for name, value in written.items():
        text = json.dumps(value, indent=1, sort_keys=True)
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return folder


def server(artifact: Path, log: Path, dtype: str, max_model_len: int = 4096) -> LoopbackServer:
    """vLLM's OpenAI server on a free loopback port: 2 OpenMP threads bound to cores 0-1, 4 GiB of
    KV cache, offline (no hub, no usage reports), started in the scratch folder so that the
    checkout's packages are not on its path."""
    scratch = ENVS_DIR / "vllm-models"
    folder = model_folder(artifact, scratch)
    port = free_port()
    argv = [str(VLLM_ENV.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder)]
    argv += ["--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--dtype", dtype, "--max-model-len", str(max_model_len)]
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_CPU_OMP_THREADS_BIND": "0-1",
        "VLLM_HOST_IP": "127.0.0.1",  # its internal queues too stay on loopback
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    env.pop("PYTHONPATH", None)
    return LoopbackServer(
        "vLLM", argv, port, "/health", log, env=env, cwd=scratch, start_timeout_s=START_TIMEOUT_S
    )


def request_body(job: Job) -> dict[str, Any]:
    n = job.spec.output_tokens
    return {
        "model": SERVED_NAME,
        "prompt": list(job.prompt_ids),
        "max_tokens": n,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "return_token_ids": True,
    }


def chunk_tokens(chunk: Chunk) -> int:
    """Output tokens in a chunk: its token_ids (return_token_ids); the prompt's come apart."""
    ids = first_choice(chunk).get("token_ids") or []
    return len(ids)


def target(url: str) -> CompletionsTarget:
    return CompletionsTarget("vllm", url, request_body, chunk_tokens)
