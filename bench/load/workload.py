"""The serving benchmark's workload: named request mixes, built deterministically from a seed, and
their arrival schedules. Pure: no tokenizer, no clock (prompt text is made in bench/load/prompts.py).

    interactive   prompts 64-256 tokens, outputs 32-96
    mixed         80% interactive + 20% documents (1,200-1,800 prompt tokens, 64 out); half of all
                  requests start with one of 4 fixed 256-token system prefixes (prepended to the
                  sampled prompt); 2 tenants
    offline       64 requests of 128 in / 128 out, all submitted at once, in the BATCH tier
    decode        8 requests of 128 in / 256 out, one at a time (single-stream decode speed)

Every output length is forced (ignore_eos), so each request produces exactly `output_tokens`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

PREFIX_TOKENS = 256  # length of each shared system prefix
KINDS = ("interactive", "document")  # RequestSpec.kind


@dataclass(slots=True, frozen=True)
class Mix:
    name: str
    prompt_tokens: tuple[int, int]  # inclusive range of an ordinary request's prompt
    output_tokens: tuple[int, int]  # inclusive range of an ordinary request's output
    document_share: float = 0.0  # share of requests that are long documents
    document_prompt_tokens: tuple[int, int] = (1200, 1800)
    document_output_tokens: int = 64
    prefixed_share: float = 0.0  # share of requests that start with a shared system prefix
    prefixes: int = 0  # how many distinct shared prefixes
    tenants: int = 1
    requests: int = 64  # default number of requests
    all_at_once: bool = False  # default arrivals: every request at t=0 (otherwise Poisson)
    one_at_a_time: bool = False  # default arrivals: one client, each request after the last
    batch_tier: bool = False  # requests ask for the BATCH tier (throughput work), not INTERACTIVE


MIXES = {
    m.name: m
    for m in (
        Mix("interactive", (64, 256), (32, 96)),
        Mix("mixed", (64, 256), (32, 96), document_share=0.2, prefixed_share=0.5, prefixes=4, tenants=2),
        Mix("offline", (128, 128), (128, 128), all_at_once=True, batch_tier=True),
        Mix("decode", (128, 128), (256, 256), requests=8, one_at_a_time=True),
    )
}


@dataclass(slots=True, frozen=True)
class RequestSpec:
    index: int  # position in the workload; also the arrival order
    kind: str  # "interactive" or "document" (the offline mix's requests are "interactive")
    tenant: int  # 0 .. mix.tenants - 1
    prefix: int | None  # which shared system prefix starts the prompt, if any
    body_tokens: int  # prompt tokens after the prefix
    output_tokens: int
    batch_tier: bool = False  # the platform's BATCH tier (peers have no tiers)

    @property
    def prompt_tokens(self) -> int:
        return self.body_tokens + (PREFIX_TOKENS if self.prefix is not None else 0)


def exact_share(n: int, share: float, rng: random.Random) -> list[bool]:
    """n flags, round(n * share) of them true, in a seeded shuffled order."""
    k = round(n * share)
    flags = [True] * k + [False] * (n - k)
    rng.shuffle(flags)
    return flags


def build_requests(mix: Mix, n: int, seed: int) -> list[RequestSpec]:
    """The mix's first n requests for this seed. Document and prefixed shares are exact over the n
    requests; which requests they are, their tenants and lengths are seeded draws."""
    rng = random.Random(f"{seed}/{mix.name}")
    documents = exact_share(n, mix.document_share, rng)
    prefixed = exact_share(n, mix.prefixed_share, rng)
    out = []
    for i in range(n):
        prefix = rng.randrange(mix.prefixes) if prefixed[i] else None
        tenant = rng.randrange(mix.tenants)
        if documents[i]:
            body, output = rng.randint(*mix.document_prompt_tokens), mix.document_output_tokens
        else:
            body, output = rng.randint(*mix.prompt_tokens), rng.randint(*mix.output_tokens)
        kind = "document" if documents[i] else "interactive"
        out.append(RequestSpec(i, kind, tenant, prefix, body, output, mix.batch_tier))
    return out


def poisson_offsets(n: int, rate: float, seed: int) -> list[float]:
    """Arrival offsets (s) of n requests, Poisson at `rate` per second. The schedule at rate r is the
    schedule at rate 1 divided by r, so a rate sweep replays one shape faster or slower."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    rng, t, out = random.Random(f"{seed}/arrivals"), 0.0, []
    for _ in range(n):
        t += rng.expovariate(1.0)
        out.append(t / rate)
    return out


@dataclass(slots=True, frozen=True)
class Load:
    """How requests arrive: Poisson at `rate` per second (open loop), or `concurrency` clients that
    each send their next request when the last one finished (closed loop)."""

    rate: float | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("a load has either a rate or a concurrency")
        rate_ok = self.rate is None or self.rate > 0
        clients_ok = self.concurrency is None or self.concurrency >= 1
        if not (rate_ok and clients_ok):
            raise ValueError("rate and concurrency must be positive")

    @property
    def label(self) -> str:
        return f"rate {self.rate:g}/s" if self.rate is not None else f"concurrency {self.concurrency}"


def loads(mix: Mix, n: int, rates: list[float], concurrency: int | None) -> list[Load]:
    """The loads to run: each rate, or the concurrency, or the mix's default (all n requests at
    once for a mix that sends everything together, one client for a mix that sends one at a time,
    else Poisson at 1 request/s)."""
    if rates and concurrency is not None:
        raise ValueError("give rates or a concurrency, not both")
    if concurrency is not None:
        return [Load(concurrency=concurrency)]
    if rates:
        return [Load(rate=r) for r in rates]
    if mix.all_at_once:
        return [Load(concurrency=n)]
    return [Load(concurrency=1)] if mix.one_at_a_time else [Load(rate=1.0)]


class Round(NamedTuple):
    """One run of a load: its label, its round (1..n; 0 when the load runs once) and the targets'
    order."""

    load: Load
    label: str
    number: int
    order: list[str]


def rounds(plan: list[Load], targets: list[str], n: int) -> list[Round]:
    """Each load n times, its label naming the round when n > 1, the targets in the given order in
    odd rounds and reversed in even ones: a machine whose speed drifts over minutes then favours no
    target in the median ratio (bench/compare/serve_report.py `rounds_summary`)."""
    out = []
    for load in plan:
        for r in range(n):
            label = load.label if n == 1 else f"{load.label}, round {r + 1}"
            order = list(targets) if r % 2 == 0 else targets[::-1]
            out.append(Round(load, label, 0 if n == 1 else r + 1, order))
    return out
