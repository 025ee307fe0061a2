"""Generation states and the one table of allowed transitions (docs/design.md §4).

    QUEUED ──> RUNNING ──> COMPLETED | CANCELED | INTERRUPTED | FAILED
       └──────────────────> CANCELED | FAILED          (never dispatched)

Terminal states are final. `moved()` decides every change of a generation's state: `transition()`
applies it to the ORM object, control/generation_rows.py to a row read under its lock.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING, Any

from control.errors import IllegalTransition

if TYPE_CHECKING:
    from control.models import Generation


class GenerationState(enum.StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    INTERRUPTED = "INTERRUPTED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return not ALLOWED_TRANSITIONS[self]


S = GenerationState
ALLOWED_TRANSITIONS: dict[GenerationState, frozenset[GenerationState]] = {
    S.QUEUED: frozenset({S.RUNNING, S.CANCELED, S.FAILED}),
    S.RUNNING: frozenset({S.COMPLETED, S.CANCELED, S.INTERRUPTED, S.FAILED}),
    S.COMPLETED: frozenset(),
    S.CANCELED: frozenset(),
    S.INTERRUPTED: frozenset(),
    S.FAILED: frozenset(),
}
TERMINAL_STATES = frozenset(s for s in GenerationState if s.terminal)


def moved(
    generation_id: str,
    state: GenerationState,
    to: GenerationState,
    *,
    now: datetime,
    reason: str | None = None,
) -> dict[str, Any]:
    """The columns a move from `state` to `to` sets (a terminal state records `reason`), or
    `IllegalTransition`. Every change of a generation's state is decided here."""
    if to not in ALLOWED_TRANSITIONS[state]:
        raise IllegalTransition(generation_id, str(state), str(to))
    values: dict[str, Any] = {"state": to, "updated_at": now}
    if to.terminal:
        values |= {"finished_at": now, "terminal_reason": reason or str(to)}
    return values


def transition(
    generation: Generation, to: GenerationState, *, now: datetime, reason: str | None = None
) -> None:
    """Moves the ORM `generation` to `to` (`moved`) or raises `IllegalTransition`.

    The caller holds the generation's row lock (see `generations.lock_generation`).
    """
    for column, value in moved(generation.id, generation.state, to, now=now, reason=reason).items():
        setattr(generation, column, value)
