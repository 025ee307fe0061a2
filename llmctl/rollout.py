"""llmctl's roll-out verbs (llmctl/cli.py dispatches to them; Admin calls need --admin-key).

llmctl build SRC OUT --name smollm2-135m       an HF folder or GGUF -> an artifact (no server)
llmctl push OUT --alias smollm2-135m --canary 10
llmctl promote smollm2-135m [VERSION_ID]       (default: the route's canary)
llmctl rollback smollm2-135m
llmctl retire smollm2-135m@<version> [--delete-files]
llmctl history                                 who changed what, when
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
from google.protobuf import json_format

from artifacts.manifest import MANIFEST, read_manifest
from llm.v1 import admin_pb2, admin_pb2_grpc, models_pb2

CHUNK_BYTES = 256 << 10  # below the server's default message cap (1 MiB)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = sub.add_parser("build", help="build an artifact from a Hugging Face folder or a GGUF")
    build.add_argument("source", type=Path)
    build.add_argument("out", type=Path)
    build.add_argument("--name", required=True, help="model name, e.g. smollm2-135m")
    push = sub.add_parser("push", help="upload an artifact, load it, and route an alias to it (Admin)")
    push.add_argument("artifact", type=Path, help="a folder written by llmctl build")
    push.add_argument("--alias", default="", help="route this alias to the pushed version")
    push.add_argument("--canary", type=int, default=0, help="percent of the alias (1-99); default all")
    push.add_argument("--quiet", action="store_true", help="no progress bar")
    promote = sub.add_parser("promote", help="route all of an alias to one version (Admin)")
    promote.add_argument("alias")
    promote.add_argument("version_id", nargs="?", default="", help="default: the route's canary")
    rollback = sub.add_parser("rollback", help="restore an alias's previous route (Admin)")
    rollback.add_argument("alias")
    retire = sub.add_parser("retire", help="retire a version no alias routes to (Admin)")
    retire.add_argument("version_id")
    retire.add_argument("--delete-files", action="store_true", help="delete its artifact once unloaded")
    sub.add_parser("history", help="recorded model changes: who, when, what (Admin)")
    for verb in ("push", "promote", "rollback", "retire", "history"):
        sub.choices[verb].add_argument("--json", action="store_true")


def build(args: argparse.Namespace, channel: grpc.Channel | None) -> int:
    from prebuild.build import main

    return main([str(args.source), str(args.out), "--name", args.name])


def admin_meta(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {args.admin_key}"), ("x-operator", _operator()))


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "admin"


def push_messages(
    folder: Path, alias: str, canary: int, progress: bool
) -> Iterator[admin_pb2.PushModelVersionRequest]:
    """The manifest, then every file in CHUNK_BYTES pieces, with a progress bar on stderr."""
    manifest = read_manifest(folder)
    total = sum((folder / name).stat().st_size for name in manifest.files)
    yield admin_pb2.PushModelVersionRequest(
        manifest=(folder / MANIFEST).read_bytes(), alias=alias, canary_percent=canary
    )
    sent = 0
    for name in sorted(manifest.files):
        with (folder / name).open("rb") as f:
            offset = 0
            while data := f.read(CHUNK_BYTES):
                yield admin_pb2.PushModelVersionRequest(
                    chunk=admin_pb2.ArtifactChunk(file=name, offset=offset, data=data)
                )
                offset += len(data)
                sent += len(data)
                if progress:
                    _bar(sent, total, name)
    if progress:
        print(file=sys.stderr)


def _bar(sent: int, total: int, name: str) -> None:
    done = sent / total if total else 1.0
    filled = int(done * 30)
    bar = "#" * filled + "." * (30 - filled)
    print(f"\r[{bar}] {done:6.1%} {sent >> 20}/{total >> 20} MiB {name[:24]:<24}", end="", file=sys.stderr)


def push(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    progress = not args.quiet and not args.json and sys.stderr.isatty()
    resp = stub.PushModelVersion(
        push_messages(args.artifact, args.alias, args.canary, progress), metadata=admin_meta(args)
    )
    if args.json:
        print(json_format.MessageToJson(resp))
        return 0
    v = resp.version
    state = "already in the repository" if resp.already_present else "pushed"
    print(f"{v.id}\t{state}\t{v.status}\tready_workers={v.ready_workers}")
    if resp.HasField("route"):
        _print_route(resp.route)
    return 0


def promote(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    req = admin_pb2.PromoteVersionRequest(alias=args.alias, version_id=args.version_id)
    return _route_out(args, stub.PromoteVersion(req, metadata=admin_meta(args)))


def rollback(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    req = admin_pb2.RollbackAliasRequest(alias=args.alias)
    return _route_out(args, stub.RollbackAlias(req, metadata=admin_meta(args)))


def retire(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    req = admin_pb2.RetireVersionRequest(version_id=args.version_id, delete_files=args.delete_files)
    v = stub.RetireVersion(req, metadata=admin_meta(args))
    if args.json:
        print(json_format.MessageToJson(v))
    else:
        print(f"{v.id}\t{v.status}")
    return 0


def history(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub = admin_pb2_grpc.AdminStub(channel)
    resp = stub.ListModelChanges(admin_pb2.ListModelChangesRequest(), metadata=admin_meta(args))
    if args.json:
        print(json_format.MessageToJson(resp))
        return 0
    for c in resp.changes:
        at = datetime.fromtimestamp(c.at_unix_ms / 1000, UTC).isoformat(timespec="seconds")
        what = c.version_id or c.alias
        after = ", ".join(f"{t.version_id} ({t.weight})" for t in c.after.targets)
        print(f"{at}\t{c.actor}\t{c.action}\t{what}" + (f"\t-> {after}" if after else ""))
    return 0


def _route_out(args: argparse.Namespace, route: models_pb2.AliasRoute) -> int:
    if args.json:
        print(json_format.MessageToJson(route))
    else:
        _print_route(route)
    return 0


def _print_route(route: models_pb2.AliasRoute) -> None:
    print(f"{route.alias} -> " + ", ".join(f"{t.version_id} ({t.weight})" for t in route.targets))


COMMANDS = {"push": push, "promote": promote, "rollback": rollback, "retire": retire, "history": history}
