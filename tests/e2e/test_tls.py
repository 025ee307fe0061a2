"""TLS on the frontend's gRPC listener, configured by file paths (issue 12): server TLS with a
generated test CA, then mutual TLS where a client without a certificate is refused (also through
llmctl's --tls-ca/--tls-cert/--tls-key)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from config.settings import FrontendSettings
from frontend.rpc.server import frontend_server
from llm.v1 import models_pb2, models_pb2_grpc
from llmctl.cli import main as llmctl
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, auth
from tests.e2e.tls_ca import make_ca

HANG_S = 60.0


async def list_models(channel: grpc.aio.Channel) -> models_pb2.ListModelsResponse:
    stub = models_pb2_grpc.ModelsStub(channel)
    return await stub.ListModels(models_pb2.ListModelsRequest(), metadata=auth(), timeout=HANG_S)


async def test_tls_and_mutual_tls(frontend_port: int, platform: Platform, tmp_path: Path) -> None:
    assert platform.manager is not None
    pems = make_ca(tmp_path / "ca")
    ca = pems.ca.read_bytes()
    client_cert, client_key = pems.client_cert.read_bytes(), pems.client_key.read_bytes()
    tls = replace(FrontendSettings(), tls_cert_file=str(pems.server_cert), tls_key_file=str(pems.server_key))
    async with frontend_server("127.0.0.1:0", platform.keys, platform.registry, platform.manager, tls) as (
        _,
        port,
    ):
        address = f"127.0.0.1:{port}"
        async with grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(ca)) as channel:
            assert (await list_models(channel)).versions
        async with grpc.aio.insecure_channel(address) as plain:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await list_models(plain)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE

    mutual = replace(tls, tls_client_ca_file=str(pems.ca))
    async with frontend_server("127.0.0.1:0", platform.keys, platform.registry, platform.manager, mutual) as (
        _,
        port,
    ):
        address = f"127.0.0.1:{port}"
        without = grpc.ssl_channel_credentials(ca)
        async with grpc.aio.secure_channel(address, without) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await list_models(channel)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        with_cert = grpc.ssl_channel_credentials(ca, private_key=client_key, certificate_chain=client_cert)
        async with grpc.aio.secure_channel(address, with_cert) as channel:
            assert (await list_models(channel)).versions
        # llmctl, the same two ways
        cli = ["--target", address, "--api-key", KEY_ALPHA, "--tls-ca", str(pems.ca)]
        mutual_cli = [*cli, "--tls-cert", str(pems.client_cert), "--tls-key", str(pems.client_key)]
        assert await asyncio.to_thread(llmctl, [*mutual_cli, "models", "--json"]) == 0
        assert await asyncio.to_thread(llmctl, [*cli, "models", "--json"]) == 1  # no client certificate
