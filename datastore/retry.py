"""Retrying a store call whose connection broke (a failover, a restarted server).

A connection that breaks mid-call is discarded by the pool (SQLAlchemy invalidates it); the call
is then run again on a fresh one, which libpq opens to whichever host is the primary now. Only a
call that is idempotent may be retried: the first try may have committed before its answer was
lost. Every write the platform retries is keyed (admission by request id, an attempt's start by
worker and start time, usage reports by their identity, ends fenced by epoch). Other errors
(a lock timeout, a constraint) are not retried: they are the caller's to map.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
ATTEMPTS = 3  # the first try and two more, each on a fresh connection
BACKOFF_S = 0.2  # before the second try; doubled before each further one


def broken_connection(error: BaseException) -> bool:
    """The error says the connection died (SQLAlchemy has invalidated it), not that the call failed."""
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def retrying(
    call: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """`call(*args, **kwargs)`, run again (up to ATTEMPTS in all) while its connection broke."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call(*args, **kwargs)
        except DBAPIError as e:
            if attempt == ATTEMPTS or not broken_connection(e):
                raise
            name = getattr(call, "__name__", "store call")
            log.warning("%s: connection broke (try %d of %d); retrying", name, attempt, ATTEMPTS)
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
