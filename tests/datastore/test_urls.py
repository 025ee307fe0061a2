"""Store URLs naming several PostgreSQL hosts reach the primary; other forms are unchanged."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from datastore.store import make_engine
from datastore.urls import parse_store_url

HOSTS = {"host": "10.0.0.1,10.0.0.2", "port": "5432,5433"}


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://app@10.0.0.1:5432,10.0.0.2:5433/control?target_session_attrs=read-write",
        "postgresql://app@10.0.0.1:5432,10.0.0.2:5433/control?target_session_attrs=read-write",
        "postgresql+psycopg://app@/control?host=10.0.0.1,10.0.0.2&port=5432,5433&target_session_attrs=read-write",
        "host=10.0.0.1,10.0.0.2 port=5432,5433 dbname=control user=app target_session_attrs=read-write",
    ],
)
def test_every_multi_host_form_names_both_hosts_for_libpq(url: str) -> None:
    parsed = parse_store_url(url)
    assert parsed.backend == "postgresql" and parsed.url.drivername == "postgresql+psycopg"
    assert parsed.libpq_args() == HOSTS
    assert (parsed.url.host, parsed.url.username, parsed.url.database) == (None, "app", "control")
    assert parsed.url.query == {"target_session_attrs": "read-write"}


def test_one_host_urls_pass_through() -> None:
    assert parse_store_url("sqlite:///var/x.sqlite").url.database == "var/x.sqlite"
    one = parse_store_url("postgresql+psycopg://app@db:6432/control")
    assert (one.url.host, one.url.port, one.libpq_args()) == ("db", 6432, {})
    conninfo = parse_store_url("host=db port=6432 dbname=control user=app")
    assert (conninfo.url.host, conninfo.url.port, conninfo.url.database) == ("db", 6432, "control")


def test_libpq_skips_a_dead_host_and_reaches_the_live_primary() -> None:
    """A refused first host (a node that is down) is skipped, as after a failover."""
    url = "postgresql+psycopg://postgres@127.0.0.1:1,127.0.0.1:5432/test?target_session_attrs=read-write"
    engine = make_engine(url, timeout_s=2)
    try:
        with engine.connect() as connection:
            row = connection.execute(text("SELECT inet_server_port(), pg_is_in_recovery()")).one()
    finally:
        engine.dispose()
    assert tuple(row) == (5432, False)


def test_a_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        make_engine("sqlite:///x.sqlite", timeout_s=0)
