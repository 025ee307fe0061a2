"""Store URLs: SQLite, PostgreSQL, and PostgreSQL with several hosts (a replicated store).

libpq's multi-host form names every node of a replicated PostgreSQL, and
`target_session_attrs=read-write` makes libpq skip the replicas and connect to the primary, so a
platform whose pool reconnects after a failover lands on the new primary by itself:

    postgresql+psycopg://user@10.0.0.1:5432,10.0.0.2:5432/control?target_session_attrs=read-write
    postgresql+psycopg://user@/control?host=10.0.0.1,10.0.0.2&port=5432,5432&target_session_attrs=read-write
    host=10.0.0.1,10.0.0.2 port=5432,5432 dbname=control user=app target_session_attrs=read-write

SQLAlchemy's URL parser takes one host, so the hosts and ports travel to libpq as its own
comma-separated `host` and `port` parameters; everything else stays in the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from sqlalchemy.engine import URL, make_url

POSTGRES_DRIVER = "postgresql+psycopg"


@dataclass(slots=True, frozen=True)
class StoreUrl:
    url: URL  # what SQLAlchemy is given (no host when there are several)
    hosts: tuple[tuple[str, str], ...] = ()  # (host, port) of every node when given as a list

    @property
    def backend(self) -> str:
        return self.url.get_backend_name()

    def libpq_args(self) -> dict[str, str]:
        """The libpq connection parameters naming the hosts (none for a one-host URL)."""
        if not self.hosts:
            return {}
        return {"host": ",".join(h for h, _ in self.hosts), "port": ",".join(p for _, p in self.hosts)}


def parse_store_url(raw: str) -> StoreUrl:
    """A store URL in any of the forms above; ValueError for one that names no known backend."""
    text = raw.strip()
    if "://" not in text and "=" in text:
        return _from_conninfo(text)
    scheme, _, rest = text.partition("://")
    netloc = urlsplit(f"x://{rest}").netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if scheme.startswith("postgresql") and "," in hosts:
        path_and_query = rest[len(netloc) :]
        single = make_url(f"{_driver(scheme)}://{userinfo}{at}{path_and_query}")
        return _with_hosts(single, [_host_port(h) for h in hosts.split(",")])
    url = make_url(text if not scheme.startswith("postgresql") else f"{_driver(scheme)}://{rest}")
    query = dict(url.query)
    host = query.get("host")
    if url.get_backend_name() == "postgresql" and isinstance(host, str) and "," in host:
        ports = str(query.get("port", "")).split(",") if query.get("port") else []
        names = host.split(",")
        pairs = [(n, ports[i] if i < len(ports) else "5432") for i, n in enumerate(names)]
        return _with_hosts(url.difference_update_query(["host", "port"]), pairs)
    return StoreUrl(url)


def _from_conninfo(text: str) -> StoreUrl:
    params = dict(pair.split("=", 1) for pair in text.split())
    names = params.pop("host", "127.0.0.1").split(",")
    ports = params.pop("port", "5432").split(",")
    user = params.pop("user", "")
    password = params.pop("password", "")
    database = params.pop("dbname", "")
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    url = make_url(f"{POSTGRES_DRIVER}://{auth}{'@' if auth else ''}/{database}")
    url = url.update_query_dict(params)
    pairs = [(n, ports[i] if i < len(ports) else ports[-1]) for i, n in enumerate(names)]
    if len(pairs) == 1:
        return StoreUrl(url.set(host=pairs[0][0], port=int(pairs[0][1])))
    return StoreUrl(url, tuple(pairs))


def _with_hosts(url: URL, pairs: list[tuple[str, str]]) -> StoreUrl:
    return StoreUrl(url.set(host=None, port=None), tuple(pairs))


def _host_port(item: str) -> tuple[str, str]:
    host, colon, port = item.rpartition(":")
    return (host, port) if colon and port.isdigit() else (item, "5432")


def _driver(scheme: str) -> str:
    return POSTGRES_DRIVER if scheme in ("postgresql", "postgres") else scheme
