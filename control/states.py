"""Generation states and the one table of allowed transitions (DESIGN §4).

    QUEUED ──> RUNNING ──> COMPLETED | CANCELED | INTERRUPTED | FAILED
       └──────────────────> CANCELED | FAILED          (never dispatched)

Terminal states are final. `transition()` is the only code that changes `Generation.state`.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING

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


def transition(
    generation: Generation, to: GenerationState, *, now: datetime, reason: str | None = None
) -> None:
    """Moves `generation` to `to` or raises `IllegalTransition`; a terminal state records `reason`.

    The caller holds the generation's row lock (see `generations.lock_generation`).
    """
    if to not in ALLOWED_TRANSITIONS[generation.state]:
        raise IllegalTransition(generation.id, str(generation.state), str(to))
    generation.state = to
    generation.updated_at = now
    if to.terminal:
        generation.finished_at = now
        generation.terminal_reason = reason or str(to)
