"""The load generator: what is sent, when, and what the clients saw. Pure but for prompts.py's
tokenizer and the driver's clock.

workload.py   Mix (named request mixes), RequestSpec, Load (Poisson rate or closed-loop clients),
              rounds; built deterministically from a seed
prompts.py    seeded pseudo-English cut to an exact token count with the model's tokenizer
driver.py     Job, Target, TargetError; drive: a workload against one target, open or closed loop
metrics.py    Outcome (one request as its client saw it); TTFT, ITL, TPOT, goodput, percentiles
schemas.py    JSON schemas applications send, for structured outputs
"""
