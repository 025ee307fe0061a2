"""One process hashes an unchanged artifact file once, however many checks a load passes; a file
written since is hashed again and refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from artifacts import manifest as artifact
from artifacts.manifest import ArtifactIntegrityError, Manifest, derive_version, sha256_file, verify


def small_artifact(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text('{"model": "bpe"}')
    files = {name: sha256_file(folder / name) for name in ("config.json", "tokenizer.json")}
    manifest = Manifest("tiny", derive_version(files), "compat", files, 16, {})
    (folder / "manifest.json").write_text(manifest.to_json())
    return folder


@pytest.fixture()
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files verify() hashes, in order."""
    names: list[str] = []

    def counting(path: Path) -> str:
        names.append(path.name)
        return sha256_file(path)

    monkeypatch.setattr(artifact.checked_files, "hash_file", counting)
    return names


def test_an_unchanged_artifact_is_hashed_once_per_process(tmp_path: Path, hashed: list[str]) -> None:
    folder = small_artifact(tmp_path / "a")
    assert verify(folder) == verify(folder)
    assert hashed == ["config.json", "tokenizer.json"]


def test_a_file_written_since_it_was_hashed_is_hashed_again_and_refused(
    tmp_path: Path, hashed: list[str]
) -> None:
    folder = small_artifact(tmp_path / "a")
    verify(folder)
    (folder / "tokenizer.json").write_text('{"model": "bpf"}')  # same size, new content
    with pytest.raises(ArtifactIntegrityError, match=r"tokenizer\.json has sha256"):
        verify(folder)
    assert hashed == ["config.json", "tokenizer.json", "tokenizer.json"]
