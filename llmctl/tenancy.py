"""llmctl's tenant and key verbs (Admin: --admin-key; every change is recorded with who and when).

llmctl tenant create acme --weight 2 --max-concurrent 8 --monthly-budget 500 --models smollm2-135m
llmctl tenant update acme --output-tokens-per-minute 50000 --monthly-budget none
llmctl tenant disable acme | enable acme | list | history [acme]
llmctl key create --tenant acme --name ci --expires 90d --scopes generate --monthly-budget 20 [--json]
llmctl key list --tenant acme | revoke KEY_ID | rotate KEY_ID [--overlap 1h] | update KEY_ID ...

A key's secret is printed once, when it is created or rotated; the platform keeps only its digest.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import grpc
from google.protobuf import json_format

from contracts.scopes import SCOPES
from llm.v1 import account_pb2, admin_pb2, admin_pb2_grpc
from llmctl import values
from llmctl.rollout import admin_meta

QUOTA_FLAGS = {  # flag -> TenantSettings / UpdateTenantRequest field
    "--max-concurrent": "max_concurrent_generations",
    "--input-tokens-per-minute": "input_tokens_per_minute",
    "--output-tokens-per-minute": "output_tokens_per_minute",
    "--max-queued-tokens": "max_queued_tokens",
}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tenant = sub.add_parser("tenant", help="create, change, disable and list tenants (Admin)")
    verbs = tenant.add_subparsers(dest="verb", required=True)
    for verb in ("create", "update"):
        p = verbs.add_parser(verb, help=f"{verb} a tenant")
        p.add_argument("name")
        p.add_argument("--weight", type=float, help="its share in weighted fair queuing")
        for flag in QUOTA_FLAGS:
            p.add_argument(flag, type=int)
        p.add_argument(
            "--monthly-budget",
            type=values.budget,
            default=argparse.SUPPRESS,
            metavar="USD",
            help="spend admitted per calendar month (UTC); 'none' removes it",
        )
        p.add_argument("--models", help="comma-separated aliases it may use ('all' or empty: every model)")
    for verb in ("disable", "enable"):
        verbs.add_parser(verb, help=f"{verb} a tenant").add_argument("name")
    verbs.add_parser("list", help="every tenant, its quotas, budget and spend this month")
    verbs.add_parser("history", help="recorded tenant and key changes").add_argument(
        "name", nargs="?", default=""
    )
    key = sub.add_parser("key", help="create, list, revoke and rotate API keys (Admin)")
    kverbs = key.add_subparsers(dest="verb", required=True)
    create = kverbs.add_parser("create", help="a new key; its secret is printed once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", default="", help="a label")
    create.add_argument("--expires", type=values.duration, help="e.g. 90d; default: never")
    create.add_argument("--scopes", default=",".join(SCOPES), help="comma-separated: generate,usage")
    update = kverbs.add_parser("update", help="change a key's name, scopes, limits or budget")
    update.add_argument("key_id")
    update.add_argument("--name")
    update.add_argument("--scopes")
    for p in (create, update):
        p.add_argument("--input-tokens-per-minute", type=int, help="its own limit, beside the tenant's")
        p.add_argument("--output-tokens-per-minute", type=int)
        p.add_argument("--monthly-budget", type=values.budget, default=argparse.SUPPRESS, metavar="USD")
    kverbs.add_parser("list", help="a tenant's keys (never a secret)").add_argument("--tenant", required=True)
    kverbs.add_parser("revoke", help="refuse a key from now on").add_argument("key_id")
    rotate = kverbs.add_parser("rotate", help="a new secret; the old one works for the overlap")
    rotate.add_argument("key_id")
    rotate.add_argument("--overlap", type=values.duration, help="default: the server's (24h)")
    for parser in (tenant, key):
        parser.add_argument("--json", action="store_true")
    for p in (*verbs.choices.values(), *kverbs.choices.values()):
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)


def tenant(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub, meta = admin_pb2_grpc.AdminStub(channel), admin_meta(args)
    if args.verb == "list":
        return _tenants(args, stub.ListTenants(admin_pb2.ListTenantsRequest(), metadata=meta).tenants)
    if args.verb == "history":
        changes = stub.ListTenantChanges(
            admin_pb2.ListTenantChangesRequest(tenant_id=args.name), metadata=meta
        )
        return _history(args, changes)
    if args.verb == "create":
        settings = account_pb2.TenantSettings(**_given(args, with_models=True))
        answer = stub.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant_id=args.name, settings=settings), metadata=meta
        )
    else:
        request = admin_pb2.UpdateTenantRequest(tenant_id=args.name)
        if args.verb in ("disable", "enable"):
            request.disabled = args.verb == "disable"
        else:
            given = _given(args, with_models=False)
            if "monthly_budget_micros" in given and given["monthly_budget_micros"] is None:
                del given["monthly_budget_micros"]
                request.no_monthly_budget = True
            for field, value in given.items():
                setattr(request, field, value)
            if args.models is not None:
                request.allowed_models.aliases.extend(_models(args.models))
                request.allowed_models.SetInParent()
        answer = stub.UpdateTenant(request, metadata=meta)
    return _tenants(args, [answer])


def key(args: argparse.Namespace, channel: grpc.Channel) -> int:
    stub, meta = admin_pb2_grpc.AdminStub(channel), admin_meta(args)
    if args.verb == "list":
        return _keys(
            args, stub.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant_id=args.tenant), metadata=meta).keys
        )
    if args.verb == "revoke":
        return _keys(
            args, [stub.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(key_id=args.key_id), metadata=meta)]
        )
    if args.verb == "update":
        request = admin_pb2.UpdateApiKeyRequest(key_id=args.key_id, **_key_limits(args, clear=True))
        if args.name is not None:
            request.name = args.name
        request.scopes.extend(_list(args.scopes or ""))
        return _keys(args, [stub.UpdateApiKey(request, metadata=meta)])
    if args.verb == "rotate":
        request = admin_pb2.RotateApiKeyRequest(key_id=args.key_id, overlap=args.overlap)
        return _created(args, stub.RotateApiKey(request, metadata=meta))
    settings = account_pb2.KeySettings(
        name=args.name, scopes=_list(args.scopes), **_key_limits(args, clear=False)
    )
    create = admin_pb2.CreateApiKeyRequest(tenant_id=args.tenant, settings=settings, expires_in=args.expires)
    return _created(args, stub.CreateApiKey(create, metadata=meta))


def _given(args: argparse.Namespace, *, with_models: bool) -> dict[str, Any]:
    given: dict[str, Any] = {
        field: getattr(args, flag[2:].replace("-", "_")) for flag, field in QUOTA_FLAGS.items()
    }
    given["weight"] = args.weight
    given = {k: v for k, v in given.items() if v is not None}
    if "monthly_budget" in args:
        given["monthly_budget_micros"] = args.monthly_budget
        if given["monthly_budget_micros"] is None and with_models:  # create: none is no budget
            del given["monthly_budget_micros"]
    if with_models and args.models:
        given["allowed_models"] = _models(args.models)
    return given


def _key_limits(args: argparse.Namespace, *, clear: bool) -> dict[str, Any]:
    limits: dict[str, Any] = {
        f: getattr(args, f)
        for f in ("input_tokens_per_minute", "output_tokens_per_minute")
        if getattr(args, f) is not None
    }
    if "monthly_budget" in args:
        if args.monthly_budget is not None:
            limits["monthly_budget_micros"] = args.monthly_budget
        elif clear:
            limits["clear"] = ["monthly_budget_micros"]
    return limits


def _models(text: str) -> list[str]:
    return [] if text.strip().lower() == "all" else _list(text)


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _created(args: argparse.Namespace, created: account_pb2.CreatedKey) -> int:
    k = created.key
    if args.json:
        doc: dict[str, Any] = {"id": k.id, "key": created.secret, "tenant": k.tenant, "name": k.settings.name}
        doc["scopes"] = list(k.settings.scopes)
        if k.settings.HasField("expires_at"):
            doc["expires_at"] = k.settings.expires_at.ToJsonString()
        print(json.dumps(doc))
        return 0
    print(f"{k.id}\ttenant={k.tenant}\tscopes={','.join(k.settings.scopes)}")
    print(created.secret)
    print("(the secret is shown this once: store it now)", file=sys.stderr)
    return 0


def _tenants(args: argparse.Namespace, tenants: Any) -> int:
    if args.json:
        print(json.dumps([json_format.MessageToDict(t) for t in tenants]))
        return 0
    for t in tenants:
        s = t.settings
        budget = values.usd(s.monthly_budget_micros) if s.HasField("monthly_budget_micros") else "none"
        state = "disabled" if t.disabled else "active"
        quotas = f"concurrent={s.max_concurrent_generations} in/min={s.input_tokens_per_minute} "
        quotas += f"out/min={s.output_tokens_per_minute} queued={s.max_queued_tokens} weight={s.weight:g}"
        models = ",".join(s.allowed_models) or "all"
        print(
            f"{t.id}\t{state}\t{quotas}\tmodels={models}\tbudget={budget}\tspent={values.usd(t.month.spent_micros)}"
            f"\tkeys={t.active_keys}"
        )
    return 0


def _keys(args: argparse.Namespace, keys: Any) -> int:
    if args.json:
        print(json.dumps([json_format.MessageToDict(k) for k in keys]))
        return 0
    for k in keys:
        state = "revoked" if k.HasField("revoked_at") else "active"
        used = k.last_used_at.ToJsonString() if k.HasField("last_used_at") else "never"
        expires = k.settings.expires_at.ToJsonString() if k.settings.HasField("expires_at") else "never"
        print(
            f"{k.id}\t{k.settings.name or '-'}\t{state}\tscopes={','.join(k.settings.scopes)}"
            f"\tlast_used={used}\texpires={expires}"
        )
    return 0


def _history(args: argparse.Namespace, changes: admin_pb2.ListTenantChangesResponse) -> int:
    if args.json:
        print(json_format.MessageToJson(changes))
        return 0
    for c in changes.changes:
        print(f"{c.at.ToJsonString()}\t{c.actor}\t{c.action}\t{c.tenant}\t{c.key_id or '-'}\t{c.detail_json}")
    return 0


COMMANDS = {"tenant": tenant, "key": key}
