"""Fixtures shared by the serving tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from prebuild.build import build
from tests.tiny_model import tiny_hf_folder


@pytest.fixture(scope="session")
def tiny(artifact_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built, verified artifact of a tiny random-weight Llama (the model "tiny"); copy it to change it."""
    root = tmp_path_factory.mktemp("tiny")
    build(tiny_hf_folder(artifact_dir, root / "hf"), root / "art", "tiny")
    return root / "art"
