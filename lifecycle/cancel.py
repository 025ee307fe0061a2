"""Cancel intent, persisted before anything else acts on it (docs/design.md §4).

The caller then stops a RUNNING generation's run, whose attempt ends CANCELED through
`termination.finish`, or ends a QUEUED one with `termination.finish_queued`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from control import cancel
from control.states import GenerationState
from datastore.store import Store


@dataclass(slots=True, frozen=True)
class CancelIntent:
    generation_id: str
    state: GenerationState  # the generation's state when the intent was recorded
    already_terminal: bool  # True: nothing to cancel; `state` is its terminal state
    first_request: bool  # True: this call recorded the intent (False on repeats)


def request_cancel(store: Store, tenant_id: str, generation_id: str, *, now: datetime) -> CancelIntent:
    """Records the tenant's cancel intent; idempotent. `GenerationNotFound` for another tenant's id."""
    with store.transaction() as session:
        outcome = cancel.request_cancel(session, tenant_id, generation_id, now=now)
        g = outcome.generation
        return CancelIntent(g.id, g.state, outcome.already_terminal, outcome.first_request)
