"""The control store: generation identity, attempts with epochs and leases, model versions, workers.

    generations    create_or_get_generation, get_generation, find_by_request_id
    states         GenerationState and the one allowed-transition table
    attempts       start_attempt -> Lease, renew_lease, fence
    termination    finish_attempt, interrupt_attempt, finish_queued (each seals billing)
    cancel         request_cancel
    sweeper        sweep_expired_leases
    tenants, model_versions, workers: configuration and the registry
Operations take a Session; the caller owns the transaction (`with store.transaction() as s:`). The
engine, Base and migrations are the store kernel's (datastore/).
"""
