from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import ConfigError, check_loopback_only, load_config, parse_config, require_fleet_keys
from config.settings import ModelSettings
from serving.platform import Platform


def test_default_config_serves_the_default_model_with_the_local_tenant() -> None:
    cfg = load_config(None)
    assert cfg.frontend.listen == "127.0.0.1:50051"
    assert cfg.frontend.metrics_listen == "127.0.0.1:9464"
    assert (cfg.frontend.slow_consumer_timeout_s, cfg.frontend.converse_window_events) == (30.0, 256)
    assert (cfg.frontend.worker_inactivity_timeout_s, cfg.frontend.worker_probe_interval_s) == (10.0, 2.0)
    assert cfg.store.url == "sqlite:///var/control.sqlite"
    # two versions of the default model, each under its own alias: fp32 and int4 weights
    assert cfg.models == (ModelSettings(), ModelSettings(alias="smollm2-135m-int4", quantization="int4"))
    assert [(m.alias, m.quantization) for m in cfg.models] == [
        ("smollm2-135m", "none"),
        ("smollm2-135m-int4", "int4"),
    ]
    assert [(t.id, t.api_keys) for t in cfg.tenants] == [("local", ("local-dev-key",))]


def test_file_keys_override_defaults_and_local_tenant_exists_only_by_default(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[frontend]\nlisten = "127.0.0.1:6000"\n'
        '[[tenants]]\nid = "acme"\napi_keys = ["k1", "k2"]\nweight = 2.0\n'
        '[[models]]\nalias = "small"\ndtype = "bfloat16"\nmax_num_seqs = 8\n'
    )
    cfg = load_config(path)
    assert cfg.frontend.listen == "127.0.0.1:6000"
    assert cfg.frontend.metrics_listen == "127.0.0.1:9464"
    assert [t.id for t in cfg.tenants] == ["acme"]
    assert cfg.tenants[0].api_keys == ("k1", "k2") and cfg.tenants[0].weight == 2.0
    assert cfg.models[0].alias == "small" and cfg.models[0].dtype == "bfloat16"
    assert cfg.models[0].block_size == 16
    assert parse_config({}).tenants == ()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"nope": {}}, "unknown section"),
        ({"frontend": {"lisen": "x"}}, "unknown key"),
        ({"models": [{"dtype": "float16"}]}, "dtype"),
        ({"models": [{"kv_cache_dtype": "int8"}]}, "kv_cache_dtype"),
        ({"models": [{"scheduler_policy": "fifo"}]}, "scheduler_policy"),
        ({"models": [{"alias": "a@b"}]}, "alias"),
        ({"models": [{"alias": "a"}, {"alias": "a"}]}, "unique"),
        ({"tenants": [{"id": "t", "api_keys": "k"}]}, "api_keys"),
        ({"tenants": [{"id": "a", "api_keys": ["k"]}, {"id": "b", "api_keys": ["k"]}]}, "two tenants"),
        ({"store": {"url": "mysql://x"}}, "store url"),
        ({"store": {"timeout_s": 0}}, "timeout_s"),
        ({"store": {"final_usage_wait_s": -1}}, "final_usage_wait_s"),
        ({"store": {"usage_queue_max": 0}}, "usage_queue_max"),
        ({"frontend": {"slow_consumer_timeout_s": 0}}, "slow_consumer_timeout_s"),
        ({"frontend": {"converse_window_events": 0}}, "converse_window_events"),
        ({"frontend": {"stream_max_bytes": 0}}, "stream_max_bytes must be positive"),
        # one generation's retained log must fit the budget of all finished generations' logs
        ({"frontend": {"stream_max_bytes": 1 << 20, "stream_retain_max_bytes": 1 << 20}}, "at least twice"),
        ({"frontend": {"worker_probe_interval_s": 0}}, "worker_probe_interval_s"),
        # a canary goes out after a probe interval of silence: the timeout must leave it time
        ({"frontend": {"worker_probe_interval_s": 5, "worker_inactivity_timeout_s": 5}}, "below"),
        ({"frontend": {"attempt_lease_s": 0}}, "attempt_lease_s"),
        ({"fleet": {"worker_lease_s": -1}}, "leases"),
        ({"fleet": {"registry_refresh_s": 10, "worker_lease_s": 10}}, "registry_refresh_s"),
        ({"fleet": {"relay_listen": "nowhere"}}, "relay_listen and relay_advertise"),
        ({"fleet": {"secret": "x"}}, "unknown key"),
        ({"worker": {"id": "x"}}, "unknown key"),
        ({"models": [{"alias": "m", "speculative_method": "medusa"}]}, "speculative_method"),
        ({"models": [{"alias": "m", "speculative_tokens": -1}]}, "speculative_tokens"),
        (
            {"models": [{"alias": "m", "speculative_method": "draft", "speculative_draft": "x"}]},
            "speculative_draft",
        ),
    ],
)
def test_bad_config_is_refused(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


def test_bad_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[frontend\n")
    with pytest.raises(ConfigError):
        load_config(path)


def test_development_key_is_loopback_only() -> None:
    cfg = parse_config(
        {"frontend": {"listen": "0.0.0.0:50051"}, "tenants": [{"id": "local", "api_keys": ["local-dev-key"]}]}
    )
    with pytest.raises(ConfigError, match="loopback"):
        Platform(cfg)
    check_loopback_only(parse_config({"frontend": {"listen": "0.0.0.0:50051"}}))
    check_loopback_only(load_config(None))


def test_tls_needs_a_certificate_and_its_key() -> None:
    for bad in ({"tls_cert_file": "c.pem"}, {"tls_key_file": "k.pem"}, {"tls_client_ca_file": "ca.pem"}):
        with pytest.raises(ConfigError, match="TLS"):
            parse_config({"frontend": bad})
    ok = parse_config(
        {"frontend": {"tls_cert_file": "c.pem", "tls_key_file": "k.pem", "tls_client_ca_file": "ca.pem"}}
    )
    assert ok.frontend.tls_client_ca_file == "ca.pem"


def test_the_http_listener_is_configured_in_its_own_section() -> None:
    assert load_config(None).http.listen == "127.0.0.1:8080"
    cfg = parse_config({"http": {"listen": "127.0.0.1:0", "default_max_tokens": 64}})
    assert cfg.http.listen == "127.0.0.1:0" and cfg.http.default_max_tokens == 64
    assert parse_config({"http": {"listen": ""}}).http.listen == ""  # no HTTP
    for bad in ({"listen": "8080"}, {"default_max_tokens": 0}, {"port": 1}):
        with pytest.raises(ConfigError, match=r"\[http\]"):
            parse_config({"http": bad})
    dev = [{"id": "local", "api_keys": ["local-dev-key"]}]
    with pytest.raises(ConfigError, match="loopback"):
        check_loopback_only(parse_config({"http": {"listen": "0.0.0.0:8080"}, "tenants": dev}))


def test_the_fleet_sections_have_defaults_and_the_roles_need_their_secrets() -> None:
    cfg = parse_config({})
    assert (cfg.fleet.relay_listen, cfg.fleet.worker_lease_s, cfg.worker.name, cfg.worker.host) == (
        "127.0.0.1:0",
        10.0,
        "",
        "127.0.0.1",
    )
    with pytest.raises(ConfigError, match="frontend_key, worker_key"):
        require_fleet_keys(cfg, "frontend_key", "worker_key")
    keyed = parse_config({"fleet": {"frontend_key": "a", "worker_key": "b"}, "worker": {"name": "gpu-7"}})
    require_fleet_keys(keyed, "frontend_key", "worker_key")
    assert keyed.worker.name == "gpu-7"


def test_the_fleet_examples_parse_and_carry_their_roles_secrets() -> None:
    root = Path(__file__).resolve().parents[2] / "deploy" / "fleet"
    frontend, worker = load_config(root / "frontend.toml"), load_config(root / "worker.toml")
    require_fleet_keys(frontend, "frontend_key", "worker_key")
    require_fleet_keys(worker, "worker_key")
    assert frontend.fleet.worker_key == worker.fleet.worker_key
    assert frontend.store.url == worker.store.url and worker.worker.name == "cpu-a"


def test_the_store_section_takes_a_multi_host_url_and_its_outage_bounds() -> None:
    url = "host=127.0.0.1,127.0.0.1 port=5441,5442 dbname=postgres target_session_attrs=read-write"
    store = parse_config({"store": {"url": url, "timeout_s": 3, "final_usage_wait_s": 9}}).store
    assert (store.url, store.timeout_s, store.final_usage_wait_s) == (url, 3, 9)
    assert (store.probe_interval_s, store.usage_queue_max) == (1.0, 100_000)


def test_the_repository_section_sets_where_pushes_land_and_their_size_limit() -> None:
    cfg = parse_config({"repository": {"path": "/srv/models", "max_push_bytes": 1024}})
    assert (cfg.repository.path, cfg.repository.max_push_bytes) == ("/srv/models", 1024)
    assert (parse_config({}).repository.path, parse_config({}).repository.max_push_bytes) == (
        "var/models",
        8 << 30,
    )
    for bad in (0, -1, 1.5, "big"):
        with pytest.raises(ConfigError, match="max_push_bytes must be a positive integer"):
            parse_config({"repository": {"max_push_bytes": bad}})
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"repository": {"size": 1}})
    assert (
        parse_config({"fleet": {"repository_target": "10.0.0.5:50051"}}).fleet.repository_target
        == "10.0.0.5:50051"
    )


def test_speculative_knobs_are_read_per_model() -> None:
    cfg = parse_config(
        {
            "models": [
                {"alias": "big", "speculative_method": "draft", "speculative_draft": "small"},
                {
                    "alias": "small",
                    "quantization": "int4",
                    "speculative_method": "ngram",
                    "speculative_tokens": 4,
                },
            ]
        }
    )
    big, small = cfg.models
    assert (big.speculative_method, big.speculative_draft, big.speculative_tokens) == ("draft", "small", 0)
    assert (small.speculative_method, small.speculative_tokens) == ("ngram", 4)
    assert parse_config({"models": [{"alias": "m"}]}).models[0].speculative_method == "none"
