"""Reading the platform's TOML configuration into its sections (config/settings.py) and checking
every value, with an error that names the file, the section and the key.
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from config.settings import (
    LOCAL_ADMIN_KEY,
    LOCAL_API_KEY,
    FleetSettings,
    FrontendSettings,
    HttpSettings,
    ModelSettings,
    PlatformConfig,
    RepositorySettings,
    RoutingSettings,
    StoreSettings,
    TelemetrySettings,
    TenantSpec,
    TritonSettings,
    WorkerSettings,
    default_config,
)


class ConfigError(ValueError):
    """The config file is malformed or has an invalid value."""


def load_config(path: Path | None) -> PlatformConfig:
    if path is None:
        return default_config()
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from e
    return parse_config(raw, str(path))


def parse_config(raw: dict[str, Any], where: str = "config") -> PlatformConfig:
    sections = {"frontend", "http", "store", "triton", "telemetry", "fleet", "worker", "repository"}
    sections |= {"routing"}
    sections |= {"tenants", "models"}
    unknown = set(raw) - sections
    if unknown:
        raise ConfigError(f"{where}: unknown section(s) {sorted(unknown)}")
    tenants = tuple(_build(TenantSpec, t, f"{where} [[tenants]]") for t in raw.get("tenants", []))
    models = tuple(_build(ModelSettings, m, f"{where} [[models]]") for m in raw.get("models", []))
    cfg = PlatformConfig(
        frontend=_build(FrontendSettings, raw.get("frontend", {}), f"{where} [frontend]"),
        http=_build(HttpSettings, raw.get("http", {}), f"{where} [http]"),
        store=_build(StoreSettings, raw.get("store", {}), f"{where} [store]"),
        triton=_build(TritonSettings, raw.get("triton", {}), f"{where} [triton]"),
        telemetry=_build(TelemetrySettings, raw.get("telemetry", {}), f"{where} [telemetry]"),
        fleet=_build(FleetSettings, raw.get("fleet", {}), f"{where} [fleet]"),
        worker=_build(WorkerSettings, raw.get("worker", {}), f"{where} [worker]"),
        routing=_build(RoutingSettings, raw.get("routing", {}), f"{where} [routing]"),
        repository=_build(RepositorySettings, raw.get("repository", {}), f"{where} [repository]"),
        tenants=tenants,
        models=models or (ModelSettings(),),
    )
    _check(cfg, where)
    return cfg


def _build(cls: Any, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table")
    known = {f.name: f for f in fields(cls)}
    unknown = set(raw) - set(known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
    values = {}
    for key, value in raw.items():
        if key in ("api_keys", "admin_api_keys"):
            if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
                raise ConfigError(f"{where}: {key} must be a list of non-empty strings")
            value = tuple(value)
        values[key] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from e


def _check(cfg: PlatformConfig, where: str) -> None:
    f = cfg.frontend
    positive = (f.slow_consumer_timeout_s, f.converse_window_events, f.catalog_refresh_s)
    if not all(v > 0 for v in (*positive, f.usage_every_tokens, f.usage_every_s)):
        raise ConfigError(
            f"{where}: slow_consumer_timeout_s, converse_window_events, catalog_refresh_s, "
            "usage_every_tokens and usage_every_s must be positive"
        )
    if not 0 < 2 * f.stream_max_bytes <= f.stream_retain_max_bytes:
        raise ConfigError(
            f"{where}: stream_max_bytes must be positive, and stream_retain_max_bytes (the retained "
            "bytes of all finished generations) at least twice it: a finished log may hold a few "
            "events over stream_max_bytes, and must still fit"
        )
    if f.key_rotation_overlap_s < 0:
        raise ConfigError(f"{where}: key_rotation_overlap_s must not be negative")
    if not 0 < f.worker_probe_interval_s < f.worker_inactivity_timeout_s:
        raise ConfigError(
            f"{where}: worker_probe_interval_s must be positive and below worker_inactivity_timeout_s"
        )
    for m in cfg.models:
        if m.dtype not in ("float32", "bfloat16", "auto"):
            raise ConfigError(f"{where}: model {m.alias}: dtype must be float32, bfloat16 or auto")
        if m.kv_cache_dtype not in ("float32", "bfloat16", "auto"):
            raise ConfigError(f"{where}: model {m.alias}: kv_cache_dtype must be float32, bfloat16 or auto")
        if m.quantization not in ("none", "int8", "int4"):
            raise ConfigError(f"{where}: model {m.alias}: quantization must be none, int8 or int4")
        if m.scheduler_policy not in ("guaranteed_no_evict", "max_utilization"):
            raise ConfigError(f"{where}: model {m.alias}: unknown scheduler_policy {m.scheduler_policy!r}")
        if not isinstance(m.fair_share, bool) or not isinstance(m.kernels, bool):
            raise ConfigError(f"{where}: model {m.alias}: fair_share and kernels must be true or false")
        if m.workers < 1 or m.block_size < 1 or m.max_num_seqs < 1 or m.max_num_batched_tokens < 0:
            raise ConfigError(f"{where}: model {m.alias}: workers, block_size and limits must be positive")
        if m.speculative_method not in ("none", "draft", "ngram"):
            raise ConfigError(f"{where}: model {m.alias}: speculative_method must be none, draft or ngram")
        if not isinstance(m.speculative_tokens, int) or m.speculative_tokens < 0:
            raise ConfigError(f"{where}: model {m.alias}: speculative_tokens must be an integer, at least 0")
        drafts = {"int4"} | {o.alias for o in cfg.models if o is not m}
        if m.speculative_method == "draft" and m.speculative_draft not in drafts:
            raise ConfigError(
                f"{where}: model {m.alias}: speculative_draft must be int4 or another model's alias"
            )
        if "@" in m.alias or not m.alias:
            raise ConfigError(f"{where}: model alias {m.alias!r} must be non-empty and contain no '@'")
    if len({m.alias for m in cfg.models}) != len(cfg.models):
        raise ConfigError(f"{where}: model aliases must be unique")
    seen: set[str] = set()
    for t in cfg.tenants:  # TenantSpec checks its own id, weight and quotas
        if seen & set(t.api_keys):
            raise ConfigError(f"{where}: tenant {t.id}: an API key is used by two tenants")
        seen |= set(t.api_keys)
    if seen & set(cfg.frontend.admin_api_keys):
        raise ConfigError(f"{where}: an admin key is also a tenant's API key")
    if not isinstance(cfg.repository.max_push_bytes, int) or cfg.repository.max_push_bytes < 1:
        raise ConfigError(f"{where}: [repository] max_push_bytes must be a positive integer")
    if not 0.0 < f.max_tenant_kv_share <= 1.0:
        raise ConfigError(f"{where}: [frontend] max_tenant_kv_share must be in (0, 1]")
    if bool(f.tls_cert_file) != bool(f.tls_key_file) or (f.tls_client_ca_file and not f.tls_cert_file):
        raise ConfigError(
            f"{where}: [frontend] TLS needs tls_cert_file and tls_key_file (and then tls_client_ca_file)"
        )
    if cfg.http.listen and not _host_port(cfg.http.listen):
        raise ConfigError(f"{where}: [http] listen must be host:port (or empty for no HTTP)")
    if not isinstance(cfg.http.default_max_tokens, int) or cfg.http.default_max_tokens < 1:
        raise ConfigError(f"{where}: [http] default_max_tokens must be a positive integer")
    if not all(
        isinstance(t, int | float) and t > 0 for t in (cfg.http.header_timeout_s, cfg.http.body_timeout_s)
    ):
        raise ConfigError(f"{where}: [http] header_timeout_s and body_timeout_s must be positive")
    endpoint = cfg.telemetry.otlp_endpoint
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: [telemetry] otlp_endpoint must be an http(s) URL")
    _check_store(cfg.store, where)
    _check_fleet(cfg.fleet, f.attempt_lease_s, where)
    r = cfg.routing
    if r.policy not in ("prefix", "least_loaded"):
        raise ConfigError(f'{where}: [routing] policy must be "prefix" or "least_loaded"')
    if not all(isinstance(n, int) and n >= 0 for n in (r.spill_margin, r.summary_blocks)):
        raise ConfigError(f"{where}: [routing] spill_margin and summary_blocks must be integers >= 0")


def _check_store(store: StoreSettings, where: str) -> None:
    url = store.url.strip()
    if not (url.startswith("sqlite:///") or url.startswith("postgresql") or url.startswith("host=")):
        raise ConfigError(f"{where}: store url must be sqlite:///…, postgresql+psycopg://… or host=…")
    periods = (store.timeout_s, store.probe_interval_s, store.final_usage_wait_s)
    if not all(isinstance(p, int | float) and p > 0 for p in periods):
        raise ConfigError(
            f"{where}: [store] timeout_s, probe_interval_s and final_usage_wait_s must be positive"
        )
    if not isinstance(store.usage_queue_max, int) or store.usage_queue_max < 1:
        raise ConfigError(f"{where}: [store] usage_queue_max must be a positive integer")


def _check_fleet(fleet: FleetSettings, attempt_lease_s: float, where: str) -> None:
    if not attempt_lease_s > 0:
        raise ConfigError(f"{where}: [frontend] attempt_lease_s must be positive")
    periods = (fleet.frontend_lease_s, fleet.worker_lease_s, fleet.registry_refresh_s, fleet.drain_timeout_s)
    if not all(isinstance(p, int | float) and p > 0 for p in (*periods, fleet.deploy_timeout_s)):
        raise ConfigError(
            f"{where}: [fleet] leases, registry_refresh_s, drain_timeout_s and deploy_timeout_s "
            "must be positive"
        )
    if fleet.registry_refresh_s >= fleet.worker_lease_s:
        raise ConfigError(f"{where}: [fleet] registry_refresh_s must be below worker_lease_s")
    if not all(_host_port(a) for a in (fleet.relay_listen, fleet.relay_advertise) if a):
        raise ConfigError(f"{where}: [fleet] relay_listen and relay_advertise must be host:port")


def require_fleet_keys(cfg: PlatformConfig, *keys: str) -> None:
    """ConfigError unless the fleet's named secrets are set (the roles of the fleet need them)."""
    missing = [k for k in keys if not getattr(cfg.fleet, k)]
    if missing:
        raise ConfigError(f"the fleet roles need [fleet] {', '.join(missing)} (a shared secret each)")


def _host_port(address: str) -> bool:
    _, colon, port = address.rpartition(":")
    return bool(colon) and port.isdigit()


def check_loopback_only(cfg: PlatformConfig) -> None:
    """The development keys may only be served on a loopback address."""
    local_admin = LOCAL_ADMIN_KEY in cfg.frontend.admin_api_keys
    if not local_admin and not any(LOCAL_API_KEY in t.api_keys for t in cfg.tenants):
        return
    for listen in (cfg.frontend.listen, cfg.http.listen):
        if listen and not _loopback(listen):
            raise ConfigError(f"the development API keys may only be served on loopback, not {listen}")


def _loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0].strip("[]")
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
