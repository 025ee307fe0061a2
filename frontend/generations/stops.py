"""Stop strings over streamed text.

Text is held back only while it could still be the start of a stop string, so a stop string is
never delivered, and everything before it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class StopResult:
    emit: str  # text safe to deliver now
    stopped: bool  # a stop string was found; `emit` ends right before it


class StopMatcher:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._pending = ""

    def feed(self, text: str) -> StopResult:
        if not self._stops:
            return StopResult(text, False)
        buf = self._pending + text
        hits = [i for i in (buf.find(s) for s in self._stops) if i >= 0]
        if hits:
            self._pending = ""
            return StopResult(buf[: min(hits)], True)
        keep = self._held_suffix(buf)
        self._pending = buf[len(buf) - keep :] if keep else ""
        return StopResult(buf[: len(buf) - keep], False)

    def flush(self) -> str:
        """The held-back text, at the end of the stream (it was not a stop string after all)."""
        out, self._pending = self._pending, ""
        return out

    def _held_suffix(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some stop string."""
        best = 0
        for s in self._stops:
            for n in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:n]):
                    best = n
                    break
        return best
