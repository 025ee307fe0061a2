"""Alias routes with canary weights: validation and the deterministic per-request draw."""

from __future__ import annotations

from typing import Any, cast

import grpc
import pytest

from frontend.errors import ApiError
from frontend.registry import ModelRegistry, _draw


def registry(*version_ids: str) -> ModelRegistry:
    r = ModelRegistry()
    for v in version_ids:
        r.versions[v] = cast(Any, v)  # resolve() only looks the id up
    return r


def test_draw_is_fixed_by_the_key_and_follows_the_weights() -> None:
    route = {"m@1": 90, "m@2": 10}
    assert all(_draw(route, "tenant/req-7") == _draw(route, "tenant/req-7") for _ in range(5))
    picks = [_draw(route, f"t/{i}") for i in range(2000)]
    share = picks.count("m@2") / len(picks)
    assert 0.07 < share < 0.13  # sha256 spreads keys evenly: about 10%


def test_a_single_target_route_always_resolves_to_it() -> None:
    r = registry("m@1", "m@2")
    r.set_route("m", {"m@2": 5})
    assert r.resolve("m", "any") == "m@2"
    assert r.resolve("m@1") == "m@1"  # an immutable version id names itself
    assert r.aliases == {"m": "m@2"}


@pytest.mark.parametrize(
    ("alias", "weights", "reason"),
    [
        ("m", {}, "INVALID_ROUTE"),
        ("m", {"m@1": 0}, "INVALID_ROUTE"),
        ("m", {"m@9": 1}, "UNKNOWN_MODEL"),
        ("m@1", {"m@1": 1}, "INVALID_ALIAS"),
        ("", {"m@1": 1}, "INVALID_ALIAS"),
    ],
)
def test_bad_routes_are_invalid_argument(alias: str, weights: dict[str, int], reason: str) -> None:
    r = registry("m@1")
    with pytest.raises(ApiError) as e:
        r.set_route(alias, weights)
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
    assert r.routes == {}


def test_unknown_model_is_invalid_argument() -> None:
    with pytest.raises(ApiError) as e:
        registry("m@1").resolve("other")
    assert e.value.reason == "UNKNOWN_MODEL"
