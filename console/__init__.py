"""The web console: a client of the public HTTP API that runs in the browser, served as files at
/console on the frontend's HTTP listener (serving mounts it; the API knows nothing of it).

static/       the page and its ES modules, served as they are (no build step, no CDN): the tenant's
              pages (keys, usage and spend, models, a streaming playground) and the operator's
              (tenants, workers, models and routes, live generations)
serve.py      the Starlette routes that serve them, with a strict Content-Security-Policy

Why its own package: it is another runtime (a browser) and a client like llmctl, calling only what
any client may call (/v1/..., with the same keys, errors and calls as every API client), so it
imports nothing of the platform; the frontend does not import it either.
"""
