"""The weighted service of prefill work across cache salts, without a scheduler."""

from __future__ import annotations

from engine.fair_share import FairShare


def test_charges_are_divided_by_the_salts_weight() -> None:
    fair = FairShare()
    fair.join("A", [])
    fair.charge("A", 16, weight=1.0)
    fair.join("B", ["A"])  # joins at the start of A's chunk in service: 0
    fair.charge("B", 16, weight=2.0)
    assert (fair.served("A"), fair.served("B")) == (16.0, 8.0)


def test_a_joining_salt_starts_at_the_virtual_time_never_behind_its_own_service() -> None:
    fair = FairShare()
    fair.join("A", [])
    for _ in range(5):
        fair.charge("A", 16, weight=1.0)  # A: 80, its last chunk 16
    fair.join("C", ["A"])
    assert fair.served("C") == 64.0  # no credit for the time C was idle
    fair.charge("C", 100, weight=1.0)  # C: 164, then idle again
    fair.join("C", ["A"])
    assert fair.served("C") == 164.0  # rejoining never moves a salt back
