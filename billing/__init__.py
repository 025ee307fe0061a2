"""Usage accounting: durable cumulative watermarks, sealing, reservations and tenant budgets.

    usage       UsageReport, open_watermark, record_usage, read_watermark(s): idempotent watermarks
    aggregator  UsageAggregator: report() / await flush_final() for the frontend
    seal        seal_watermark: freezes an attempt's bill
    ledger      Charge, TenantLimits, reserve / release_reservation, tenant_load, rate_usage
    ledger_sql  the ledger's per-generation statements, built once with bind parameters
    totals      generation_usage (what a generation was billed), total (the SQL sum)
A peer of `control`: it imports none of it and works on plain values (generation id, epoch, tenant
id, token counts, limits). Its tables (billing.models) sit on the store kernel's Base and migrations
and reference control's tables by name; the lifecycle layer composes the two.
"""
