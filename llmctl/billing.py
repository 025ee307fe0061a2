"""llmctl's price and usage verbs (Admin: --admin-key).

llmctl price set --model smollm2-135m --input 0.15 --cached-input 0.075 --output 0.60   (USD per 1M tokens)
llmctl price list [--model smollm2-135m@<version>]
llmctl usage export --from 2026-12-01 --to 2027-01-01 [--tenant acme] [--bucket day|hour] --format csv|jsonl

A price applies to generations admitted from its effective time (default: now); an alias prices
every version it routes to at that moment. The export's rows are sealed usage only, one per
tenant, key, model version (and adapter) and day; their sums are the sealed usage's.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from google.protobuf import json_format

from contracts import usage_format
from llm.v1 import admin_pb2, admin_pb2_grpc, usage_pb2
from llmctl import values
from llmctl.rollout import admin_meta


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    price = sub.add_parser("price", help="set and list model prices (Admin)")
    verbs = price.add_subparsers(dest="verb", required=True)
    set_ = verbs.add_parser("set", help="price a version (or every version an alias routes to)")
    set_.add_argument("--model", required=True, help="an alias or a version id")
    for flag in ("--input", "--cached-input", "--output"):
        set_.add_argument(flag, type=values.micros, required=True, metavar="USD", help="per million tokens")
    set_.add_argument("--effective", type=values.when, help="from this time on (default: now)")
    verbs.add_parser("list", help="recorded prices, newest first").add_argument("--model", default="")
    for p in (price, *verbs.choices.values()):
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if p is not price else False)
    usage = sub.add_parser("usage", help="export sealed usage (Admin)")
    uverbs = usage.add_subparsers(dest="verb", required=True)
    export = uverbs.add_parser("export", help="rows by tenant, key, model version and day")
    export.add_argument(
        "--from", dest="start", type=values.when, required=True, help="a date or RFC 3339 time"
    )
    export.add_argument("--to", dest="end", type=values.when, required=True, help="(exclusive)")
    export.add_argument("--tenant", default="", help="one tenant (default: every tenant)")
    export.add_argument("--bucket", choices=("day", "hour"), default="day")
    export.add_argument("--format", choices=usage_format.FORMATS, default="csv")


def price(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub, meta = admin_pb2_grpc.AdminStub(channel), admin_meta(args)
    if args.verb == "set":
        request = admin_pb2.SetModelPriceRequest(
            model=args.model,
            input_per_mtok=args.input,
            cached_input_per_mtok=args.cached_input,
            output_per_mtok=args.output,
            effective_at=args.effective,
        )
        prices = stub.SetModelPrice(request, metadata=meta).prices
    else:
        prices = stub.ListModelPrices(
            admin_pb2.ListModelPricesRequest(model_version=args.model), metadata=meta
        ).prices
    if args.json:
        print("[" + ",".join(json_format.MessageToJson(p, indent=None) for p in prices) + "]")
        return 0
    for p in prices:
        rates = f"input={values.usd(p.input_per_mtok)} cached={values.usd(p.cached_input_per_mtok)}"
        rates += f" output={values.usd(p.output_per_mtok)} per 1M tokens"
        print(f"{p.model_version}\t{rates}\tfrom {p.effective_at.ToJsonString()}\tset by {p.set_by}")
    return 0


def usage(args: argparse.Namespace, channel: grpc.Channel) -> int:
    """Streams the rows to stdout as they arrive, in the server's export format."""
    stub = admin_pb2_grpc.AdminStub(channel)
    bucket = usage_pb2.USAGE_BUCKET_HOUR if args.bucket == "hour" else usage_pb2.USAGE_BUCKET_DAY
    request = usage_pb2.ExportUsageRequest(
        tenant=args.tenant, window_start=args.start, window_end=args.end, bucket=bucket
    )
    sys.stdout.write(usage_format.header(args.format))
    for row in stub.ExportUsage(request, metadata=admin_meta(args)):
        record = {c: getattr(row, c) for c in usage_format.COLUMNS if c not in ("period_start", "spend_usd")}
        record["period_start"] = row.period_start.ToJsonString()
        sys.stdout.write(usage_format.line(args.format, record))
    sys.stdout.flush()
    return 0


COMMANDS = {"price": price, "usage": usage}
