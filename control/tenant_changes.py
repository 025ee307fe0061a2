"""The record of tenant and key changes: who, when, what, written in the transaction of the change
itself (as model changes are, control/rollout.py). A detail is the settings a change set, as JSON;
no secret is ever part of one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import TenantChange


class Action:
    """The recorded actions (`TenantChange.action`)."""

    TENANT_CREATE = "TENANT_CREATE"
    TENANT_UPDATE = "TENANT_UPDATE"
    TENANT_DISABLE = "TENANT_DISABLE"
    TENANT_ENABLE = "TENANT_ENABLE"
    KEY_CREATE = "KEY_CREATE"
    KEY_UPDATE = "KEY_UPDATE"
    KEY_ROTATE = "KEY_ROTATE"
    KEY_REVOKE = "KEY_REVOKE"


@dataclass(slots=True, frozen=True)
class Change:
    at: datetime
    actor: str
    action: str
    tenant_id: str
    key_id: str | None
    detail: dict[str, Any]


def record(
    session: Session,
    *,
    actor: str,
    action: str,
    tenant_id: str,
    now: datetime,
    key_id: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    session.add(
        TenantChange(
            at=now,
            actor=actor[:200],
            action=action,
            tenant_id=tenant_id,
            key_id=key_id,
            detail=None if not detail else json.dumps(dict(detail), sort_keys=True, default=str),
        )
    )


def list_changes(session: Session, *, tenant_id: str = "", limit: int = 100) -> list[Change]:
    """The newest `limit` changes (of one tenant when `tenant_id` is given), newest first."""
    query = select(TenantChange).order_by(TenantChange.id.desc()).limit(limit)
    if tenant_id:
        query = query.where(TenantChange.tenant_id == tenant_id)
    return [
        Change(c.at, c.actor, c.action, c.tenant_id, c.key_id, json.loads(c.detail) if c.detail else {})
        for c in session.scalars(query)
    ]
