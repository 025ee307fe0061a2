"""The contracts module: a leaf (no project import, no torch), the tier as the proto encodes it,
one blocks formula, refusal messages that parse back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contracts import worker as wire
from contracts.capacity import blocks_for
from contracts.tier import BATCH, INTERACTIVE, Tier
from llm.v1 import generations_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]


def test_the_tier_has_the_protos_values_and_interactive_sorts_first() -> None:
    assert {t.name: t.value for t in Tier} == {n: v for n, v in pb.Tier.items() if v != pb.TIER_UNSPECIFIED}
    assert (INTERACTIVE, BATCH) == (Tier.INTERACTIVE, Tier.BATCH) == (pb.INTERACTIVE, pb.BATCH)
    assert sorted([BATCH, INTERACTIVE]) == [INTERACTIVE, BATCH]


def test_blocks_for_rounds_up() -> None:
    assert [blocks_for(n, 16) for n in (1, 16, 17, 32, 33)] == [1, 1, 2, 2, 3]


@pytest.mark.parametrize("reason", list(wire.Refusal))
def test_a_refusal_message_parses_back_to_its_reason(reason: wire.Refusal) -> None:
    assert wire.parse_refusal(wire.refusal_message(reason, "needs 9 blocks")) == (reason, "needs 9 blocks")
    assert wire.parse_refusal(wire.refusal_message(reason)) == (reason, "")


def test_another_workers_error_has_no_reason() -> None:
    assert wire.parse_refusal("capacityless: x") == (None, "capacityless: x")
    assert wire.parse_refusal("out of memory") == (None, "out of memory")


def test_the_tensor_groups_do_not_overlap() -> None:
    inputs, outputs = wire.TRTLLM_INPUTS + wire.EXTENSION_INPUTS, wire.TRTLLM_OUTPUTS + wire.EXTENSION_OUTPUTS
    assert len(set(inputs)) == len(inputs) and len(set(outputs)) == len(outputs)


def test_contracts_and_the_scheduler_import_no_torch_and_contracts_nothing_of_the_project() -> None:
    code = (
        "import sys\n"
        "import contracts.capacity, contracts.sampling, contracts.tier, contracts.worker\n"
        "project = {'engine', 'frontend', 'serving', 'control', 'billing', 'prebuild', 'llm'}\n"
        "assert not project & {m.split('.')[0] for m in sys.modules}, sorted(sys.modules)\n"
        "import engine.scheduler\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
