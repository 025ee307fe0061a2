"""Tenants as a product: a tenant's own account (its keys, its usage export) and Admin's tenancy
calls (tenants, keys, prices, usage, generations by state), whatever the transport.

messages.py     the store's values <-> the API's messages (account.proto, admin.proto, usage.proto)
tenant_calls.py AccountCalls: the caller's tenant and keys, its usage export (the `usage` scope)
admin_calls.py  TenancyCalls: every tenant and key, prices, the export and the generations by state

Every change commits to the control store, is recorded with who and when, and bumps the catalog
revision; this frontend then reloads its caches at once (a key just created works here at once),
the others within their catalog refresh.
"""
