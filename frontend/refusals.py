"""What the frontend itself refuses, and why: domain errors, raised wherever a rule is checked.

A refusal names its meaning (the request is invalid, the caller is not authenticated, no worker
can take it now, ...) and carries a stable UPPER_SNAKE reason for clients, a message that never
holds prompt or output text, and, where a retry may succeed, a base delay. It says nothing of
transports: frontend/api_errors.py is the one table that turns every domain error, these and those
of control/, billing/ and the others, into the status a gRPC or HTTP client sees.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request the frontend refuses. Subclasses name the meaning; the error table its status."""

    def __init__(
        self,
        reason: str,
        message: str,
        metadata: dict[str, str] | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason  # UPPER_SNAKE, stable for clients
        self.message = message  # human-readable; never contains prompt or output text
        self.metadata = metadata or {}
        self.retry_after_s = retry_after_s  # a base delay; None: retrying the same will not help

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class InvalidRequest(Refusal):
    """The request itself is wrong: a setting, a field, its size or its encoding."""

    def __init__(self, reason: str, message: str, **metadata: str) -> None:
        super().__init__(reason, message, metadata)


class NotAuthenticated(Refusal):
    """No credential, or one that names nobody."""

    def __init__(self, message: str) -> None:
        super().__init__("UNAUTHENTICATED", message)


class NotPermitted(Refusal):
    """A known caller asking for what its credential does not open."""


class NotFound(Refusal):
    """What the request names does not exist (or is not the caller's to know of)."""


class OutOfRange(Refusal):
    """A position past what exists or is still retained (a cursor, a file offset)."""


class EventsExpired(OutOfRange):
    """The events of a generation after the reader's cursor are no longer retained."""

    def __init__(self, generation_id: str, message: str = "", **metadata: str) -> None:
        message = message or (
            f"the events of generation {generation_id} after this cursor are no longer retained"
        )
        super().__init__("CURSOR_EXPIRED", message, {"generation_id": generation_id, **metadata})


class Unavailable(Refusal):
    """Nothing can take the request now (capacity, a worker, the store, this frontend): retry."""

    def __init__(self, reason: str, message: str, retry_after_s: float | None = 1.0) -> None:
        super().__init__(reason, message, retry_after_s=retry_after_s)


class Draining(Unavailable):
    """This frontend is shutting down: new work (a generation, a stream relayed from its owner) goes
    to another frontend."""

    def __init__(self) -> None:
        super().__init__("DRAINING", "this frontend is shutting down; send the request to another")


class StoreUnavailable(Unavailable):
    """The control store cannot be reached (or is locked past its timeout): retry soon."""

    def __init__(self) -> None:
        super().__init__("STORE_UNAVAILABLE", "the control store is unavailable")


class Exhausted(Refusal):
    """A bounded resource of this frontend is used up (watchers, a request's size)."""


class PreconditionFailed(Refusal):
    """The request is valid but the system is not in a state that allows it."""


class Unsupported(Refusal):
    """A method this endpoint does not have."""


class InternalFailure(Refusal):
    """Something failed on our side that the client cannot fix; the message says only what."""
