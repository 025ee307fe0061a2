"""The platform's configuration, below every role that reads it (frontend, serving, bench, llmctl).

    settings.py   every section and key with its default and unit, and the default config
    loader.py     a TOML file into those sections, every value checked (ConfigError names the key)
    reference.py  docs/configuration.md, generated from settings.py (`python -m config.reference`)

A component takes its section (`cfg.frontend`, `cfg.store`, ...), never a copy of its fields under
other names: one name per knob.
"""
