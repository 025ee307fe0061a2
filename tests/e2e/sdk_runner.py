"""Runs another language's SDK test suite (node --test, go test) against the session platform, from
pytest, without blocking the event loop the frontend serves on."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Runs `command`; fails the test with its output when it exits non-zero. Returns the output."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{text}"
    return text


def require(path: Path, setup: str) -> Path:
    assert path.exists(), f"{path} is missing: run `{setup}` (make test does)"
    return path
