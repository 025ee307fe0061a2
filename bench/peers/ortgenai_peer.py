"""ONNX Runtime GenAI as a peer: its request scheduler (`onnxruntime_genai.Engine`) in-process
(bench/peers/ortgenai_worker.py, run with the scratch environment var/bench-envs/ortgenai), on the
model builder's int4 CPU model of the platform's own fp32 weights:

    ortgenai-int4   `python -m onnxruntime_genai.models.builder -p int4 -e cpu`: MatMulNBits, int4
                    block-wise (block 32, the builder's default), the rest as the builder leaves it

The build goes to var/bench-envs/ortgenai-models/<artifact version>-int4/ once (about 30 s), from the
same Hugging Face folder vLLM reads (bench/peers/vllm_peer.py), offline (hf_token=false). Settings:
ORT's defaults on the CPU (a thread per core) and the engine's own batch (4 requests at once: its
paged, continuous-batching mode is CUDA-only in 0.18; the worker's docstring). Prompts go in as the
platform's token ids, greedy, every request to its forced length.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.peers.pipe_worker import PipeWorker
from bench.peers.scratch_env import ENVS_DIR, ORTGENAI_ENV
from bench.peers.vllm_peer import model_folder

WORKER = Path(__file__).resolve().with_name("ortgenai_worker.py")  # run by path: see its docstring
MODELS = ENVS_DIR / "ortgenai-models"


def available(artifact: Path | None) -> str | None:
    """None when the ORT GenAI peer can run, else why not."""
    if why := ORTGENAI_ENV.missing():
        return why
    if artifact is None or not (artifact / "model.safetensors").exists():
        return "no model artifact (make artifact)"
    return None


def built(artifact: Path, log: Path) -> Path:
    """The model builder's int4 CPU model of the artifact, building it the first time."""
    folder = MODELS / f"{artifact.name}-int4"
    if (folder / "genai_config.json").exists() and (folder / "model.onnx").exists():
        return folder
    source = model_folder(artifact, ENVS_DIR / "vllm-models")
    argv = [str(ORTGENAI_ENV.python), "-m", "onnxruntime_genai.models.builder", "-i", str(source)]
    argv += ["-o", str(folder), "-p", "int4", "-e", "cpu", "-c", str(MODELS / "cache")]
    argv += ["--extra_options", "hf_token=false"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the ORT GenAI model builder failed ({done.returncode}); see {log}")
    return folder


def worker(artifact: Path, log: Path) -> PipeWorker:
    model = built(artifact, log.with_suffix(".build.log"))
    return PipeWorker("ortgenai-int4", [str(ORTGENAI_ENV.python), str(WORKER), "--model", str(model)], log)
