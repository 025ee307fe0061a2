"""`llmctl`: a command-line client of the llm.v1 API.

llmctl generate --model smollm2-135m "Write a haiku about the sea"
llmctl generate --chat "Hi there" --json
llmctl models
llmctl workers                       (Admin: needs --admin-key)
llmctl drain myhost-8001             (Admin; a worker id as `llmctl workers` lists it)
llmctl build | push | promote | rollback | retire | history   (model roll-out: llmctl/rollout.py)
llmctl tenant ... | key ...          (tenants and API keys: llmctl/tenancy.py)
llmctl price ... | usage export ...  (prices and the usage export: llmctl/billing.py)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import grpc
from google.protobuf import json_format
from llm_platform import ApiError, Client, Delta, Finished

from config.settings import LOCAL_ADMIN_KEY, LOCAL_API_KEY
from llm.v1 import admin_pb2, admin_pb2_grpc, models_pb2, models_pb2_grpc
from llmctl import billing as cli_billing
from llmctl import rollout as cli_rollout
from llmctl import tenancy as cli_tenancy


def _metadata(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def _generate(args: argparse.Namespace, channel: grpc.Channel) -> int:
    """Streams through the Python SDK (llm_platform): a dropped connection is resumed, not lost."""
    client = Client(args.target, args.api_key, channel=channel)
    stream = client.generate(
        None if args.chat else args.text,
        messages=[("user", args.text)] if args.chat else None,
        model=args.model,
        max_output_tokens=args.max_output_tokens,
        request_id=args.request_id,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        stop=args.stop,
        ignore_eos=args.ignore_eos,
    )
    for event in stream:
        if args.json:
            print(json_format.MessageToJson(event.raw, indent=None), flush=True)
        elif isinstance(event, Delta):
            print(event.text, end="", flush=True)
        elif isinstance(event, Finished):
            usage = event.usage
            print(f"\n[{event.reason}: {usage.input_tokens} in, {usage.output_tokens} out]", file=sys.stderr)
    return 0


def _models(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = models_pb2_grpc.ModelsStub(channel)
    resp = stub.ListModels(models_pb2.ListModelsRequest(), metadata=_metadata(args.api_key))
    if args.json:
        print(json_format.MessageToJson(resp))
        return 0
    for v in resp.versions:
        size = f"{v.size_bytes / (1 << 20):.0f}MiB"
        print(f"{v.id}\t{v.status}\t{v.quantization}\t{size}\tcontext={v.context_length}\tready={v.ready}")
    for a in resp.aliases:
        print(f"{a.alias} -> " + ", ".join(f"{t.version_id} ({t.weight})" for t in a.targets))
    return 0


def _workers(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    meta = _metadata(args.admin_key)
    if args.command == "drain":
        stub.DrainWorker(admin_pb2.DrainWorkerRequest(worker_id=args.worker_id), metadata=meta)
    resp = stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=meta)
    if args.json:
        print(json_format.MessageToJson(resp))
        return 0
    for w in resp.workers:
        state = "draining" if w.draining else ("healthy" if w.healthy else "down")
        print(
            f"{w.worker_id}\t{w.address}\t{state}\tfree_blocks={w.free_kv_blocks}\t{','.join(w.loaded_versions)}"
        )
    return 0


COMMANDS = {
    "generate": _generate,
    "models": _models,
    "workers": _workers,
    "drain": _workers,
    **cli_rollout.COMMANDS,
    **cli_tenancy.COMMANDS,
    **cli_billing.COMMANDS,
}


def open_channel(args: argparse.Namespace) -> grpc.Channel:
    """Plaintext, or TLS when --tls-ca is given (mutual TLS with --tls-cert and --tls-key)."""
    if not args.tls_ca:
        return grpc.insecure_channel(args.target)
    read = lambda path: Path(path).read_bytes() if path else None  # noqa: E731
    credentials = grpc.ssl_channel_credentials(read(args.tls_ca), read(args.tls_key), read(args.tls_cert))
    return grpc.secure_channel(args.target, credentials)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llmctl", description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=os.environ.get("LLM_TARGET", "127.0.0.1:50051"))
    parser.add_argument("--api-key", default=os.environ.get("LLM_API_KEY", LOCAL_API_KEY))
    parser.add_argument("--admin-key", default=os.environ.get("LLM_ADMIN_KEY", LOCAL_ADMIN_KEY))
    parser.add_argument("--tls-ca", help="PEM of the CA that signed the server's certificate (TLS)")
    parser.add_argument("--tls-cert", help="PEM client certificate (mutual TLS), with --tls-key")
    parser.add_argument("--tls-key", help="PEM client key (mutual TLS)")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="stream a generation to the terminal")
    gen.add_argument("text", help="prompt text (or the user message with --chat)")
    gen.add_argument("--model", default="smollm2-135m")
    gen.add_argument("--chat", action="store_true", help="send TEXT as a chat message (template applied)")
    gen.add_argument("--max-output-tokens", type=int, default=128)
    gen.add_argument("--temperature", type=float)
    gen.add_argument("--top-p", type=float)
    gen.add_argument("--top-k", type=int)
    gen.add_argument("--seed", type=int)
    gen.add_argument("--stop", action="append", default=[])
    gen.add_argument("--ignore-eos", action="store_true")
    gen.add_argument("--request-id")
    gen.add_argument("--json", action="store_true", help="print raw events as JSON lines")
    models = sub.add_parser("models", help="list model versions and aliases")
    models.add_argument("--json", action="store_true")
    workers = sub.add_parser("workers", help="list the Triton workers (Admin)")
    workers.add_argument("--json", action="store_true")
    drain = sub.add_parser("drain", help="stop routing new generations to a worker (Admin)")
    drain.add_argument("worker_id")
    drain.add_argument("--json", action="store_true")
    cli_rollout.add_parsers(sub)
    cli_tenancy.add_parsers(sub)
    cli_billing.add_parsers(sub)
    args = parser.parse_args(argv)
    if args.command == "build":  # on this machine, no server
        return cli_rollout.build(args, None)
    with open_channel(args) as channel:
        try:
            return COMMANDS[args.command](args, channel)
        except (ApiError, grpc.RpcError) as e:  # the SDK's calls, or the Admin calls on the channel
            error = e if isinstance(e, ApiError) else ApiError.from_rpc_error(e)
            reason = f" ({error.reason})" if error.reason else ""
            print(f"error: {error.code.name}{reason}: {error.message}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
