"""mla.decode on torch CUDA tensors over fp8 caches, against the float64 numpy reference (mla_reference)
computed from the dequantised cache.

Runs only where torch sees an sm_90a GPU (the fp8 decode is an sm_90a kernel), with the kernels in the
kernel cache ($MLA_KERNEL_CACHE_DIR): `mla-aot --cache-dir DIR --shapes deepseek` builds every decode and
cache_write spec used here (scripts/gpu-carry-with-kernels.sh does).

Inputs: DeepSeek-V3 widths (L=512, R=64, softmax scale 192^-0.5), page 64; latent rows N(0, 1) quantised
by the reference's cache_write (mla_reference.make_paged_cache), q N(0, 1) rounded to bf16. Every slot
no request reads holds the e4m3 NaN code 0x7F, and block-table entries past a request's last page point
at such pages, so a kernel that reads past a piece shows NaN. One batch mixes seq_lens 0, 1 (s_q for
causal), 63, 64, 65 and 1000.

The kernels under test are the default tiling's and, at N = 16, every tile the tiling may choose there
(FP8_N16_TILES, forced through `tile=`; scripts/gpu-carry-with-kernels.sh puts each in the AOT set), and the
opt-in seesaw build over fp8_e4m3 and fp8_ds_mla (SEESAW_E4M3: E4M3 wgmmas on the raw codes and on Q's two
E4M3 parts, V converted to f16 by the consumer warpgroups; over fp8_ds_mla the scale tiles' scores rescaled
per token between tiles in one accumulator, and each tile's scale over its running maximum folded into the
converted V).
test_single_token_rows_are_exact pins the conversion itself: every non-NaN E4M3 code (signed zeros,
subnormals, +-448) decoded exactly, then at most one rounding of code * scale.

Tolerance (the issue's bar): out within 2e-2 of the reference relative to the largest |out| of the
reference, lse within 2e-2 relative to max(1, |lse|); empty rows exactly 0 and -inf. The kernels round
the dequantised values to bf16 in shared memory and hold probabilities in bf16 for the PV product; over
fp8_e4m3 they compute in f16 instead (exact codes, Q scaled by a power of two per CTA, probabilities in f16),
and so does fp8_ds_mla's 16-row raw-ring kernel (scales applied in f32 to each tile's scores, probabilities
stored per scale tile as p * s / sigma in f16, bf16 RoPE MMAs).
"""

import functools

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU decode tests need torch CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch: the fp8 decode tests need an sm_90a device",
                allow_module_level=True)
if torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("the fp8 decode kernels are sm_90a only", allow_module_level=True)

import numpy as np  # noqa: E402

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402

L, R, PAGE = 512, 64, 64
D = L + R
SCALE = 192**-0.5
KV_SCALE = 0.02  # N(0, 1) values / 0.02 stay inside e4m3's +-448
REL_TOL = 2e-2
FORMATS = ("fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla")
# The tiles chooseDecodeTiling may pick at N = 16 (mma.sync 16/32-row tiles and the wgmma kernel).
FP8_N16_TILES = ("16x4x64x2", "16x8x64x2", "16x2x32x2", "16x2x32x3", "16x1x32x3", "16x1x16x4", "32x2x32x2", "64x2x64x2w")
# Code bytes of a row (the rest holds f32 scales and, for fp8_ds_mla, bf16 RoPE values).
CODE_BYTES = {"fp8_e4m3": D, "fp8_e4m3_token": D, "fp8_ds_mla": L}


def seq_lens_for(sq, causal):
    return [0, sq if causal else 1, 63, 64, 65, 1000]


def kv_scale_of(kv_format):
    return KV_SCALE if kv_format == "fp8_e4m3" else None


@functools.lru_cache(maxsize=None)
def problem(kv_format, n, sq, causal):
    """Inputs on the GPU and the float64 reference (out [b, sq, n, L], lse [b, n, sq])."""
    rng = np.random.default_rng(1000 * FORMATS.index(kv_format) + 10 * n + 2 * sq + int(causal))
    lens = seq_lens_for(sq, causal)
    cache = ref.make_paged_cache(rng, lens, PAGE, L, R, kv_format=kv_format, kv_scale=kv_scale_of(kv_format))
    q = torch.from_numpy(rng.standard_normal((len(lens), sq, n, D)).astype(np.float32)).to(torch.bfloat16)
    out, lse = ref.decode_ref(q.float().numpy(), cache.kv_cache, cache.block_table, cache.seq_lens, L, SCALE,
                              causal, kv_format, kv_scale_of(kv_format))
    inputs = dict(q=q.cuda(), kv_cache=torch.from_numpy(cache.kv_cache).cuda(),
                  block_table=torch.from_numpy(cache.block_table).cuda(),
                  seq_lens=torch.tensor(lens, dtype=torch.int32, device="cuda"))
    return inputs, out, lse


def check(result, out_ref, lse_ref):
    out, lse = (t.float().cpu().numpy() for t in result)
    assert not np.isnan(out).any(), "NaN in out: an unused cache slot leaked"
    empty = np.isinf(lse_ref)
    assert (lse[empty] == -np.inf).all() and (lse[~empty] > -np.inf).all()
    rows_empty = empty.transpose(0, 2, 1)  # [b, sq, n]
    assert (out[rows_empty] == 0).all()
    out_err = np.abs(out - out_ref).max() / np.abs(out_ref).max()
    assert out_err <= REL_TOL, f"max |out err| {out_err:.3e} relative to max |out|"
    lse_err = (np.abs(lse[~empty] - lse_ref[~empty]) / np.maximum(1, np.abs(lse_ref[~empty]))).max()
    assert lse_err <= REL_TOL, f"max |lse err| {lse_err:.3e} relative"


@pytest.mark.parametrize("kv_format", FORMATS)
@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("sq, causal", ((1, False), (2, False), (4, False), (2, True)))
def test_matches_reference(kv_format, n, sq, causal):
    inputs, out_ref, lse_ref = problem(kv_format, n, sq, causal)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format))
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", ("fp8_e4m3", "fp8_ds_mla"))
@pytest.mark.parametrize("num_splits", (None, 1, 7))
def test_causal_rows_of_the_16_row_raw_kernel(kv_format, num_splits):
    """8 heads x 2 causal query tokens fill one 16-row block of the raw-ring kernel (decodeReadsRawFp8), so
    rows of the same warps see different prefixes: token i sees positions [0, S - 2 + i] (primer), and a
    request of S = 2 gives token 0 a single position. With the grid's pieces, one piece and seven."""
    inputs, out_ref, lse_ref = problem(kv_format, 8, 2, True)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=True, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format), num_splits=num_splits)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", FORMATS)
@pytest.mark.parametrize("num_splits", (1, 7))
def test_split_pieces_match(kv_format, num_splits):
    """Pieces that start mid-request and end past a request's last row (zero-filled raw chunks, zeroed
    tokens) merge to the same result."""
    inputs, out_ref, lse_ref = problem(kv_format, 16, 1, False)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format), num_splits=num_splits)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", ("fp8_e4m3", "fp8_ds_mla"))
def test_planned_runs_merge_their_pieces_every_time(kv_format):
    """At N = 16 the last piece of each row block to finish merges the block's rows in the same launch
    (KernelABI.h's decodeMergesAsLastPiece), counted in workspace counters that the merging piece puts
    back to zero. A plan uploads its bounds (and zeroes the counters) once: two runs of it with different
    queries must both merge. With a counter left non-zero the second run would merge nothing and leave
    out unwritten."""
    inputs, out_ref, lse_ref = problem(kv_format, 16, 1, False)
    plan = mla.plan_decode(**inputs, head_dim_v=L, kv_format=kv_format, num_splits=3)
    assert plan.num_splits == 3
    kv_scale = None
    if kv_format == "fp8_e4m3":
        kv_scale = torch.tensor([KV_SCALE], dtype=torch.float32, device="cuda")
    first = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, kv_scale=kv_scale, plan=plan)
    check(first, out_ref, lse_ref)
    flipped = dict(inputs, q=-inputs["q"])
    out2, lse2 = ref.decode_ref(flipped["q"].float().cpu().numpy(), inputs["kv_cache"].cpu().numpy(),
                                inputs["block_table"].cpu().numpy(), inputs["seq_lens"].cpu().numpy(), L,
                                SCALE, False, kv_format, kv_scale_of(kv_format))
    assert np.abs(out2 - out_ref).max() > 0.1, "the two runs' references must differ"
    check(mla.decode(**flipped, head_dim_v=L, softmax_scale=SCALE, kv_scale=kv_scale, plan=plan), out2, lse2)


@pytest.mark.parametrize("kv_format", FORMATS)
def test_planned_decode_matches(kv_format):
    """plan_decode fixes the fp8 kernel; kv_scale (a device tensor here, vLLM's k_scale) is per call."""
    inputs, out_ref, lse_ref = problem(kv_format, 128, 1, False)
    plan = mla.plan_decode(**inputs, head_dim_v=L, kv_format=kv_format)
    kv_scale = None
    if kv_format == "fp8_e4m3":
        kv_scale = torch.tensor([KV_SCALE], dtype=torch.float32, device="cuda")
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, kv_scale=kv_scale, plan=plan)
    plan.check()
    check(result, out_ref, lse_ref)


def test_kv_scale_is_read_at_launch():
    """The per-tensor scale lives in device memory: doubling it doubles every cache value."""
    inputs, _, _ = problem("fp8_e4m3", 16, 1, False)
    scale = torch.tensor([KV_SCALE], dtype=torch.float32, device="cuda")
    first = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, kv_format="fp8_e4m3", kv_scale=scale)
    scale.mul_(2)
    second = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE / 2, kv_format="fp8_e4m3",
                        kv_scale=scale)
    # Scores are unchanged (q.k doubles, the softmax scale halves); values double.
    torch.testing.assert_close(second[0].float(), 2 * first[0].float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kv_format", FORMATS)
def test_gpu_cache_write_round_trip(kv_format):
    """Rows the GPU cache_write quantises are what the GPU decode reads: the decode of a cache written on
    the GPU matches the reference decode of those very bytes."""
    rng = np.random.default_rng(7)
    lens = [0, 1, 63, 64, 65, 300]
    kv_scale = 1.0 if kv_format == "fp8_e4m3" else None  # the deepseek set's cache_write scale
    cache = ref.make_paged_cache(rng, lens, PAGE, L, R, kv_format=kv_format, kv_scale=kv_scale)
    poisoned = np.full_like(cache.kv_cache, ref.poison_value(kv_format, np.uint8))
    slots = np.concatenate([cache.slots(b, np.arange(s)) for b, s in enumerate(lens)]).astype(np.int32)
    kv_c = torch.from_numpy(np.concatenate(cache.kv_c)).to(torch.bfloat16).cuda()
    k_pe = torch.from_numpy(np.concatenate(cache.k_pe)).to(torch.bfloat16).cuda()
    kv_cache = torch.from_numpy(poisoned).cuda()
    mla.cache_write(kv_c, k_pe, kv_cache, torch.from_numpy(slots).cuda(), kv_format=kv_format,
                    kv_scale=kv_scale)
    written = kv_cache.cpu().numpy()
    q = torch.from_numpy(rng.standard_normal((len(lens), 1, 16, D)).astype(np.float32)).to(torch.bfloat16)
    out_ref, lse_ref = ref.decode_ref(q.float().numpy(), written, cache.block_table, cache.seq_lens, L, SCALE,
                                      False, kv_format, kv_scale)
    result = mla.decode(q.cuda(), kv_cache, torch.from_numpy(cache.block_table).cuda(),
                        torch.tensor(lens, dtype=torch.int32, device="cuda"), head_dim_v=L, softmax_scale=SCALE,
                        kv_format=kv_format, kv_scale=kv_scale)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", FORMATS)
@pytest.mark.parametrize("tile", FP8_N16_TILES)
@pytest.mark.parametrize("sq, causal", ((1, False), (2, True)))
def test_n16_tiles_match_reference(kv_format, tile, sq, causal):
    """Each N = 16 tile, forced, over every row format: the per-slice dequantisation and its named barriers
    in the mma.sync compositions (16 and 32 rows, 1, 2 or 4 warps per token slice) and the box-wise one
    of the wgmma kernel."""
    if kv_format == "fp8_ds_mla" and tile.endswith("w"):
        pytest.skip("fp8_ds_mla's two raw stages do not fit in shared memory next to the wgmma tiles")
    from mla import gpu  # the tile override is the GPU entry point's

    inputs, out_ref, lse_ref = problem(kv_format, 16, sq, causal)
    result = gpu.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format), tile=tile)
    check(result, out_ref, lse_ref)


SEESAW_E4M3 = "64x2x64x2s"


SEESAW_FORMATS = ("fp8_e4m3", "fp8_ds_mla")


@pytest.mark.parametrize("kv_format", SEESAW_FORMATS)
@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("sq, causal", ((1, False), (2, False), (4, False), (2, True)))
@pytest.mark.parametrize("num_splits", (None, 1, 7))
def test_seesaw_e4m3_matches_reference(kv_format, n, sq, causal, num_splits):
    """The seesaw build over fp8_e4m3 and fp8_ds_mla (tile 64x2x64x2s, opt-in; KernelABI.h
    decodeSeesawReadsE4M3): Q K^T as E4M3 wgmmas on the raw codes and on Q's two E4M3 parts, V converted
    into an f16 tile by the consumer warpgroups, tokens outside a piece zeroed there (NaN codes in every
    unread slot). fp8_ds_mla's scores tile by tile in one accumulator, its RoPE part as bf16 wgmmas, its
    scales through a third map. With the grid's pieces, one piece (final rows staged in
    the Q tile) and seven (merged in the launch)."""
    from mla import gpu  # the tile override is the GPU entry point's

    inputs, out_ref, lse_ref = problem(kv_format, n, sq, causal)
    result = gpu.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format), tile=SEESAW_E4M3, num_splits=num_splits)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_scale", (1 / 448, 37.5))
@pytest.mark.parametrize("n", (16, 128))
def test_seesaw_e4m3_kv_scale_far_from_one(kv_scale, n):
    """As test_kv_scale_far_from_one, through the seesaw build: kv_scale goes into its scores' scale and
    its written rows (staged and merged ones alike)."""
    rng = np.random.default_rng(31 + n)
    cache = ref.make_paged_cache(rng, seq_lens_for(1, False), PAGE, L, R, kv_format="fp8_e4m3",
                                 kv_scale=kv_scale)
    check_decode_of_cache(rng, cache, n, "fp8_e4m3", kv_scale, tile=SEESAW_E4M3)


@pytest.mark.parametrize("kv_scale", (1 / 448, 37.5))
@pytest.mark.parametrize("n", (16, 128))
def test_kv_scale_far_from_one(kv_scale, n):
    """fp8_e4m3 folds kv_scale into the scores' scale and the output instead of multiplying every
    element: 1/448 saturates most N(0, 1) values at +-448, 37.5 turns most into subnormal codes or 0."""
    rng = np.random.default_rng(11 + n)
    lens = seq_lens_for(1, False)
    cache = ref.make_paged_cache(rng, lens, PAGE, L, R, kv_format="fp8_e4m3", kv_scale=kv_scale)
    check_decode_of_cache(rng, cache, n, "fp8_e4m3", kv_scale)


def check_decode_of_cache(rng, cache, n, kv_format, kv_scale, tile=None):
    """One decode (s_q = 1, N(0, 1) q rounded to bf16) over `cache` against the float64 reference:
    mla.decode, or the GPU entry point with a forced `tile`."""
    lens = cache.seq_lens
    q = torch.from_numpy(rng.standard_normal((len(lens), 1, n, D)).astype(np.float32)).to(torch.bfloat16)
    out_ref, lse_ref = ref.decode_ref(q.float().numpy(), cache.kv_cache, cache.block_table, lens, L, SCALE,
                                      False, kv_format, kv_scale)
    from mla import gpu  # the tile override is the GPU entry point's

    args = (q.cuda(), torch.from_numpy(cache.kv_cache).cuda(), torch.from_numpy(cache.block_table).cuda(),
            torch.from_numpy(np.asarray(lens, dtype=np.int32)).cuda())
    kwargs = dict(head_dim_v=L, softmax_scale=SCALE, kv_format=kv_format, kv_scale=kv_scale)
    result = mla.decode(*args, **kwargs) if tile is None else gpu.decode(*args, **kwargs, tile=tile)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("q_factor", (2.0**-20, 2.0**18))
@pytest.mark.parametrize("n, tile, kv_format", ((16, None, "fp8_e4m3"), (16, "16x4x64x2", "fp8_e4m3"),
                                                (128, None, "fp8_e4m3"), (128, "64x2x64x2s", "fp8_e4m3"),
                                                (128, "64x2x64x2s", "fp8_ds_mla")))
def test_e4m3_q_outside_f16_range(q_factor, n, tile, kv_format):
    """fp8_e4m3 computes in f16: each CTA stages Q times the power of two that puts its largest |q| in
    [2^14, 2^15) (the seesaw build: [2^7, 2^8), for Q's two E4M3 parts; over fp8_ds_mla its RoPE
    columns in bf16 times the same power) and puts the factor back into the scores' scale.
    q = N(0, 1) * 2^18 (beyond f16's 65504)
    and * 2^-20 (below f16's normal range), with the softmax scale divided by the same factor so the
    scores, and the reference, are those of the unit-scale problem."""
    rng = np.random.default_rng(23 + n)
    lens = seq_lens_for(1, False)
    cache = ref.make_paged_cache(rng, lens, PAGE, L, R, kv_format=kv_format, kv_scale=kv_scale_of(kv_format))
    q = torch.from_numpy((rng.standard_normal((len(lens), 1, n, D)) * q_factor).astype(np.float32))
    q = q.to(torch.bfloat16)
    scale = SCALE / q_factor
    out_ref, lse_ref = ref.decode_ref(q.float().numpy().astype(np.float64), cache.kv_cache, cache.block_table,
                                      cache.seq_lens, L, scale, False, kv_format, kv_scale_of(kv_format))
    from mla import gpu  # the tile override is the GPU entry point's

    result = gpu.decode(q.cuda(), torch.from_numpy(cache.kv_cache).cuda(),
                        torch.from_numpy(cache.block_table).cuda(),
                        torch.tensor(lens, dtype=torch.int32, device="cuda"), head_dim_v=L, softmax_scale=scale,
                        kv_format=kv_format, kv_scale=kv_scale_of(kv_format), tile=tile)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", FORMATS)
@pytest.mark.parametrize("tile", (None, "16x2x32x2", "64x2x64x2s"))
def test_single_token_rows_are_exact(kv_format, tile):
    """One token per request: its softmax weight is exactly 1, so every head's output is the token's
    dequantised latent row. The rows hold every E4M3 code but the NaN ones (0x7F, 0xFF): +-0, the
    subnormals 0x01-0x07 and 0x81-0x87, negatives, +-448. fp8_e4m3 converts them exactly and its
    power-of-two kv_scale keeps code * kv_scale a bf16 value, so out is exact (1e-6 allows an approximate
    reciprocal of the row sum 1); the per-token/per-tile scaled formats round code * scale to bf16 once
    (relative error <= 2^-8 with 8 significant bits, plus 2^-24 for the f32 product). atol 0: a flushed
    subnormal, a lost sign or a NaN fails."""
    if tile == "64x2x64x2s" and kv_format not in SEESAW_FORMATS:
        pytest.skip("the seesaw build does not read fp8_e4m3_token (odd rows start off TMA's 16-byte grid)")
    rng = np.random.default_rng(5)
    batch = 8
    kv_scale = 0.125 if kv_format == "fp8_e4m3" else None
    cache = ref.make_paged_cache(rng, [1] * batch, PAGE, L, R, kv_format=kv_format, kv_scale=kv_scale)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    width = CODE_BYTES[kv_format]
    flat = cache.kv_cache.reshape(-1, cache.kv_cache.shape[-1])
    slots = np.array([int(cache.slots(b, np.arange(1))[0]) for b in range(batch)])
    for b in range(batch):
        flat[slots[b], :width] = np.resize(rng.permutation(codes), width)
    rows = flat[slots][:, None, :]  # [batch, 1, row bytes]: one page of one row each
    expected = ref.dequant_cache_ref(rows, kv_format, L, R, kv_scale)[:, 0, :L]
    q = torch.from_numpy(rng.standard_normal((batch, 1, 16, D)).astype(np.float32)).to(torch.bfloat16)
    from mla import gpu  # the tile override is the GPU entry point's

    out, _ = gpu.decode(q.cuda(), torch.from_numpy(cache.kv_cache).cuda(),
                        torch.from_numpy(cache.block_table).cuda(),
                        torch.ones(batch, dtype=torch.int32, device="cuda"), head_dim_v=L, softmax_scale=SCALE,
                        kv_format=kv_format, kv_scale=kv_scale, tile=tile)
    got = out.float().cpu().numpy()[:, 0]  # [batch, N, L]
    rtol = 1e-6 if kv_format == "fp8_e4m3" else 2.0**-8 + 2.0**-20
    np.testing.assert_allclose(got, np.broadcast_to(expected[:, None, :], got.shape), rtol=rtol, atol=0)


@pytest.mark.parametrize("tile", (None, "16x4x32x2", "16x8x64x3", "64x2x64x2s"))
def test_ds_mla_scales_far_apart(tile):
    """fp8_ds_mla at N = 16 scales each tile's scores per token after the MMAs and stores P once per scale
    tile as p * s / sigma, sigma the tile's running maximum scale (O kept in units of sigma, rescaled when
    it grows). Here every token's four scales are multiplied by independent powers of two that rise along
    the sequence, from 2^-14..2^-12 at its start to 2^-3..2^-1 at its end, so sigma grows block by block
    and P spans many binades; the reference dequantises the same bytes. The seesaw build (64x2x64x2s)
    rescales the scores tile by tile instead and converts V times s / sigma, sigma each warpgroup's running
    maximum of a tile's scales. (Factors above 1 would make the
    scores large enough that rounding the dequantised K to bf16, as the 16x8x64x3 kernel does, moves
    them by whole units.)"""
    rng = np.random.default_rng(31)
    lens = [0, 1, 63, 64, 65, 1000, 4000]
    cache = ref.make_paged_cache(rng, lens, PAGE, L, R, kv_format="fp8_ds_mla")
    flat = cache.kv_cache.reshape(-1, cache.kv_cache.shape[-1])
    for b, n in enumerate(lens):
        slots = cache.slots(b, np.arange(n))
        scales = flat[slots, L:L + 16].copy().view(np.float32)  # [n, 4]
        rise = (12 * np.arange(n) // max(n, 1))[:, None] - 12
        scales *= np.exp2(rise + rng.integers(-2, 1, size=scales.shape)).astype(np.float32)
        flat[slots, L:L + 16] = scales.view(np.uint8)
    check_decode_of_cache(rng, cache, 16, "fp8_ds_mla", None, tile)


# The varlen batch: seq_lens {0, 1, 63, 64, 65, 8191} and three more requests, so that every draft
# length 1..8 occurs (q_b = 0 for the empty request).
VARLEN_SEQ_LENS = (0, 1, 63, 64, 65, 8191, 7, 130, 200)
VARLEN_Q_LENS = (0, 1, 8, 3, 5, 2, 7, 4, 6)


@functools.lru_cache(maxsize=None)
def varlen_problem(kv_format, n, causal):
    """A varlen batch over an fp8 cache on the GPU and the float64 reference (out [T, n, L], lse [T, n])."""
    rng = np.random.default_rng(7000 + 100 * FORMATS.index(kv_format) + n + int(causal))
    cache = ref.make_paged_cache(rng, VARLEN_SEQ_LENS, PAGE, L, R, kv_format=kv_format,
                                 kv_scale=kv_scale_of(kv_format))
    qsl = np.concatenate([[0], np.cumsum(VARLEN_Q_LENS)]).astype(np.int32)
    q = torch.from_numpy(rng.standard_normal((int(qsl[-1]), n, D)).astype(np.float32)).to(torch.bfloat16)
    out, lse = ref.decode_varlen_ref(q.float().numpy(), cache.kv_cache, cache.block_table, cache.seq_lens, qsl,
                                     L, SCALE, causal, kv_format, kv_scale_of(kv_format))
    inputs = dict(q=q.cuda(), kv_cache=torch.from_numpy(cache.kv_cache).cuda(),
                  block_table=torch.from_numpy(cache.block_table).cuda(),
                  seq_lens=torch.tensor(VARLEN_SEQ_LENS, dtype=torch.int32, device="cuda"),
                  query_start_loc=torch.from_numpy(qsl).cuda())
    return inputs, out, lse


def check_varlen(result, out_ref, lse_ref):
    """check() for token-major results: out [T, n, L], lse [T, n]."""
    out, lse = result
    check((out[:, None], lse[:, :, None]), out_ref[:, None], lse_ref[:, :, None])


@pytest.mark.parametrize("kv_format", FORMATS)
@pytest.mark.parametrize("n, causal", ((16, True), (16, False), (128, True)))
def test_varlen_matches_reference(kv_format, n, causal):
    """One launch for a batch of mixed draft lengths 0..8 over an fp8 cache (the issue's MTP batch)."""
    inputs, out_ref, lse_ref = varlen_problem(kv_format, n, causal)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, kv_format=kv_format,
                        kv_scale=kv_scale_of(kv_format))
    check_varlen(result, out_ref, lse_ref)


@pytest.mark.parametrize("kv_format", FORMATS)
def test_varlen_planned_decode_matches(kv_format):
    """A varlen plan fixes the fp8 kernel; fp8_e4m3's kv_scale is a device tensor given per call, read at
    launch (a later write to it changes the next call's result)."""
    inputs, out_ref, lse_ref = varlen_problem(kv_format, 128, True)
    plan = mla.plan_decode(**inputs, head_dim_v=L, causal=True, kv_format=kv_format)
    kv_scale = None
    if kv_format == "fp8_e4m3":
        kv_scale = torch.tensor([KV_SCALE], dtype=torch.float32, device="cuda")
    out = torch.empty(out_ref.shape, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(lse_ref.shape, dtype=torch.float32, device="cuda")
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=True, kv_scale=kv_scale, plan=plan,
                        out=out, lse=lse)
    plan.check()
    assert result[0] is out and result[1] is lse
    check_varlen(result, out_ref, lse_ref)
    if kv_format == "fp8_e4m3":
        kv_scale.fill_(2 * KV_SCALE)  # V doubles, so out doubles; the scores use the new scale too
        twice, _ = ref.decode_varlen_ref(inputs["q"].float().cpu().numpy(), *varlen_cache_arrays(inputs), L,
                                         SCALE, True, kv_format, 2 * KV_SCALE)
        result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=True, kv_scale=kv_scale,
                            plan=plan)
        out_err = np.abs(result[0].float().cpu().numpy() - twice).max() / np.abs(twice).max()
        assert out_err <= REL_TOL, f"max |out err| {out_err:.3e} relative after the scale changed"


def varlen_cache_arrays(inputs):
    """kv_cache, block_table, seq_lens and query_start_loc of `inputs` as numpy arrays."""
    return [inputs[k].cpu().numpy() for k in ("kv_cache", "block_table", "seq_lens", "query_start_loc")]
