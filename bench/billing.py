"""Usage-report ingestion through the billing aggregator, on SQLite and PostgreSQL (not a test).

    G generations, L of them live at a time; each sends R cumulative reports, then awaits
    flush_final (what the frontend does before `finished`). Two runs per store:
    saturated   reports as fast as the event loop produces them: the ingestion ceiling (a flush
                then waits behind the whole backlog, so its latency measures the queue)
    paced       an offered load of --rate reports/s in total: flush latency at that load

Prints reports/s from the first report to the last acknowledged flush, the batches the writer
committed, and the p50/p99 flush-acknowledge latency. Target: >= 5,000 reports/s on PostgreSQL.
Run: `python -m bench.billing` or `python -m bench billing`, with optional
`--generations 1000 --reports 100 --live 200 --rate 5000 --paced-generations 400 --postgres URL`.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, text

from billing.aggregator import UsageAggregator
from billing.usage import UsageReport
from config.settings import MAX_QUOTA, TenantSpec
from control.generations import NewGeneration
from control.model_versions import VersionSpec, register_version
from control.tenants import upsert_tenant
from datastore.store import Store, open_store
from lifecycle.admission import admit
from lifecycle.attempts import Dispatch

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TENANT = "bench"


@dataclass(slots=True, frozen=True)
class Result:
    store: str
    run: str  # "saturated" or "paced <rate>/s"
    reports: int
    seconds: float
    batches: int
    flush_p50_ms: float
    flush_p99_ms: float

    @property
    def reports_per_s(self) -> float:
        return self.reports / self.seconds


def utc_now() -> datetime:
    return datetime.now(UTC)


def prepare(store: Store, generations: int, prefix: str) -> list[str]:
    """A tenant without effective limits, one model version, and `generations` running attempts."""
    now = utc_now()
    hexes = "0" * 64
    unlimited = MAX_QUOTA
    with store.transaction() as session:
        upsert_tenant(
            session,
            TenantSpec(TENANT, (), 1.0, unlimited, unlimited, unlimited, unlimited),
            now=now,
        )
        version = register_version(
            session, VersionSpec("bench-model", "v1", hexes, hexes, hexes, "k", "var/models/bench"), now=now
        )
    dispatch = Dispatch("w1", timedelta(hours=1))
    ids = []
    for i in range(generations):  # one admission transaction each, as the frontend does
        new = NewGeneration(f"{prefix}{i}", TENANT, f"{prefix}{i}", hexes, version.id, 100, 1000)
        ids.append(admit(store, new, now=now, dispatch=dispatch).generation_id)
    return ids


async def ingest(
    store: Store, ids: list[str], reports: int, live: int, rate: float | None
) -> tuple[float, int, list[float]]:
    """`rate`: total offered reports/s (each live generation reports every live/rate s); None: flat out."""
    latencies: list[float] = []
    gate = asyncio.Semaphore(live)
    interval = live / rate if rate else 0.0

    async def generation(agg: UsageAggregator, generation_id: str) -> None:
        async with gate:
            for seq in range(1, reports + 1):
                agg.report(UsageReport(generation_id, 1, seq, 100, seq))
                await asyncio.sleep(interval)
            started = time.perf_counter()
            mark = await agg.flush_final(generation_id, 1)
            latencies.append(time.perf_counter() - started)
            if mark is None or mark.billable.output_tokens != reports:
                raise RuntimeError(f"{generation_id}: the durable watermark is {mark}, expected {reports}")

    async with UsageAggregator(store.sessions, clock=utc_now) as agg:
        started = time.perf_counter()
        await asyncio.gather(*(generation(agg, g) for g in ids))
        elapsed = time.perf_counter() - started
    return elapsed, agg.stats.batches, latencies


def measure(name: str, store: Store, generations: int, reports: int, live: int, rate: float | None) -> Result:
    ids = prepare(store, generations, prefix="paced" if rate else "flat")
    seconds, batches, latencies = asyncio.run(ingest(store, ids, reports, live, rate))
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    run = f"paced {rate:,.0f}/s" if rate else "saturated"
    return Result(name, run, generations * reports, seconds, batches, cuts[49] * 1000, cuts[98] * 1000)


@contextmanager
def sqlite_store() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{Path(directory) / 'bench.sqlite'}")
        try:
            yield store
        finally:
            store.close()


@contextmanager
def postgres_store(url: str) -> Iterator[Store]:
    """A store in a throwaway schema, dropped afterwards."""
    schema = f"bench_{secrets.token_hex(6)}"
    admin = create_engine(url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        store = open_store(url, search_path=schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--generations", type=int, default=1000)
    parser.add_argument("--reports", type=int, default=100, help="reports per generation")
    parser.add_argument("--live", type=int, default=200, help="generations reporting at once")
    parser.add_argument("--rate", type=float, default=5000.0, help="offered reports/s of the paced run")
    parser.add_argument("--paced-generations", type=int, default=400)
    parser.add_argument("--postgres", default=POSTGRES_URL)
    args = parser.parse_args()
    results = []
    for name, opened in (("sqlite", sqlite_store()), ("postgresql", postgres_store(args.postgres))):
        with opened as store:
            results.append(measure(name, store, args.generations, args.reports, args.live, None))
            results.append(measure(name, store, args.paced_generations, args.reports, args.live, args.rate))
    print(f"{args.reports} reports per generation, {args.live} generations live at a time")
    print("| store | run | reports | seconds | reports/s | batches | flush p50 (ms) | flush p99 (ms) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r.store} | {r.run} | {r.reports} | {r.seconds:.2f} | {r.reports_per_s:,.0f} | {r.batches} "
            f"| {r.flush_p50_ms:.1f} | {r.flush_p99_ms:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
