"""Roll-out of model versions: route changes with their record, promote, roll back, retire.

Every change is a `ModelChange` row (who, when, what, the alias' route before and after), written in
the transaction of the change itself. A rollback restores the `route_before` of the alias' last
route change and is itself recorded, so a second rollback undoes the first (as `kubectl rollout
undo` does).

Retirement runs in two steps: `begin_retire` (refused while any alias routes to the version) moves
it to DRAINING, which takes no new route and no new pin; once `active_generations` is 0 and the
workers unloaded it, `finish_retire` records it RETIRED.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.errors import (
    CanaryAmbiguous,
    NoPreviousRoute,
    UnknownModelVersion,
    VersionNotServable,
    VersionRouted,
)
from control.model_versions import alias_routes, set_alias_route, set_version_status
from control.models import AliasRoute, Generation, ModelChange, ModelVersion, ModelVersionStatus, RouteOrigin
from control.states import TERMINAL_STATES

V = ModelVersionStatus
Route = dict[str, float]


@dataclass(slots=True, frozen=True)
class Change:
    at: datetime
    actor: str
    action: str
    alias: str | None
    version_id: str | None
    before: Route | None
    after: Route | None


def record_change(
    session: Session,
    *,
    actor: str,
    action: str,
    now: datetime,
    alias: str | None = None,
    version_id: str | None = None,
    before: Mapping[str, float] | None = None,
    after: Mapping[str, float] | None = None,
) -> None:
    session.add(
        ModelChange(
            at=now,
            actor=actor[:200],
            action=action,
            alias=alias,
            model_version_id=version_id,
            route_before=None if before is None else json.dumps(dict(sorted(before.items()))),
            route_after=None if after is None else json.dumps(dict(sorted(after.items()))),
        )
    )


def change_route(
    session: Session,
    alias: str,
    weights: Mapping[str, float],
    *,
    actor: str,
    now: datetime,
    action: str = "SET_ROUTE",
    origin: RouteOrigin = RouteOrigin.ADMIN,
) -> Route:
    """Sets the alias' route (control/model_versions.py `set_alias_route`) and records the change."""
    before = alias_routes(session, alias)
    set_alias_route(session, alias, weights, now=now, origin=origin)
    after = dict(weights)
    record_change(session, actor=actor, action=action, now=now, alias=alias, before=before, after=after)
    return after


def canary_route(current: Mapping[str, float], version_id: str, percent: int) -> Route:
    """`version_id` at `percent` of the alias (1-99), the current legs sharing the rest in
    proportion; all of it for 0, 100, or an alias with no route yet."""
    others = {v: w for v, w in current.items() if v != version_id}
    total = sum(others.values())
    if not 0 < percent < 100 or total <= 0:
        return {version_id: 100.0}
    route = {v: w * (100 - percent) / total for v, w in others.items()}
    route[version_id] = float(percent)
    return route


def canary(
    session: Session, alias: str, version_id: str, percent: int, *, actor: str, now: datetime
) -> Route:
    """Routes `percent` of the alias to `version_id` (`canary_route`), recorded as CANARY."""
    route = canary_route(alias_routes(session, alias), version_id, percent)
    return change_route(session, alias, route, actor=actor, now=now, action="CANARY")


def promote(session: Session, alias: str, version_id: str, *, actor: str, now: datetime) -> Route:
    """Routes all of the alias to `version_id` ("": the canary of a two-leg route: the lighter leg,
    or at equal weights the one its last route change added)."""
    current = alias_routes(session, alias)
    if not current:
        raise UnknownModelVersion(alias)
    if not version_id:
        version_id = _canary_leg(session, alias, current)
    return change_route(session, alias, {version_id: 100.0}, actor=actor, now=now, action="PROMOTE")


def _canary_leg(session: Session, alias: str, current: Route) -> str:
    legs = sorted(current.items(), key=lambda leg: leg[1])
    if len(legs) != 2:
        raise CanaryAmbiguous(alias)
    if legs[0][1] < legs[1][1]:
        return legs[0][0]
    last = _last_route_change(session, alias)
    added = set(current) - set(json.loads(last.route_before or "{}")) if last is not None else set()
    if len(added) != 1:
        raise CanaryAmbiguous(alias)
    return added.pop()


def _last_route_change(session: Session, alias: str) -> ModelChange | None:
    return session.scalars(
        select(ModelChange)
        .where(ModelChange.alias == alias, ModelChange.route_after.is_not(None))
        .order_by(ModelChange.id.desc())
        .limit(1)
    ).first()


def rollback(session: Session, alias: str, *, actor: str, now: datetime) -> Route:
    """Restores the alias' route as it was before its last route change; `NoPreviousRoute` when
    there is none (or it was no route at all)."""
    last = _last_route_change(session, alias)
    previous: Route = json.loads(last.route_before) if last is not None and last.route_before else {}
    if not previous:
        raise NoPreviousRoute(alias)
    return change_route(session, alias, previous, actor=actor, now=now, action="ROLLBACK")


def begin_retire(session: Session, version_id: str, *, actor: str, now: datetime) -> ModelVersion:
    """DRAINING: no new route, no new pin. `VersionRouted` while an alias routes to it; a version
    already DRAINING or RETIRED is returned as it is."""
    version = session.get(ModelVersion, version_id)
    if version is None:
        raise UnknownModelVersion(version_id)
    if version.status in (V.DRAINING, V.RETIRED):
        return version
    routed = tuple(
        session.scalars(
            select(AliasRoute.alias)
            .where(AliasRoute.model_version_id == version_id)
            .order_by(AliasRoute.alias)
        )
    )
    if routed:
        raise VersionRouted(version_id, routed)
    target = V.DRAINING if version.status is V.READY else V.RETIRED  # REGISTERED: never served
    version = set_version_status(session, version_id, target, now=now)
    record_change(session, actor=actor, action="RETIRE", now=now, version_id=version_id)
    return version


def active_generations(session: Session, version_id: str) -> int:
    """Generations pinned to the version that have not ended (queued or running, any frontend)."""
    return (
        session.scalar(
            select(func.count())
            .select_from(Generation)
            .where(Generation.model_version_id == version_id, Generation.state.not_in(TERMINAL_STATES))
        )
        or 0
    )


def finish_retire(session: Session, version_id: str, *, actor: str, now: datetime) -> ModelVersion:
    """RETIRED (from DRAINING), recorded; a version already RETIRED is returned as it is."""
    version = session.get(ModelVersion, version_id)
    if version is None:
        raise UnknownModelVersion(version_id)
    if version.status is V.RETIRED:
        return version
    if version.status is not V.DRAINING:
        raise VersionNotServable(version_id, str(version.status))
    version = set_version_status(session, version_id, V.RETIRED, now=now)
    record_change(session, actor=actor, action="RETIRED", now=now, version_id=version_id)
    return version


def version_statuses(session: Session) -> dict[str, ModelVersionStatus]:
    return {
        version_id: status
        for version_id, status in session.execute(select(ModelVersion.id, ModelVersion.status))
    }


def list_changes(session: Session, limit: int = 100) -> list[Change]:
    """The recorded changes, newest first."""
    rows = session.scalars(select(ModelChange).order_by(ModelChange.id.desc()).limit(limit))
    return [
        Change(
            at=r.at,
            actor=r.actor,
            action=r.action,
            alias=r.alias,
            version_id=r.model_version_id,
            before=None if r.route_before is None else json.loads(r.route_before),
            after=None if r.route_after is None else json.loads(r.route_after),
        )
        for r in rows
    ]
