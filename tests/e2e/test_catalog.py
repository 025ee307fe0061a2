"""At start-up the platform migrates the control store and seeds it with its config: tenants, READY
model versions and alias routes; seeding again changes nothing (not even the catalog revision)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select

from control.directory import tenant_for_api_key
from control.model_versions import alias_routes, route_origin
from control.models import ApiKey, ModelVersion, ModelVersionStatus, RouteOrigin, Tenant
from control.revision import current_revision
from frontend.catalog.cache import seed_catalog
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, KEY_BETA


def test_catalog_is_seeded_and_idempotent(platform: Platform) -> None:
    assert platform.store is not None
    version = platform.registry.resolve("smollm2-135m")
    with platform.store.transaction() as s:
        before = current_revision(s)
    routes = [("smollm2-135m", version)]
    seed_catalog(platform.store, platform.cfg.tenants, routes, now=datetime.now(UTC))  # a restart
    with platform.store.transaction() as s:
        assert current_revision(s) == before
        tenants = ["alpha", "beta", "delta", "fuzz", "gamma", "sdk", "sdk-solo"]
        assert sorted(s.scalars(select(Tenant.id))) == tenants
        assert s.scalar(select(func.count()).select_from(ApiKey)) == len(tenants)  # one key each
        alpha, beta = tenant_for_api_key(s, KEY_ALPHA), tenant_for_api_key(s, KEY_BETA)
        assert alpha is not None and alpha.id == "alpha"
        assert beta is not None and beta.weight == 2.0
        row = s.get(ModelVersion, version.version_id)
        assert row is not None and row.status is ModelVersionStatus.READY
        assert row.weights_sha256 == version.manifest.files["model.safetensors"]
        assert alias_routes(s, "smollm2-135m") == {version.version_id: 100.0}  # all of the traffic
        assert route_origin(s, "smollm2-135m") is RouteOrigin.CONFIG
    assert platform.registry.routes == {"smollm2-135m": {version.version_id: 100.0}}
