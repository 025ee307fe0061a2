"""Immutable model versions, their status lifecycle, and alias routes (weighted, for canaries).

    REGISTERED ──> READY ──> DRAINING ──> RETIRED
        └──────────────────────────────────^   (and READY <── DRAINING: a drain can be undone)

A version id ("name@version") is immutable: registering it again with the same content is a no-op,
with other content `ModelVersionConflict`. An alias resolves to one READY version per admission,
picked by route weight from a caller-supplied uniform draw (randomness is injected). Every write
bumps the catalog revision (control/revision.py) so frontends reload their caches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, bindparam, delete, select
from sqlalchemy.orm import Session

from control.errors import (
    InvalidAlias,
    InvalidRoute,
    ModelVersionConflict,
    UnknownModelVersion,
    VersionNotServable,
)
from control.models import AliasRoute, ModelVersion, ModelVersionStatus, RouteOrigin
from control.revision import bump_revision

V = ModelVersionStatus
VERSION_TRANSITIONS: dict[ModelVersionStatus, frozenset[ModelVersionStatus]] = {
    V.REGISTERED: frozenset({V.READY, V.RETIRED}),
    V.READY: frozenset({V.DRAINING}),
    V.DRAINING: frozenset({V.READY, V.RETIRED}),
    V.RETIRED: frozenset(),
}


@dataclass(slots=True, frozen=True)
class VersionSpec:
    name: str
    version: str
    weights_sha256: str
    tokenizer_sha256: str
    template_sha256: str
    compatibility_key: str
    artifact_uri: str  # where workers load it from (a path or URL)
    adapter: str | None = None  # adapter id@sha256; None for base weights

    @property
    def version_id(self) -> str:
        return f"{self.name}@{self.version}"

    def same_content(self, v: ModelVersion) -> bool:
        return (
            self.weights_sha256,
            self.tokenizer_sha256,
            self.template_sha256,
            self.compatibility_key,
            self.adapter,
        ) == (v.weights_sha256, v.tokenizer_sha256, v.template_sha256, v.compatibility_key, v.adapter)


def register_version(session: Session, spec: VersionSpec, *, now: datetime) -> ModelVersion:
    existing = session.get(ModelVersion, spec.version_id)
    if existing is not None:
        if not spec.same_content(existing):
            raise ModelVersionConflict(spec.version_id)
        return existing
    version = ModelVersion(
        id=spec.version_id,
        name=spec.name,
        version=spec.version,
        weights_sha256=spec.weights_sha256,
        tokenizer_sha256=spec.tokenizer_sha256,
        template_sha256=spec.template_sha256,
        adapter=spec.adapter,
        compatibility_key=spec.compatibility_key,
        artifact_uri=spec.artifact_uri,
        status=ModelVersionStatus.REGISTERED,
        created_at=now,
        updated_at=now,
    )
    session.add(version)
    session.flush()
    bump_revision(session, now=now)
    return version


def set_version_status(
    session: Session, version_id: str, status: ModelVersionStatus, *, now: datetime
) -> ModelVersion:
    """Moves a version along `VERSION_TRANSITIONS`; ValueError for a move the table lacks."""
    version = session.get(ModelVersion, version_id, with_for_update=True, populate_existing=True)
    if version is None:
        raise UnknownModelVersion(version_id)
    if status is not version.status:
        if status not in VERSION_TRANSITIONS[version.status]:
            raise ValueError(f"model version {version_id}: {version.status} -> {status} is not allowed")
        version.status = status
        version.updated_at = now
        bump_revision(session, now=now)
    return version


def check_route(alias: str, weights: Mapping[str, float]) -> None:
    """`InvalidAlias` / `InvalidRoute` unless `alias` has no '@' and every weight is positive."""
    if not alias or "@" in alias or len(alias) > 128:
        raise InvalidAlias(alias[:128])
    if not weights or any(w <= 0 for w in weights.values()):
        raise InvalidRoute(alias)


def pick_target(route: Mapping[str, float], draw: float) -> str:
    """The route leg holding `draw` (uniform in [0, 1)): each leg takes weight / total of [0, 1),
    legs in version-id order. The one weighted draw of the platform (admission pins with it)."""
    if not 0.0 <= draw < 1.0:
        raise ValueError("draw must be in [0, 1)")
    legs = sorted(route.items())
    point = draw * sum(weight for _, weight in legs)
    for version_id, weight in legs:
        if point < weight:
            return version_id
        point -= weight
    return legs[-1][0]


def set_alias_route(
    session: Session,
    alias: str,
    weights: Mapping[str, float],
    *,
    now: datetime,
    origin: RouteOrigin = RouteOrigin.ADMIN,
) -> None:
    """Replaces the alias' route with `weights` (version id -> relative share > 0), written by
    `origin`. `InvalidAlias`, `InvalidRoute`, `UnknownModelVersion` for a version not registered,
    `VersionNotServable` for one retiring or retired."""
    check_route(alias, weights)
    rows = session.execute(select(ModelVersion.id, ModelVersion.status).where(ModelVersion.id.in_(weights)))
    known = {version_id: status for version_id, status in rows}
    missing = sorted(set(weights) - set(known))
    if missing:
        raise UnknownModelVersion(missing[0])
    for version_id, status in sorted(known.items()):
        if status in (ModelVersionStatus.DRAINING, ModelVersionStatus.RETIRED):
            raise VersionNotServable(version_id, str(status))
    session.execute(delete(AliasRoute).where(AliasRoute.alias == alias))
    session.add_all(
        AliasRoute(alias=alias, model_version_id=v, weight=w, origin=origin)
        for v, w in sorted(weights.items())
    )
    session.flush()
    bump_revision(session, now=now)


def alias_routes(session: Session, alias: str) -> dict[str, float]:
    rows = session.execute(
        select(AliasRoute.model_version_id, AliasRoute.weight).where(AliasRoute.alias == alias)
    )
    return {version_id: weight for version_id, weight in rows}


def all_routes(session: Session) -> dict[str, dict[str, float]]:
    """alias -> {version id: weight}, every alias."""
    routes: dict[str, dict[str, float]] = {}
    for alias, version_id, weight in session.execute(
        select(AliasRoute.alias, AliasRoute.model_version_id, AliasRoute.weight)
    ):
        routes.setdefault(alias, {})[version_id] = weight
    return routes


def route_origin(session: Session, alias: str) -> RouteOrigin | None:
    """Who wrote the alias' route; None when it has none."""
    origin = session.scalars(select(AliasRoute.origin).where(AliasRoute.alias == alias)).first()
    return None if origin is None else RouteOrigin(origin)


def require_servable(session: Session, version_id: str) -> None:
    """`VersionNotServable` when the version is retiring or retired: no new generation pins it.

    The row is read FOR SHARE (PostgreSQL; SQLite serializes writers anyway), so a retirement
    that begins meanwhile waits for this transaction: once a version is DRAINING, every generation
    pinned to it is already recorded, and a count of them (control/rollout.py
    `active_generations`) that reaches zero stays there. A version the store does not hold passes
    (the caller's registry decided it).
    """
    status = session.connection().execute(_STATUS_FOR_SHARE, {"version": version_id}).scalar_one_or_none()
    if status in (ModelVersionStatus.DRAINING, ModelVersionStatus.RETIRED):
        raise VersionNotServable(version_id, str(status))


# built once: every admission runs it
_STATUS_FOR_SHARE = (
    select(ModelVersion.status)
    .where(ModelVersion.id == bindparam("version", type_=String()))
    .with_for_update(read=True)
)


def versions_with_status(session: Session, *statuses: ModelVersionStatus) -> list[ModelVersion]:
    return list(session.scalars(select(ModelVersion).where(ModelVersion.status.in_(statuses))))


def resolve_model(session: Session, model: str, *, draw: float) -> ModelVersion:
    """An alias or "name@version" -> one READY version, the route leg picked by `pick_target`.
    `UnknownModelVersion` if nothing READY matches."""
    if not 0.0 <= draw < 1.0:
        raise ValueError("draw must be in [0, 1)")
    if "@" in model:
        version = session.get(ModelVersion, model)
        if version is None or version.status is not ModelVersionStatus.READY:
            raise UnknownModelVersion(model)
        return version
    legs = session.execute(
        select(ModelVersion, AliasRoute.weight)
        .join(AliasRoute, AliasRoute.model_version_id == ModelVersion.id)
        .where(AliasRoute.alias == model, ModelVersion.status == ModelVersionStatus.READY)
    ).all()
    if not legs:
        raise UnknownModelVersion(model)
    by_id = {version.id: version for version, _ in legs}
    return by_id[pick_target({version.id: weight for version, weight in legs}, draw)]
