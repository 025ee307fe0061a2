"""The engine's CPU kernels (engine/csrc, loaded by tests/conftest.py) against their PyTorch
definitions: the quantized matmuls against x @ dequant(W)^T in float64, the fused norms, rotary with
the KV write, and paged decode attention against SDPA over the gathered context."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from engine import kernels
from engine.model import apply_rotary
from engine.quant import QuantizedLinear, dequantize, pack_q4, pack_q8, quantize_int4, quantize_int8

ops = torch.ops.llm


MARCH_ISA = {"x86-64-v2": "scalar", "x86-64-v3": "avx2"}  # what a build for another -march runs


def native_isa() -> str:
    """The vector path engine/csrc/common.h picks for this CPU's flags."""
    flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    if {"avx512f", "avx512bw", "avx512_vnni"} <= flags:  # the bf16 paths as well where they exist
        if {"amx_tile", "amx_bf16", "avx512_bf16"} <= flags:
            return "avx512-vnni+amx"
        return "avx512-vnni+bf16" if "avx512_bf16" in flags else "avx512-vnni"
    return "avx2" if {"avx2", "fma", "f16c"} <= flags else "scalar"


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref.double()).norm() / ref.double().norm())


def test_the_library_is_loaded_with_the_code_path_asked_for() -> None:
    assert kernels.loaded()
    march = os.environ.get("LLM_KERNELS_MARCH", "native")  # tests/prebuild/test_kernels.py
    assert kernels.isa() == (native_isa() if march == "native" else MARCH_ISA[march])


def quantized(scheme: str, w: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """`scheme`'s parts of w and the tiles its kernel reads."""
    if scheme == "int4":
        parts = quantize_int4(w)
        return parts, pack_q4(parts)
    parts = quantize_int8(w)
    return parts, pack_q8(parts)


def matmul(scheme: str, x: torch.Tensor, packed: torch.Tensor, n: int) -> torch.Tensor:
    op = ops.q4_linear if scheme == "int4" else ops.q8_linear
    return op(x, packed, n)


@pytest.mark.parametrize("scheme", ["int4", "int8"])
@pytest.mark.parametrize(("n", "k"), [(96, 64), (40, 96), (16, 32)])
@pytest.mark.parametrize("m", [1, 3, 4, 9])
def test_quantized_matmul_is_x_times_the_dequantized_weight(scheme: str, n: int, k: int, m: int) -> None:
    gen = torch.Generator().manual_seed(n * 1000 + k + m)
    w = torch.randn(n, k, generator=gen) * 0.05
    x = torch.randn(m, k, generator=gen) * 3
    parts, packed = quantized(scheme, w)
    ref = x.double() @ dequantize(parts, scheme).double().T
    got = matmul(scheme, x, packed, n)
    assert got.shape == (m, n) and got.dtype == torch.float32
    # int16 activations per 32 channels: about 2e-5; bf16 activations would be about 2e-3
    assert rel_err(got, ref) < 1e-4


@pytest.mark.parametrize("scheme", ["int4", "int8"])
def test_quantized_matmul_of_zero_rows_and_zero_groups(scheme: str) -> None:
    w = torch.randn(32, 64) * 0.1
    x = torch.zeros(2, 64)
    x[1, 32:] = torch.linspace(-1, 1, 32)  # row 0 all zero; row 1's first group all zero
    parts, packed = quantized(scheme, w)
    got = matmul(scheme, x, packed, 32)
    ref = x.double() @ dequantize(parts, scheme).double().T
    assert torch.equal(got[0], torch.zeros(32))
    assert rel_err(got[1], ref[1]) < 1e-4


@pytest.mark.parametrize("scheme", ["int4", "int8"])
def test_quantized_matmul_refuses_what_does_not_match_its_packing(scheme: str) -> None:
    _, packed = quantized(scheme, torch.randn(32, 64))
    with pytest.raises(RuntimeError, match="multiple of 32"):
        matmul(scheme, torch.randn(1, 48), packed, 32)
    with pytest.raises(RuntimeError, match="does not match"):
        matmul(scheme, torch.randn(1, 64), packed, 48)
    with pytest.raises(RuntimeError, match="does not match"):  # a group's bytes short: an older layout
        matmul(scheme, torch.randn(1, 64), packed[:, :, :-64].contiguous(), 32)
    with pytest.raises(RuntimeError, match="float32"):
        matmul(scheme, torch.randn(1, 64, dtype=torch.float64), packed, 32)


@pytest.mark.parametrize("scheme", ["int4", "int8"])
def test_quantized_linear_with_and_without_the_kernels_agree(scheme: str) -> None:
    w = torch.randn(64, 96) * 0.05
    parts = quantize_int4(w) if scheme == "int4" else quantize_int8(w)
    fast = QuantizedLinear(parts, scheme, torch.float32, max_kernel_rows=4, use_kernels=True)
    eager = QuantizedLinear(parts, scheme, torch.float32, max_kernel_rows=4, use_kernels=False)
    assert fast.packed is not None and eager.packed is None and fast.in_features == eager.in_features == 96
    for rows in (1, 16):  # eager: its bf16 kernel (int4 only), then its dense copy
        x = torch.randn(rows, 96)
        assert rel_err(fast(x), eager(x)) < 1e-2


def test_rms_norm_and_the_residual_add_fused_into_it() -> None:
    x, r, w = torch.randn(5, 576), torch.randn(5, 576), torch.rand(576) + 0.5
    torch.testing.assert_close(ops.rms_norm(x, w, 1e-5), F.rms_norm(x, (576,), w, eps=1e-5))
    stream = x.clone()
    normed = ops.add_rms_norm(stream, r, w, 1e-5)
    torch.testing.assert_close(stream, x + r)  # the residual stream, updated in place
    torch.testing.assert_close(normed, F.rms_norm(x + r, (576,), w, eps=1e-5))


def test_silu_mul_of_the_gate_and_up_halves() -> None:
    gu = torch.randn(3, 2 * 1544) * 4  # not a multiple of 16: the vector loop's tail
    gu[0, :8] = torch.tensor([-100.0, -88.0, -30.0, 0.0, 30.0, 88.0, 100.0, 1e-3])
    gate, up = gu.chunk(2, dim=-1)
    torch.testing.assert_close(ops.silu_mul(gu), F.silu(gate) * up, rtol=2e-6, atol=1e-6)


def assert_attention(
    out: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, vals: torch.Tensor, dtype: torch.dtype
) -> None:
    """One row's attention `out` against q [Hq, D], keys and vals [Hkv, n, D] (the cache's values,
    as fp32): SDPA's, or where the kernels run a bf16 cache on AVX-512 BF16 dot products
    (engine/csrc/attention_bf16.h: head dim 64, groups of up to 4 heads) the same with the scaled
    queries and the softmax weights each as two bf16 parts, as there. A weight the two softmaxes
    split at neighbouring bf16 values still sums to within about 2^-16 of itself, so that path is
    held to 1e-4; a wrong pairing or order of positions or dims, or a weight's low part left out
    (up to 2^-9 of it), is off by more."""
    hq, d = q.shape
    group = hq // keys.shape[0]
    if not (dtype == torch.bfloat16 and ops.attention_bf16_dots() and d == 64 and group <= 4):
        ref = F.scaled_dot_product_attention(q[None, :, None], keys[None], vals[None], enable_gqa=True)
        torch.testing.assert_close(out, ref[0, :, 0], rtol=1e-5, atol=1e-5)
        return
    k, v = keys.repeat_interleave(group, 0), vals.repeat_interleave(group, 0)
    scaled = q * d**-0.5
    high = scaled.bfloat16().float()
    split = high + (scaled - high).bfloat16().float()  # the query as the kernel's two bf16 parts
    weights = torch.softmax(torch.einsum("hd,hnd->hn", split, k), dim=-1)
    w_high = weights.bfloat16().float()
    ref = torch.einsum("hn,hnd->hd", w_high + (weights - w_high).bfloat16().float(), v)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)


def cache_pair(blocks: int, bs: int, hkv: int, d: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(blocks, bs, hkv, d, dtype=dtype) for _ in "kv")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_store_rotates_q_and_k_and_writes_k_and_v_into_their_slots(dtype: torch.dtype) -> None:
    t, hq, hkv, d = 4, 6, 2, 64
    qkv = torch.randn(t, (hq + 2 * hkv) * d)
    freqs = torch.arange(t).float()[:, None] * (1.0 / 10000 ** (torch.arange(0, d, 2).float() / d))[None]
    cos = torch.cat((freqs.cos(), freqs.cos()), dim=-1)
    sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1)
    kc, vc = cache_pair(3, 4, hkv, d, dtype)
    slots = torch.tensor([5, 0, 11, 6])
    q = ops.rope_store(qkv, cos, sin, kc, vc, slots, hq, hkv)
    heads = qkv.view(t, hq + 2 * hkv, d)
    torch.testing.assert_close(q, apply_rotary(heads[:, :hq], cos, sin))
    k_ref, v_ref = apply_rotary(heads[:, hq : hq + hkv], cos, sin), heads[:, hq + hkv :]
    torch.testing.assert_close(kc.view(-1, hkv, d)[slots], k_ref.to(dtype))
    torch.testing.assert_close(vc.view(-1, hkv, d)[slots], v_ref.to(dtype))
    untouched = torch.ones(12, dtype=torch.bool)
    untouched[slots] = False
    assert not kc.view(-1, hkv, d)[untouched].any() and not vc.view(-1, hkv, d)[untouched].any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("hq", "hkv", "d"),
    [(9, 3, 64), (4, 4, 64), (8, 2, 64), (10, 2, 32)],  # the register path (D 64, groups of 1-4); another
)
@pytest.mark.parametrize("batch", [3, 5])  # pool chunks of one kv head; of a sequence's heads (from 4)
def test_paged_decode_attention_reads_each_context_through_its_block_table(
    dtype: torch.dtype, hq: int, hkv: int, d: int, batch: int
) -> None:
    bs = 4
    kc = torch.randn(16, bs, hkv, d).to(dtype)
    vc = torch.randn(16, bs, hkv, d).to(dtype)
    # padded with block 0
    tables = torch.tensor([[7, 2, 9, 0], [3, 0, 0, 0], [15, 14, 1, 4], [5, 6, 0, 0], [8, 10, 11, 12]])[:batch]
    lens = torch.tensor([10, 1, 16, 7, 13])[:batch]
    q = torch.randn(batch, hq, d)
    out = ops.paged_decode_attention(q, kc, vc, tables, lens)
    for b in range(batch):
        n = int(lens[b])
        keys = kc[tables[b]].reshape(-1, hkv, d)[:n].float().transpose(0, 1)  # [Hkv, n, D]
        vals = vc[tables[b]].reshape(-1, hkv, d)[:n].float().transpose(0, 1)
        assert_attention(out[b], q[b], keys, vals, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("hq", "hkv"), [(3, 3), (4, 2), (9, 3), (8, 2), (5, 1)])  # groups of 1-5 heads
@pytest.mark.parametrize(("start", "n"), [(0, 21), (37, 8), (100, 3), (0, 1)])
def test_a_prompt_chunks_rows_see_its_context_causally(
    dtype: torch.dtype, hq: int, hkv: int, start: int, n: int
) -> None:
    """A prefill chunk's tokens are consecutive rows with the same block table, token i seeing
    positions 0 .. start + i, beside a
    decoding row; each row equals SDPA over exactly the keys it sees."""
    gen = torch.Generator().manual_seed(start + n + hq)
    bs = 16
    kc, vc = (torch.randn(20, bs, hkv, 64, generator=gen).to(dtype) for _ in "kv")
    chunk = torch.randperm(20, generator=gen)[:9]  # its blocks, in no order
    other = torch.tensor([3, 11, 0, 0, 0, 0, 0, 0, 0])
    tables = torch.stack([other, *[chunk] * n, other])  # a decode row on each side
    lens = torch.tensor([25, *range(start + 1, start + n + 1), 30])
    q = torch.randn(n + 2, hq, 64, generator=gen)
    out = ops.paged_decode_attention(q, kc, vc, tables, lens)
    for r in range(n + 2):
        seen = int(lens[r])
        keys = kc[tables[r]].reshape(-1, hkv, 64)[:seen].float().transpose(0, 1)
        vals = vc[tables[r]].reshape(-1, hkv, 64)[:seen].float().transpose(0, 1)
        assert_attention(out[r], q[r], keys, vals, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("hq", "hkv"), [(3, 3), (4, 2), (9, 3), (8, 2), (5, 1)])
def test_rows_reading_the_same_blocks_get_the_bits_each_row_gets_alone(
    dtype: torch.dtype, hq: int, hkv: int
) -> None:
    """Rows that read the same blocks have their scores made together (engine/csrc/attention_rows.h):
    each must be bit for bit what it gets in a call of its own, however the rows fall into units: a
    run longer than one unit, contexts that are no multiple of the vector width, rows sharing the
    table out of order, a row of another table between them."""
    gen = torch.Generator().manual_seed(hq * 10 + hkv)
    bs = 16
    kc, vc = (torch.randn(40, bs, hkv, 64, generator=gen).to(dtype) for _ in "kv")
    chunk = torch.randperm(40, generator=gen)[:12]  # 192 positions, its blocks in no order
    other = torch.tensor([3, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    lens = torch.tensor([*range(60, 130), 5, 191, 17, 17, 3, 40, 9, 150, 151, 152, 153, 1])
    tables = chunk.repeat(len(lens), 1)
    tables[75] = other  # between rows 74 and 76 of the chunk's table
    q = torch.randn(len(lens), hq, 64, generator=gen)
    out = ops.paged_decode_attention(q, kc, vc, tables, lens)
    for r in range(len(lens)):
        alone = ops.paged_decode_attention(q[r : r + 1], kc, vc, tables[r : r + 1], lens[r : r + 1])
        assert torch.equal(out[r], alone[0]), f"row {r}"


def test_a_bf16_caches_attention_runs_on_amx_tiles_where_the_library_has_them() -> None:
    """Where the kernels run int4 on AMX tiles, a bf16 cache's attention does too (both passes,
    engine/csrc/attention_amx.h); turned off for a measurement, the vector path gives the same
    attention within the bf16 tolerance: rows crossing 32-position chunks and 16-position blocks, a
    chunk longer than a tile's rows, decoding rows of other tables between."""
    assert ops.amx_attention() == kernels.isa().endswith("+amx")
    gen = torch.Generator().manual_seed(7)
    bs, hq, hkv = 16, 9, 3
    kc, vc = (torch.randn(40, bs, hkv, 64, generator=gen).to(torch.bfloat16) for _ in "kv")
    chunk = torch.randperm(40, generator=gen)[:12]
    other = torch.tensor([3, 11, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    lens = torch.tensor([33, *range(38, 78), 47, 1, 190])
    tables = torch.stack([other, *[chunk] * 40, other, chunk, chunk])
    q = torch.randn(len(lens), hq, 64, generator=gen)
    on = ops.paged_decode_attention(q, kc, vc, tables, lens)
    ops.set_amx_attention(False)
    try:
        assert not ops.amx_attention()
        off = ops.paged_decode_attention(q, kc, vc, tables, lens)
    finally:
        ops.set_amx_attention(True)
    torch.testing.assert_close(on, off, rtol=1e-5, atol=1e-4)
    for r in range(len(lens)):
        seen = int(lens[r])
        keys = kc[tables[r]].reshape(-1, hkv, 64)[:seen].float().transpose(0, 1)
        vals = vc[tables[r]].reshape(-1, hkv, 64)[:seen].float().transpose(0, 1)
        assert_attention(on[r], q[r], keys, vals, torch.bfloat16)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_a_non_finite_value_reaches_only_the_rows_that_attend_to_it(bad: float) -> None:
    """A value gone Inf or NaN (a model whose activations overflowed) poisons the rows that attend to
    it, and no earlier row of the same prefill chunk: on AMX tiles a chunk's rows share their value
    tiles, where a zero weight times Inf would be NaN. Every row still gets its bits alone."""
    gen = torch.Generator().manual_seed(11)
    bs, hq, hkv = 16, 9, 3
    kc, vc = (torch.randn(8, bs, hkv, 64, generator=gen).to(torch.bfloat16) for _ in "kv")
    chunk = torch.tensor([5, 2, 7])
    vc[2, 7, 0, 5] = bad  # position 16 + 7 = 23, kv head 0
    lens = torch.tensor(list(range(17, 41)))  # a chunk's rows: positions 16 .. 39
    tables = chunk.repeat(len(lens), 1)
    q = torch.randn(len(lens), hq, 64, generator=gen)
    out = ops.paged_decode_attention(q, kc, vc, tables, lens)
    for r in range(len(lens)):
        alone = ops.paged_decode_attention(q[r : r + 1], kc, vc, tables[r : r + 1], lens[r : r + 1])[0]
        torch.testing.assert_close(out[r], alone, rtol=0, atol=0, equal_nan=True)
        sees = int(lens[r]) > 23
        assert out[r, :3].isfinite().all() != sees, f"row {r}"  # kv head 0's query heads
        assert out[r, 3:].isfinite().all(), f"row {r}"


def test_paged_decode_attention_refuses_a_context_longer_than_its_table() -> None:
    kc, vc = cache_pair(4, 4, 1, 16, torch.float32)
    q, table = torch.randn(1, 2, 16), torch.tensor([[0, 1]])
    with pytest.raises(RuntimeError, match="exceeds its table"):
        ops.paged_decode_attention(q, kc, vc, table, torch.tensor([9]))
    with pytest.raises(RuntimeError, match="int64"):
        ops.paged_decode_attention(q, kc, vc, table.int(), torch.tensor([2]))


def test_the_kernels_own_threads_give_bit_identical_results() -> None:
    """Work is split by output tile and by (unit of rows, kv head): no sum crosses a chunk, so the
    pool's thread count cannot change a result, only how fast it comes."""
    gen = torch.Generator().manual_seed(7)
    parts = quantize_int4(torch.randn(3072, 576, generator=gen) * 0.05)
    packed, x = pack_q4(parts), torch.randn(5, 576, generator=gen)
    kc, vc = (torch.randn(64, 16, 3, 64, generator=gen) for _ in "kv")
    tables = torch.randperm(64, generator=gen)[:60].view(4, 15)
    lens, q = torch.tensor([240, 17, 100, 1]), torch.randn(4, 9, 64, generator=gen)
    chunk_lens, chunk_q = torch.arange(150, 230), torch.randn(80, 9, 64, generator=gen)  # a prefill chunk
    before = ops.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            ops.set_num_threads(threads)
            assert ops.get_num_threads() == threads
            attention = ops.paged_decode_attention(q, kc, vc, tables, lens)
            chunk = ops.paged_decode_attention(chunk_q, kc, vc, tables[:1].repeat(80, 1), chunk_lens)
            results.append((ops.q4_linear(x, packed, 3072), attention, chunk))
        for got in results[1:]:
            assert all(torch.equal(a, b) for a, b in zip(got, results[0], strict=True))
    finally:
        ops.set_num_threads(before)


def test_the_pool_survives_many_jobs_and_thread_changes() -> None:
    """Helpers started, stopped and restarted between jobs of every size (a helper that starts late,
    after a stop, once slept forever): every result stays the single-thread one."""
    gen = torch.Generator().manual_seed(11)
    parts = quantize_int4(torch.randn(320, 64, generator=gen))
    packed = pack_q4(parts)
    xs = [torch.randn(m, 64, generator=gen) for m in (1, 2, 7)]
    ops.set_num_threads(1)
    expected = [ops.q4_linear(x, packed, 320) for x in xs]
    try:
        for round_ in range(60):
            ops.set_num_threads(1 + round_ % 3)
            for x, want in zip(xs, expected, strict=True):
                assert torch.equal(ops.q4_linear(x, packed, 320), want)
    finally:
        ops.set_num_threads(1)


def test_argmax_and_usable_rows_in_one_pass() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(7, 1000, generator=gen)
    logits[0, 17] = logits[0, 900] = 50.0  # a tie: the first index wins, as in torch.argmax
    logits[1, 5] = float("nan")
    logits[2, 999] = float("inf")  # +inf: unusable
    logits[3] = float("-inf")  # nothing finite: unusable
    logits[4, :500] = float("-inf")  # -inf marks tokens never drawn: still usable
    logits[5, 999] = 60.0  # the maximum in the tail past the last full 16
    best, usable = ops.argmax_usable(logits)
    assert usable.tolist() == [True, False, False, False, True, True, True]
    ok = usable.nonzero().flatten()
    assert torch.equal(best[ok], logits[ok].argmax(dim=-1))
    assert int(best[0]) == 17 and int(best[5]) == 999


def test_topk_indices_are_the_largest_values_largest_first() -> None:
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 49152, generator=gen)
    logits[1, 7] = float("nan")  # never counted
    got = ops.topk_indices(logits, 8)
    clean = logits.nan_to_num(nan=float("-inf"))
    assert torch.equal(got, clean.topk(8, dim=-1).indices)
    with pytest.raises(RuntimeError, match="k must be"):
        ops.topk_indices(logits, 0)
