"""Expecting a refusal: what the block raises, as a client would see it through the error table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from frontend.api_errors import ApiError, api_error


class Refused:
    value: ApiError  # the status, reason and details a client gets (frontend/api_errors.py)


@contextmanager
def refused(match: str | None = None) -> Iterator[Refused]:
    """The block must raise; `.value` is the ApiError the error table makes of it (an error the
    table does not know becomes INTERNAL, which the caller's assertions then catch). `match`: a
    pattern the error's text must contain."""
    holder = Refused()
    with pytest.raises(Exception) as raised:
        yield holder
    holder.value = api_error(raised.value)
    if match is not None:
        assert re.search(match, str(holder.value)), f"{holder.value} does not match {match!r}"
