"""The many-row paths of the int4 linear layer, AMX tiles (engine/csrc/amx_linear.cpp), AVX-512 BF16
dot products (engine/csrc/bf16dot_linear.cpp) and, on AVX2 hosts, fp32 FMAs against dequantized
weights (engine/csrc/fma_linear.cpp), against x @ dequant(W)^T in float64, and their place in
`llm::q4_linear`: many-row steps take one (AMX first), few-row steps keep the integer path. On a CPU
without a path's instructions the path is absent and says so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from engine.quant import dequantize, pack_q4, quantize_int4, unpack_int4
from prebuild.kernels import load_kernels

ops = torch.ops.llm
ISA = load_kernels()  # at collection, for the skip marks (conftest loads the same)
AMX = ISA.endswith("+amx")
FLAGS = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
BF16DOT = "avx512_bf16" in FLAGS and ISA.startswith("avx512-vnni")  # built with -march=native
# bf16 activations and bf16-rounded dequantized weights: about 2-3e-3 of the output's norm
BF16_TOLERANCE = 6e-3
VNNI_TOLERANCE = 1e-4  # int16 activations, exact integer sums
FMA_TOLERANCE = 2e-6  # fp32 activations and weights, fp32 sums


class BF16Path:
    def __init__(self, name: str, usable: bool, tolerance: float = BF16_TOLERANCE) -> None:
        self.name, self.usable, self.tolerance = name, usable, tolerance
        self.matmul: Callable[..., torch.Tensor] = getattr(ops, f"q4_linear_{name}")
        self.min_rows: Callable[[], int] = getattr(ops, f"{name}_min_rows")
        self.set_min_rows: Callable[[int], None] = getattr(ops, f"set_{name}_min_rows")

    def __repr__(self) -> str:
        return self.name


PATHS = [BF16Path("amx", AMX), BF16Path("bf16dot", BF16DOT), BF16Path("fma", ISA == "avx2", FMA_TOLERANCE)]


def usable(path: BF16Path) -> BF16Path:
    if not path.usable:
        pytest.skip(f"this CPU (or this build's -march) has no {path.name} path")
    return path


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref.double()).norm() / ref.double().norm())


def case(n: int, k: int, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    parts = quantize_int4(torch.randn(n, k, generator=gen) * 0.05)
    x = torch.randn(m, k, generator=gen) * 3
    return x, pack_q4(parts), x.double() @ dequantize(parts, "int4").double().T


@pytest.mark.parametrize("path", PATHS, ids=repr)
# 1072 outputs: 67 tiles in 34 pairs, handed out 2 a chunk, so the last pair (one tile) is
# dequantized on AMX while the pair before it multiplies
@pytest.mark.parametrize(
    ("n", "k"), [(96, 64), (40, 96), (16, 32), (80, 32), (3072, 576), (576, 1536), (1072, 64)]
)
@pytest.mark.parametrize("m", [1, 5, 16, 17, 33, 64, 100, 130])
def test_bf16_matmul_is_x_times_the_dequantized_weight(path: BF16Path, n: int, k: int, m: int) -> None:
    usable(path)
    x, packed, ref = case(n, k, m, n + k + m)
    got = path.matmul(x, packed, n)
    assert got.shape == (m, n) and got.dtype == torch.float32
    assert rel_err(got, ref) < path.tolerance
    assert torch.equal(got, path.matmul(x, packed, n))  # deterministic


@pytest.mark.parametrize("path", PATHS[:2], ids=repr)
def test_the_bf16_paths_round_each_weight_once_to_fp32_then_to_bf16(path: BF16Path) -> None:
    """One-hot rows of x read W back: W = code * scale + min rounded once to fp32 (an FMA), then to
    bf16 (nearest even), exactly, for ordinary groups and for those whose minimum is tiny or huge
    beside its scale, which the dequantization's shortcut cannot take (q4_bf16.h)."""
    usable(path)
    n, k = 64, 128
    parts = quantize_int4(torch.randn(n, k, generator=torch.Generator().manual_seed(11)) * 0.05)
    scales, mins = parts["scales"].clone(), parts["mins"].clone()
    mins[0] = scales[0] * 1e-3  # tile 0: a tiny minimum (min - 128 * scale is not exact)
    mins[16] = 0.0  # tile 1: exact
    mins[32] = scales[32] * 2**20  # tile 2: a huge minimum (not exact)
    scales[48] = 0.0  # tile 3: constant groups
    parts["scales"], parts["mins"] = scales.half().float(), mins.half().float()  # what the packing keeps
    got = path.matmul(torch.eye(k), pack_q4(parts), n)  # [k, n]: row i is channel i of every W row
    codes = unpack_int4(parts["qweight"]).double().view(n, k // 32, 32)
    exact = codes * parts["scales"].double()[..., None] + parts["mins"].double()[..., None]
    assert torch.equal(got, exact.view(n, k).float().bfloat16().float().T)


@pytest.mark.parametrize("path", PATHS, ids=repr)
def test_q4_linear_takes_the_bf16_path_from_its_row_threshold(path: BF16Path) -> None:
    usable(path)
    amx_before = ops.amx_min_rows()
    rows = path.min_rows()
    assert rows >= 1
    many, packed, ref_many = case(80, 64, rows, 1)
    few = many[: rows - 1]
    try:
        if path.name != "amx":
            ops.set_amx_min_rows(10**9)  # AMX goes first where it is usable
        assert torch.equal(ops.q4_linear(many, packed, 80), path.matmul(many, packed, 80))
        if few.shape[0]:  # below the threshold: the VNNI path, far closer to float64
            assert rel_err(ops.q4_linear(few, packed, 80), ref_many[: few.shape[0]]) < VNNI_TOLERANCE
        path.set_min_rows(10**9)  # the path turned off: VNNI for every step size
        assert rel_err(ops.q4_linear(many, packed, 80), ref_many) < VNNI_TOLERANCE
    finally:
        path.set_min_rows(rows)
        ops.set_amx_min_rows(amx_before)
    assert path.min_rows() == rows


@pytest.mark.parametrize("path", PATHS, ids=repr)
@pytest.mark.parametrize("m", [40, 64, 100, 130, 1100])
def test_bf16_results_do_not_depend_on_the_pools_threads(path: BF16Path, m: int) -> None:
    """Below 64 rows the AMX path shares out weight tiles between the threads; from 64 to 128, each
    thread takes its share of them against every row, from its own bf16 copy of x; above, blocks of
    rows (at most 512 rows each, a multiple of the threads in number): every way, the same bits as
    on one thread."""
    usable(path)
    x, packed, _ = case(3072, 576, m, 5)
    before = ops.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            ops.set_num_threads(threads)
            results.append(path.matmul(x, packed, 3072))
        assert all(torch.equal(r, results[0]) for r in results[1:])
    finally:
        ops.set_num_threads(before)


@pytest.mark.parametrize("path", PATHS, ids=repr)
def test_bf16_matmul_refuses_what_does_not_match_its_packing(path: BF16Path) -> None:
    usable(path)
    packed = pack_q4(quantize_int4(torch.randn(32, 64)))
    with pytest.raises(RuntimeError, match="does not match"):
        path.matmul(torch.randn(20, 64), packed, 48)
    with pytest.raises(RuntimeError, match="float32"):
        path.matmul(torch.randn(20, 64, dtype=torch.float64), packed, 32)


@pytest.mark.parametrize("path", PATHS, ids=repr)
def test_without_its_instructions_a_path_refuses_and_q4_linear_stays_exact(path: BF16Path) -> None:
    if path.usable:
        pytest.skip(f"this CPU has the {path.name} path: the tests above run it")
    x, packed, ref = case(64, 64, 40, 9)
    with pytest.raises(RuntimeError, match="not usable here"):
        path.matmul(x, packed, 64)
    if not AMX and not BF16DOT:
        assert rel_err(ops.q4_linear(x, packed, 64), ref) < VNNI_TOLERANCE


@pytest.mark.parametrize(
    ("inter", "k", "m"),
    [
        (16, 64, 1),
        (16, 64, 15),
        (48, 64, 16),
        (48, 64, 17),
        (40, 64, 33),
        (48, 96, 64),
        (32, 64, 31),
        (32, 64, 32),
        (32, 96, 33),
        (96, 64, 70),
        (1536, 576, 64),
        (1536, 576, 512),
    ],
)
def test_the_fused_gate_up_is_silu_mul_of_q4_linear_bit_for_bit(inter: int, k: int, m: int) -> None:
    """llm::q4_gate_up_silu makes silu(gate) * up as the accumulators are stored where q4_linear
    takes AMX tiles (from amx_min_rows) or AVX-512 BF16 dot products (from bf16dot_min_rows, an
    intermediate size a multiple of 32), else it is silu_mul(q4_linear(...)): the same bits either
    way, on any host, with either path turned off or both. An intermediate size that is not a whole
    number of tiles (40) always falls back."""
    x, packed, ref = case(2 * inter, k, m, inter + k + m)
    expected = ops.silu_mul(ops.q4_linear(x, packed, 2 * inter))
    got = ops.q4_gate_up_silu(x, packed, 2 * inter)
    assert got.shape == (m, inter) and torch.equal(got, expected)
    gate, up = ref[:, :inter], ref[:, inter:]
    assert rel_err(got, torch.nn.functional.silu(gate) * up) < 2 * BF16_TOLERANCE
    amx_before, bf16_before = ops.amx_min_rows(), ops.bf16dot_min_rows()
    try:
        for turn_off in (ops.set_amx_min_rows, ops.set_bf16dot_min_rows):
            turn_off(10**9)  # AMX off (the BF16 path where the CPU has it), then both off (VNNI)
            assert torch.equal(
                ops.q4_gate_up_silu(x, packed, 2 * inter), ops.silu_mul(ops.q4_linear(x, packed, 2 * inter))
            )
    finally:
        ops.set_amx_min_rows(amx_before)
        ops.set_bf16dot_min_rows(bf16_before)


def test_the_fused_gate_up_refuses_what_does_not_match_its_packing() -> None:
    packed = pack_q4(quantize_int4(torch.randn(64, 64)))
    with pytest.raises(RuntimeError, match="does not match"):
        ops.q4_gate_up_silu(torch.randn(40, 64), packed, 96)
