"""The control store's domain: generation identity, attempts with epochs and leases, cancel intent,
model versions, alias routes, tenants and workers. It imports no billing; the lifecycle layer composes
the two (see lifecycle/).

    generations    insert_generation / existing_generation (create_or_get_generation), get_generation,
                   find_by_request_id, lock_generation
    states         GenerationState, the one allowed-transition table, moved (what a move sets)
    generation_rows  the two moves every generation makes, on its locked row (statements built once)
    attempts       start_attempt -> StartedAttempt, renew_lease, fence, end_attempt (attempt_sql.py)
    termination    finish_attempt, interrupt_attempt, finish_queued (each ends its attempt)
    cancel         request_cancel
    sweeper        expired_attempts, interrupt_expired
    tenants, model_versions, workers, revision: the catalog (and its revision counter), the registry
Operations take a Session; the caller owns the transaction. The engine, Base and migrations are the
store kernel's (datastore/).
"""
