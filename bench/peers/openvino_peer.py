"""OpenVINO GenAI as a peer: its continuous-batching pipeline in-process (bench/peers/openvino_worker.py,
run with the scratch environment var/bench-envs/openvino), on the platform's own fp32 weights
exported by optimum-intel with weight compression:

    openvino-int4   int4 symmetric, group 32, every projection (--ratio 1.0); optimum keeps the tied
                    embedding / LM head in int8 (asymmetric, per channel). The scheme closest to
                    ours (int4 asymmetric, group 32, LM head rescored in fp32).
    openvino-int8   int8 per channel, every weight (optimum's int8_asym).

The export goes to var/bench-envs/openvino-models/<artifact version>-<scheme>/ once (about 3
minutes on 2 busy cores), from the same Hugging Face folder vLLM reads (bench/peers/vllm_peer.py).

Settings, each one's best on these 2-core hosts: 2 inference threads (one per core: more
oversubscribes), `max_num_batched_tokens` 1024 (the offline batch measured 490 tok/s at 1024, 414 at
256, 426 at 2048 on a Zen 4 host), prefix caching and dynamic split-fuse on (as ours), up to 256
sequences, a 1 GB KV cache in the plugin's default precision (u8 on CPU). `--openvino-batched-tokens`
overrides the first for a sweep. Prompts go in as the platform's token ids, greedy, ignore_eos.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.peers.pipe_worker import PipeWorker
from bench.peers.scratch_env import ENVS_DIR, OPENVINO_ENV
from bench.peers.vllm_peer import model_folder

WORKER = Path(__file__).resolve().with_name("openvino_worker.py")  # run by path: see its docstring
MODELS = ENVS_DIR / "openvino-models"
EXPORT_ARGS = {
    "int4": ["--weight-format", "int4", "--sym", "--group-size", "32", "--ratio", "1.0"],
    "int8": ["--weight-format", "int8"],
}
THREADS = 2
BATCHED_TOKENS = 1024


def available(artifact: Path | None) -> str | None:
    """None when the OpenVINO peers can run, else why not."""
    if why := OPENVINO_ENV.missing():
        return why
    if artifact is None or not (artifact / "model.safetensors").exists():
        return "no model artifact (make artifact)"
    return None


def exported(artifact: Path, scheme: str, log: Path) -> Path:
    """The model exported for OpenVINO in `scheme` (int4 | int8), exporting it the first time."""
    folder = MODELS / f"{artifact.name}-{scheme}"
    if (folder / "openvino_model.xml").exists() and (folder / "openvino_tokenizer.xml").exists():
        return folder
    source = model_folder(artifact, ENVS_DIR / "vllm-models")
    cli = OPENVINO_ENV.prefix / "bin" / "optimum-cli"
    argv = [str(cli), "export", "openvino", "--model", str(source), "--task", "text-generation-with-past"]
    argv += [*EXPORT_ARGS[scheme], str(folder)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"optimum-cli export failed ({done.returncode}); see {log}")
    return folder


def worker(artifact: Path, scheme: str, log: Path, batched_tokens: int = BATCHED_TOKENS) -> PipeWorker:
    model = exported(artifact, scheme, log.with_suffix(".export.log"))
    argv = [str(OPENVINO_ENV.python), str(WORKER), "--model", str(model), "--threads", str(THREADS)]
    argv += ["--max-num-batched-tokens", str(batched_tokens)]
    return PipeWorker(f"openvino-{scheme}", argv, log)
