"""docs/configuration.md is generated from config/settings.py, and says what the loader accepts."""

from __future__ import annotations

import dataclasses
import re
import tomllib
import typing

from config import reference
from config.loader import parse_config
from config.settings import PlatformConfig, TenantSpec


def test_the_reference_is_current() -> None:
    """Run `python -m config.reference` after changing a setting; this fails until then."""
    assert reference.DOC.read_text() == reference.render()


def test_every_key_is_described() -> None:
    hints = typing.get_type_hints(PlatformConfig)
    for section in dataclasses.fields(PlatformConfig):
        args = typing.get_args(hints[section.name])  # tuple[X, ...] for an array of tables
        cls = args[0] if args else hints[section.name]
        comments = reference.comments_by_field(cls)
        for field in dataclasses.fields(cls):
            intro, own = comments.get(field.name, ("", ""))
            assert intro or own, f"[{section.name}] {field.name} has no comment in config/settings.py"


def test_the_reference_read_as_a_config_file_is_the_defaults() -> None:
    """Every key and default the reference shows, written back as TOML, loads into exactly the
    defaults: the page names no key the loader refuses, and no default the code does not have."""
    toml: list[str] = []
    for line in reference.render().splitlines():
        if line.startswith("## `"):
            toml.append(line[4:-1])
        elif m := re.match(r"^- `(\w+)` = `([^`]*)`", line):
            value = re.sub(r" \(\d+ [MG]iB\)$", "", m.group(2))
            toml.append(f"{m.group(1)} = {value}")
        elif re.match(r"^- `id` = \(required\)", line):
            toml.append('id = "t"')
    cfg = parse_config(tomllib.loads("\n".join(toml)))
    assert cfg == dataclasses.replace(PlatformConfig(), tenants=(TenantSpec(id="t"),))
