"""The one-machine HA store's layout and Patroni configuration (the processes themselves run in
tests/e2e/test_store_failover.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from datastore.urls import parse_store_url
from serving.store_ha.cluster import Cluster, ClusterLayout, StoreHaError
from serving.store_ha.patroni_config import node_config


def test_the_store_url_names_every_node_and_asks_for_the_primary(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path, nodes=3, pg_port=5441, rest_port=8441)
    url = parse_store_url(layout.store_url())
    assert url.hosts == (("127.0.0.1", "5441"), ("127.0.0.1", "5442"), ("127.0.0.1", "5443"))
    assert url.url.query == {"target_session_attrs": "read-write"}
    assert layout.node_ports("node2") == (5442, 8442)
    assert layout.ports() == [23790, 23800, 5441, 8441, 5442, 8442, 5443, 8443]


def test_a_node_replicates_synchronously_and_fails_over_at_once(tmp_path: Path) -> None:
    config = node_config(
        name="node1", pg_port=5441, rest_port=8441, etcd_port=23790, node_dir=tmp_path, bin_dir="/bin"
    )
    dcs = config["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True
    assert dcs["primary_start_timeout"] == 0 and dcs["master_start_timeout"] == 0  # Patroni 4 and 3
    assert dcs["postgresql"]["use_pg_rewind"] and dcs["postgresql"]["parameters"]["wal_log_hints"] == "on"
    assert config["postgresql"]["listen"] == "127.0.0.1:5441"
    assert config["restapi"]["listen"] == "127.0.0.1:8441"
    assert config["etcd3"]["hosts"] == ["127.0.0.1:23790"]
    assert all("127.0.0.1/32" in rule or rule.startswith("local") for rule in config["bootstrap"]["pg_hba"])


def test_a_port_held_by_another_process_is_refused_not_adopted(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = busy.getsockname()[1]
        cluster = Cluster(ClusterLayout(tmp_path, nodes=2, etcd_port=taken))
        with pytest.raises(StoreHaError, match="in use"):
            cluster._check_ports()


def test_down_with_nothing_running_is_a_no_op(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path / "ha", nodes=2, etcd_port=1, etcd_peer_port=2, pg_port=3, rest_port=5)
    Cluster(layout).down(purge=True)
    assert not (tmp_path / "ha").exists()
