"""Sealing works on plain values (generation id, epoch): no control object is needed."""

from __future__ import annotations

import pytest

from billing.models import Watermark
from billing.seal import seal_watermark
from billing.usage import UsageCounts, UsageReport, WatermarkView, read_watermark, record_usage
from datastore.store import Store
from tests.builders import at, running, seed


def test_sealing_freezes_the_billable_watermark_once(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    with store.transaction() as session:
        record_usage(session, [UsageReport(g, 1, 1, 50, 10)], now=at(1))
        sealed = seal_watermark(session, g, 1, now=at(2))
    assert sealed == WatermarkView(g, 1, UsageCounts(50, 10), UsageCounts(50, 10), sealed=True)
    with store.transaction() as session:
        record_usage(session, [UsageReport(g, 1, 2, 50, 14)], now=at(3))
        again = seal_watermark(session, g, 1, now=at(4))
    assert again == WatermarkView(g, 1, UsageCounts(50, 10), UsageCounts(50, 14), sealed=True)
    with store.transaction() as session:
        assert read_watermark(session, g, 1) == again
        watermark = session.get(Watermark, (g, 1))
        assert watermark is not None and watermark.sealed_at == at(2)


def test_an_attempt_without_a_watermark_cannot_be_sealed(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    with pytest.raises(LookupError, match="no watermark"), store.transaction() as session:
        seal_watermark(session, g, 2, now=at(1))
