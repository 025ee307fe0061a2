"""Digests recorded on disk between processes (var/verified): a warm start hashes no file that is
unchanged, and any file written since its record was made is hashed again, so a modified artifact
is refused whatever was recorded. Each FileDigests here stands for one process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from artifacts.file_digests import SETTLED_S, FileDigests, sha256_file
from artifacts.manifest import ArtifactIntegrityError, verify
from tests.artifacts.test_manifest import small_artifact

LATER_NS = int((SETTLED_S + 60) * 1e9)  # a clock this far ahead: the files just written are settled


class Process:
    """One process's digests over a shared record folder, and the names of the files it hashed."""

    def __init__(self, folder: Path, clock_ahead_ns: int = LATER_NS) -> None:
        self.hashed: list[str] = []
        self.digests = FileDigests(self._hash, now_ns=lambda: time.time_ns() + clock_ahead_ns)
        self.digests.folder = folder

    def _hash(self, path: Path) -> str:
        self.hashed.append(path.name)
        return sha256_file(path)


def rewrite_in_place(path: Path, text: str) -> None:
    """Writes `text` over the file's bytes (same inode), until its ctime has moved: two writes in
    one tick of the file system's clock leave it unchanged, which is what the settle rule covers."""
    before = path.stat().st_ctime_ns
    while True:
        with path.open("r+") as f:
            f.write(text)
        if path.stat().st_ctime_ns != before:
            return


def test_a_recorded_unchanged_artifact_is_not_hashed_by_the_next_process(tmp_path: Path) -> None:
    folder, records = small_artifact(tmp_path / "a"), tmp_path / "verified"
    first, second = Process(records), Process(records)
    assert verify(folder, first.digests) == verify(folder, second.digests)
    assert first.hashed == ["config.json", "tokenizer.json"]
    assert second.hashed == []
    assert len(list(records.glob("*.json"))) == 2


def test_a_file_modified_in_place_after_its_record_is_hashed_again_and_refused(tmp_path: Path) -> None:
    folder, records = small_artifact(tmp_path / "a"), tmp_path / "verified"
    verify(folder, Process(records).digests)
    rewrite_in_place(folder / "tokenizer.json", '{"model": "bpf"}')  # same size, new content
    later = Process(records)
    with pytest.raises(ArtifactIntegrityError, match=r"tokenizer\.json has sha256"):
        verify(folder, later.digests)
    assert later.hashed == ["tokenizer.json"]  # config.json's record still holds


def test_a_file_replaced_by_another_of_the_same_size_is_hashed_again_and_refused(tmp_path: Path) -> None:
    folder, records = small_artifact(tmp_path / "a"), tmp_path / "verified"
    verify(folder, Process(records).digests)
    (tmp_path / "new.json").write_text('{"model": "bpf"}')
    os.replace(tmp_path / "new.json", folder / "tokenizer.json")  # a new inode under the old name
    later = Process(records)
    with pytest.raises(ArtifactIntegrityError, match=r"tokenizer\.json has sha256"):
        verify(folder, later.digests)
    assert later.hashed == ["tokenizer.json"]


def test_a_file_written_just_now_is_not_recorded_so_the_next_process_hashes_it(tmp_path: Path) -> None:
    folder, records = small_artifact(tmp_path / "a"), tmp_path / "verified"
    now = Process(records, clock_ahead_ns=0)  # the real clock: the files are not settled yet
    verify(folder, now.digests)
    assert not records.exists()
    later = Process(records, clock_ahead_ns=0)
    verify(folder, later.digests)
    assert later.hashed == ["config.json", "tokenizer.json"]


def test_a_record_that_does_not_parse_or_names_another_identity_is_not_trusted(tmp_path: Path) -> None:
    folder, records = small_artifact(tmp_path / "a"), tmp_path / "verified"
    verify(folder, Process(records).digests)
    for record in records.glob("*.json"):
        raw = json.loads(record.read_text())
        if raw["identity"][1] == (folder / "config.json").stat().st_ino:
            record.write_text("{not json")
        else:
            raw["identity"][2] += 1  # another size: not this file's record
            record.write_text(json.dumps(raw))
    later = Process(records)
    verify(folder, later.digests)
    assert sorted(later.hashed) == ["config.json", "tokenizer.json"]
