"""The generation lifecycle's use cases: the one layer whose transactions span control and billing.

    admission    admit: create-or-get, reserve the tenant budget, start the first attempt
    attempts     start_attempt (a new epoch; the superseded attempt's bill sealed), renew_lease
    termination  finish, interrupt, finish_queued, sweep_expired_leases: control ends the attempt
                 and the generation, billing seals the bill and releases the reservation
    cancel       request_cancel: the tenant's intent, persisted first
    reads        get_generation(_by_request) with its billed usage; usage_by_tenant over a window
    sealing      the billing side of an attempt's end, shared by the above (session-level)

Each use case takes the `Store` and plain values (ids, counts, `now`), runs in one transaction, and
raises control's and billing's typed errors; it returns values, never ORM objects. No gRPC here.
Usage reports need no control data: they go straight to `billing.aggregator`.
"""
