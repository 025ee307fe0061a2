"""Launching Triton: a port that something else listens on is a clear error before any launch."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from serving.triton import TritonServer
from serving.triton_host import TritonError


@pytest.mark.parametrize("kind", ["grpc", "http", "metrics"])
def test_a_port_in_use_is_an_error_before_the_launch(tmp_path: Path, kind: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = TritonServer(tmp_path / "models", tmp_path, **{f"{kind}_port": port})
        with pytest.raises(TritonError, match=f"Triton {kind} port {port} is already in use on 127.0.0.1"):
            server.start()
        assert server.process is None  # nothing was launched
