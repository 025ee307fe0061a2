"""The registry, a cache of the store's routes: the deterministic per-request draw, and resolving
only to versions this frontend has loaded (route validation is control's: tests/control)."""

from __future__ import annotations

from typing import Any, cast

from control.model_versions import pick_target
from frontend.catalog.registry import ModelRegistry, _draw
from tests.refusals import refused


def registry(*version_ids: str) -> ModelRegistry:
    r = ModelRegistry()
    for v in version_ids:
        r.versions[v] = cast(Any, v)  # resolve() only looks the id up
    return r


def test_draw_is_fixed_by_the_key_and_follows_the_weights() -> None:
    route = {"m@1": 90.0, "m@2": 10.0}
    assert all(_draw("tenant/req-7") == _draw("tenant/req-7") for _ in range(5))
    picks = [pick_target(route, _draw(f"t/{i}")) for i in range(2000)]
    share = picks.count("m@2") / len(picks)
    assert 0.07 < share < 0.13  # sha256 spreads keys evenly: about 10%


def test_a_single_target_route_always_resolves_to_it() -> None:
    r = registry("m@1", "m@2")
    r.routes["m"] = {"m@2": 5.0}
    assert r.resolve("m", "any") == "m@2"
    assert r.resolve("m@1") == "m@1"  # an immutable version id names itself
    assert r.aliases == {"m": "m@2"}


def test_a_route_resolves_only_to_versions_loaded_here() -> None:
    r = registry("m@1")
    r.routes["m"] = {"m@1": 1.0, "m@2": 1000.0}  # m@2 is in the store but not loaded here
    assert {r.resolve("m", f"key-{i}") for i in range(20)} == {"m@1"}
    r.routes["other"] = {"m@2": 1.0}
    with refused() as e:
        r.resolve("other")
    assert e.value.reason == "UNKNOWN_MODEL"


def test_unknown_model_is_invalid_argument() -> None:
    with refused() as e:
        registry("m@1").resolve("other")
    assert e.value.reason == "UNKNOWN_MODEL"
