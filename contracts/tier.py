"""The latency tier of a request, encoded as in the public API (`llm.v1.Tier`) everywhere: the
proto, the frontend's queues, the worker's `tier` tensor and the engine's scheduler."""

from __future__ import annotations

import enum


class Tier(enum.IntEnum):
    """Lower values are scheduled first. TIER_UNSPECIFIED (0) exists only on the wire: validation
    turns it into INTERACTIVE."""

    INTERACTIVE = 1  # held to the interactive time-to-first-token objective
    BATCH = 2  # may queue longer; refused later than interactive under load


# The members under their own names, as the standard library's `signal` and `re` modules do.
INTERACTIVE = Tier.INTERACTIVE
BATCH = Tier.BATCH
