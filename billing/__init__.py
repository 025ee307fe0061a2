"""Usage accounting: durable cumulative watermarks, sealing, reservations and tenant budgets.

    usage          UsageReport, record_usage, read_watermark(s): idempotent monotonic watermarks
    aggregator     UsageAggregator: report() / await flush_final() for the frontend
    seal           seal_attempt (called by control.termination and control.attempts)
    ledger         reserve / release_reservation, tenant_load, rate_usage
    tenant_usage   usage_by_tenant, generation_usage
The tables (billing.models) sit on the store kernel's Base and migrations (datastore/).
"""
