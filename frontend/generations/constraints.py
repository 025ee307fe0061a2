"""Structured outputs at the frontend: a request's constraint as a guide (contracts/guides.py), and
the guide checked before the request is admitted, so a schema the engine cannot compile is refused
INVALID_ARGUMENT with its reason instead of failing on a worker.

    guide_of()     OutputConstraint -> (guide type, guide); the shape checks (sizes, choices)
    GuideChecker   compiles a guide off the event loop, with a deadline, and remembers the
                   verdict per guide hash in a bounded LRU (a repeated schema costs nothing)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict

from contracts.guides import GUIDE_EBNF, GUIDE_JSON, GUIDE_JSON_SCHEMA, GUIDE_LARK, GUIDE_REGEX, GuideError
from contracts.guides import checked_grammar as compile_guide
from frontend.generations.offload import Offload
from frontend.refusals import InvalidRequest
from llm.v1 import generations_pb2 as pb

MAX_CHOICES = 256
MAX_CHOICE_BYTES = 256
CHECK_DEADLINE_S = 2.0  # a guide not compiled by then is SCHEMA_TOO_COMPLEX (the limits bound the work)
REMEMBERED_GUIDES = 256


def guide_of(constraint: pb.OutputConstraint) -> tuple[str, str]:
    kind = constraint.WhichOneof("kind")
    if kind == "json_schema":
        return GUIDE_JSON_SCHEMA, constraint.json_schema
    if kind == "json_object":
        if not constraint.json_object:
            raise InvalidRequest(
                "INVALID_CONSTRAINT", "json_object must be true when set", field="json_object"
            )
        return GUIDE_JSON, ""
    if kind == "regex":
        return GUIDE_REGEX, constraint.regex
    if kind == "lark_grammar":
        return GUIDE_LARK, constraint.lark_grammar
    if kind == "gbnf_grammar":
        return GUIDE_EBNF, constraint.gbnf_grammar
    if kind == "choice":
        return GUIDE_LARK, choice_grammar(constraint.choice.choices)
    raise InvalidRequest("INVALID_CONSTRAINT", "a constraint needs one of its kinds")


def choice_grammar(choices: list[str] | tuple[str, ...]) -> str:
    """A Lark grammar matching exactly one of the strings."""
    if not 0 < len(choices) <= MAX_CHOICES:
        raise InvalidRequest("INVALID_CONSTRAINT", f"choice needs 1..{MAX_CHOICES} strings", field="choice")
    if not all(0 < len(c.encode()) <= MAX_CHOICE_BYTES for c in choices):
        raise InvalidRequest(
            "INVALID_CONSTRAINT", f"each choice must be 1..{MAX_CHOICE_BYTES} bytes", field="choice"
        )
    return "start: " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices)


class GuideChecker:
    def __init__(self, offload: Offload, deadline_s: float = CHECK_DEADLINE_S) -> None:
        self._offload = offload
        self._deadline_s = deadline_s
        self._verdicts: OrderedDict[str, GuideError | None] = OrderedDict()  # guide hash -> its error

    async def check(self, guide: tuple[str, str]) -> None:
        """InvalidRequest with the guide's reason when the engine could not compile it."""
        key = hashlib.sha256("\0".join(guide).encode()).hexdigest()
        if key not in self._verdicts:
            try:
                await asyncio.wait_for(self._offload.run(_verdict, *guide), self._deadline_s)
                verdict: GuideError | None = None
            except GuideError as e:
                verdict = e
            except TimeoutError:
                verdict = GuideError(
                    "SCHEMA_TOO_COMPLEX", f"the {guide[0]} did not compile in {self._deadline_s} s"
                )
            self._verdicts[key] = verdict
            while len(self._verdicts) > REMEMBERED_GUIDES:
                self._verdicts.popitem(last=False)
        self._verdicts.move_to_end(key)
        error = self._verdicts[key]
        if error is not None:
            raise InvalidRequest(error.kind, f"{guide[0]}: {error}"[:1000], field="constraint")


def _verdict(guide_type: str, guide: str) -> None:
    compile_guide(guide_type, guide)
