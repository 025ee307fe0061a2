"""The Patroni node configuration of the one-machine HA store (a YAML document, written as JSON,
which YAML reads as it is).

Choices, each for the failover the platform must ride through:
- `synchronous_mode: true`: a commit is acknowledged only once the synchronous standby has it, so
  a primary's loss loses no acknowledged write; Patroni promotes only that standby.
- `primary_start_timeout: 0` (`master_start_timeout` before Patroni 3.1): a primary whose postgres
  crashed is failed over at once, not restarted in place (what kill -9 of it tests).
- `loop_wait: 1`: Patroni looks at its postgres every second, which bounds the detection time.
- `use_pg_rewind` with `wal_log_hints`: the old primary rejoins as a replica of the new one.
- trust authentication on loopback only (a development and test recipe, never exposed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCOPE = "llm-control"
NAMESPACE = "/llm-platform/"


def node_config(
    *,
    name: str,
    pg_port: int,
    rest_port: int,
    etcd_port: int,
    node_dir: Path,
    bin_dir: str,
) -> dict[str, Any]:
    host = "127.0.0.1"
    return {
        "scope": SCOPE,
        "namespace": NAMESPACE,
        "name": name,
        "log": {"dir": str(node_dir), "file_num": 2, "level": "INFO"},
        "restapi": {"listen": f"{host}:{rest_port}", "connect_address": f"{host}:{rest_port}"},
        "etcd3": {"hosts": [f"{host}:{etcd_port}"], "protocol": "http"},
        "bootstrap": {
            "dcs": {
                "ttl": 20,
                "loop_wait": 1,
                "retry_timeout": 5,
                "maximum_lag_on_failover": 1 << 20,
                "master_start_timeout": 0,
                "primary_start_timeout": 0,
                "synchronous_mode": True,
                "postgresql": {
                    "use_pg_rewind": True,
                    "use_slots": True,
                    "parameters": {
                        "wal_log_hints": "on",
                        "max_connections": 100,
                        "shared_buffers": "16MB",
                        "max_wal_senders": 10,
                        "max_replication_slots": 10,
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            "pg_hba": [
                "local all all trust",
                f"host all all {host}/32 trust",
                f"host replication all {host}/32 trust",
            ],
        },
        "postgresql": {
            "listen": f"{host}:{pg_port}",
            "connect_address": f"{host}:{pg_port}",
            "data_dir": str(node_dir / "data"),
            "bin_dir": bin_dir,
            "pgpass": str(node_dir / "pgpass"),
            "authentication": {
                "superuser": {"username": "postgres"},
                "replication": {"username": "postgres"},
                "rewind": {"username": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(node_dir)},
        },
        "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
    }


def write_config(path: Path, config: dict[str, Any]) -> None:
    path.write_text(json.dumps(config, indent=2) + "\n")
