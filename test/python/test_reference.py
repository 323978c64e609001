"""Self-tests of mla_reference: hand-checked values, scalar brute-force loops against the vectorised
code, and algebraic identities (split-KV merge, absorbed decode == up-projected MHA, chunked ==
unchunked prefill). The brute-force readers below parse cache bytes with `struct` and decode e4m3 from
its bit fields, so they share no code with the reference's table-driven paths."""

import math
import struct

import numpy as np
import pytest

import mla_reference as ref

# The reference computes in float64 and rounds its results to float32; brute-force loops stay in
# float64. Agreement is therefore float32 output rounding plus float64 summation-order noise.
RTOL = 1e-6
ATOL = 1e-6


@pytest.fixture
def rng():
    return np.random.default_rng(20240531)


# ---------------------------------------------------------------------------------------------------
# Scalar brute-force helpers (independent of the reference's vectorised code)
# ---------------------------------------------------------------------------------------------------


def scalar_e4m3(code):
    sign = -1.0 if code & 0x80 else 1.0
    exp, mant = (code >> 3) & 0xF, code & 0x7
    if exp == 0xF and mant == 0x7:
        return math.nan
    if exp == 0:
        return sign * math.ldexp(mant, -9)
    return sign * math.ldexp(8 + mant, exp - 10)


FINITE_E4M3 = [(c, scalar_e4m3(c)) for c in range(256) if not math.isnan(scalar_e4m3(c))]


def brute_encode_e4m3(x):
    """Nearest finite code by exhaustive search; ties to the even code; sign of x kept."""
    x = float(np.float32(x))
    if math.isnan(x):
        return 0x7F | (0x80 if math.copysign(1.0, x) < 0 else 0)
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    mag = min(abs(x), 448.0)
    best = None
    for code, val in FINITE_E4M3:
        if code & 0x80:
            continue
        dist = abs(val - mag)
        if best is None or dist < best[0] or (dist == best[0] and code % 2 == 0):
            best = (dist, code)
    return best[1] | sign


def brute_bf16(x):
    """Nearest bfloat16 (as float) of a float32, ties to even, comparing the two candidates around it in
    float64 (where the candidate past the largest finite bf16 is 2^128, which IEEE turns into inf)."""
    xv = float(np.float32(x))
    bits = struct.unpack("<I", struct.pack("<f", xv))[0]
    down_bits = bits & 0xFFFF0000
    down = struct.unpack("<f", struct.pack("<I", down_bits))[0]
    exp = (bits >> 23) & 0xFF
    ulp = math.ldexp(1.0, max(exp, 1) - 127 - 7)
    up = down + math.copysign(ulp, xv)
    d_down, d_up = abs(xv - down), abs(up - xv)
    if d_down < d_up or (d_down == d_up and ((down_bits >> 16) & 1) == 0):
        return down
    return up if abs(up) < 2.0**128 else math.copysign(math.inf, xv)


def scalar_row(raw, kv_format, L, R, kv_scale):
    """One cache row -> list of floats, parsed byte by byte."""
    D = L + R
    if kv_format == "auto":
        return [float(v) for v in raw]
    raw = bytes(np.asarray(raw, dtype=np.uint8))
    if kv_format == "fp8_e4m3":
        return [scalar_e4m3(b) * kv_scale for b in raw]
    if kv_format == "fp8_e4m3_token":
        s0, s1 = struct.unpack("<ff", raw[D : D + 8])
        return [scalar_e4m3(b) * s0 for b in raw[:L]] + [scalar_e4m3(b) * s1 for b in raw[L:D]]
    tiles = L // 128
    scales = struct.unpack(f"<{tiles}f", raw[L : L + 4 * tiles])
    latent = [scalar_e4m3(raw[j]) * scales[j // 128] for j in range(L)]
    halves = struct.unpack(f"<{R}H", raw[L + 4 * tiles :])
    rope = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    return latent + rope


def scalar_request_rows(kv_cache, block_row, start, count, kv_format, L, R, kv_scale):
    ps = kv_cache.shape[1]
    return [scalar_row(kv_cache[int(block_row[p // ps]), p % ps], kv_format, L, R, kv_scale)
            for p in range(start, start + count)]


def scalar_softmax(scores, values):
    """(weighted average of value lists, lse); empty -> (None, -inf)."""
    if not scores:
        return None, -math.inf
    m = max(scores)
    w = [math.exp(s - m) for s in scores]
    tot = sum(w)
    H = len(values[0])
    return [sum(w[j] * values[j][h] for j in range(len(w))) / tot for h in range(H)], m + math.log(tot)


def brute_decode(q, kv_cache, block_table, seq_lens, Hv, scale, causal, kv_format, kv_scale):
    B, Sq, N, D = q.shape
    L, R = Hv, D - Hv
    out = np.zeros((B, Sq, N, Hv))
    lse = np.full((B, N, Sq), -np.inf)
    for b in range(B):
        S = int(seq_lens[b])
        rows = scalar_request_rows(kv_cache, block_table[b], 0, S, kv_format, L, R, kv_scale)
        for i in range(Sq):
            seen = max(S - (Sq - 1 - i), 0) if causal else S
            for n in range(N):
                qv = [float(v) for v in q[b, i, n]]
                scores = [scale * sum(qv[d] * row[d] for d in range(D)) for row in rows[:seen]]
                o, l = scalar_softmax(scores, [row[:Hv] for row in rows[:seen]])
                if o is not None:
                    out[b, i, n], lse[b, n, i] = o, l
    return out, lse


def brute_up_proj(latent_row, kv_b_proj, N, P, V):
    """One latent row -> (k_nope [N][P], v [N][V]) by explicit sums over kv_b_proj rows."""
    L = len(latent_row)
    dot = lambda r: sum(latent_row[l] * float(kv_b_proj[r, l]) for l in range(L))
    k = [[dot(n * (P + V) + p) for p in range(P)] for n in range(N)]
    v = [[dot(n * (P + V) + P + j) for j in range(V)] for n in range(N)]
    return k, v


# ---------------------------------------------------------------------------------------------------
# e4m3 and bf16 codecs
# ---------------------------------------------------------------------------------------------------


def test_e4m3_table_matches_bit_fields():
    table = ref.e4m3_to_f32(np.arange(256))
    for code in range(256):
        expected = scalar_e4m3(code)
        if math.isnan(expected):
            assert np.isnan(table[code]), code
        else:
            assert table[code] == expected and np.signbit(table[code]) == (code >= 0x80), code


@pytest.mark.parametrize("code,value", [
    (0x00, 0.0), (0x01, 2.0**-9), (0x07, 7 * 2.0**-9), (0x08, 2.0**-6), (0x38, 1.0), (0x39, 1.125),
    (0x40, 2.0), (0x7E, 448.0), (0x7D, 416.0), (0xFE, -448.0), (0xB8, -1.0),
])
def test_e4m3_known_codes(code, value):
    assert ref.e4m3_to_f32(code) == value
    assert ref.f32_to_e4m3(value) == code


def test_e4m3_nan_codes():
    assert np.isnan(ref.e4m3_to_f32(0x7F)) and np.isnan(ref.e4m3_to_f32(0xFF))
    assert ref.f32_to_e4m3(np.nan) & 0x7F == 0x7F
    assert np.isnan(ref.e4m3_to_f32(ref.f32_to_e4m3(np.float32(-np.nan))))


def test_e4m3_all_codes_round_trip():
    codes = np.arange(256, dtype=np.uint8)
    back = ref.f32_to_e4m3(ref.e4m3_to_f32(codes))
    finite = np.array([not math.isnan(scalar_e4m3(c)) for c in range(256)])
    np.testing.assert_array_equal(back[finite], codes[finite])  # includes -0.0 -> 0x80
    assert np.all(back[~finite] & 0x7F == 0x7F)


@pytest.mark.parametrize("value,code", [
    (1.0625, 0x38),      # halfway 1.0 (0x38, even) / 1.125 (0x39)
    (1.1875, 0x3A),      # halfway 1.125 (0x39) / 1.25 (0x3A, even)
    (-1.0625, 0xB8),
    (432.0, 0x7E),       # halfway 416 (0x7D) / 448 (0x7E, even)
    (2.0**-10, 0x00),    # halfway 0 / smallest subnormal: to zero
    (3 * 2.0**-10, 0x02),  # halfway subnormals 1 / 2
    (5 * 2.0**-10, 0x02),  # halfway subnormals 2 / 3
    (15 * 2.0**-10, 0x08),  # halfway largest subnormal 0x07 / smallest normal 0x08
    (-(2.0**-10), 0x80),  # rounds to -0
])
def test_e4m3_ties_to_even(value, code):
    assert ref.f32_to_e4m3(np.float32(value)) == code


@pytest.mark.parametrize("value,code", [
    (500.0, 0x7E), (-1e9, 0xFE), (449.0, 0x7E), (464.0, 0x7E), (1e30, 0x7E), (np.inf, 0x7E),
    (-np.inf, 0xFE),
])
def test_e4m3_saturates(value, code):
    assert ref.f32_to_e4m3(np.float32(value)) == code


@pytest.mark.parametrize("value,code", [
    (2.0**-9, 0x01), (2.0**-10 * 1.0001, 0x01), (2.0**-10 * 0.9999, 0x00), (6 * 2.0**-9, 0x06),
    (-7 * 2.0**-9, 0x87), (1e-30, 0x00),
])
def test_e4m3_subnormals(value, code):
    assert ref.f32_to_e4m3(np.float32(value)) == code


def test_e4m3_encode_matches_exhaustive_search(rng):
    finite = np.array([v for _, v in FINITE_E4M3], dtype=np.float32)
    positive = np.unique(np.abs(finite))
    mids = (positive[1:] + positive[:-1]) / 2
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1e9))])
    samples = np.concatenate([
        rng.standard_normal(400).astype(np.float32) * np.float32(50),
        np.exp2(rng.uniform(-14, 10, 400)).astype(np.float32),
        near, -near, finite,
    ]).astype(np.float32)
    got = ref.f32_to_e4m3(samples)
    expected = np.array([brute_encode_e4m3(x) for x in samples], dtype=np.uint8)
    np.testing.assert_array_equal(got, expected)


def test_bf16_matches_nearest_even(rng):
    base = rng.standard_normal(300).astype(np.float32) * np.float32(1e3)
    # Force exact ties: low 16 bits 0x8000 sit halfway between two bf16 values.
    ties = ((base.view(np.uint32) & np.uint32(0xFFFF0000)) | np.uint32(0x8000)).view(np.float32)
    samples = np.concatenate([base, ties, np.float32([0.0, -0.0, 1.0, 3.4e38, -3.4e38])])
    got = ref.bf16_bits_to_f32(ref.f32_to_bf16_bits(samples))
    expected = np.array([brute_bf16(x) for x in samples], dtype=np.float32)
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(ref.bf16_bits_to_f32(ref.f32_to_bf16_bits(np.float32(np.nan))))


# ---------------------------------------------------------------------------------------------------
# Row formats and cache writes
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kv_format,L,R,dtype,nbytes", [
    ("auto", 512, 64, np.float16, 1152), ("auto", 512, 64, np.float32, 2304), ("fp8_e4m3", 512, 64, None, 576),
    ("fp8_e4m3_token", 512, 64, None, 584), ("fp8_ds_mla", 512, 64, None, 656), ("fp8_ds_mla", 256, 32, None, 328),
])
def test_row_bytes(kv_format, L, R, dtype, nbytes):
    assert ref.kv_row_bytes(kv_format, L, R, dtype or np.float32) == nbytes


def test_format_errors():
    with pytest.raises(ValueError):
        ref.kv_row_bytes("fp8_ds_mla", 64, 16)
    with pytest.raises(ValueError):
        ref.kv_row_bytes("fp8", 512, 64)
    with pytest.raises(ValueError):
        ref.encode_rows(np.zeros((1, 8), np.float32), "fp8_e4m3", 4, 4)


FP8_FORMATS = [("fp8_e4m3", 1 / 64), ("fp8_e4m3_token", None), ("fp8_ds_mla", None)]
# kv_scale 0.02 keeps N(0,1) values inside e4m3's range; 1/64 above is for rows of known small range.
FP8_FORMATS_NORMAL = [("fp8_e4m3", 0.02), ("fp8_e4m3_token", None), ("fp8_ds_mla", None)]


def in_range_scale(rows):
    """A per-tensor scale that maps the largest |value| just inside e4m3's range (no saturation)."""
    return float(np.abs(rows).max()) / 400.0


@pytest.mark.parametrize("kv_format,kv_scale", FP8_FORMATS)
def test_rows_decode_like_scalar_parser(rng, kv_format, kv_scale):
    L, R = 256, 16
    rows = rng.standard_normal((5, L + R)).astype(np.float32) * np.float32(3)
    stored = ref.encode_rows(rows, kv_format, L, R, kv_scale=kv_scale)
    assert stored.dtype == np.uint8 and stored.shape == (5, ref.kv_row_bytes(kv_format, L, R))
    got = ref.decode_rows(stored, kv_format, L, R, kv_scale)
    expected = np.array([scalar_row(r, kv_format, L, R, kv_scale) for r in stored])
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("kv_format,kv_scale", FP8_FORMATS)
def test_fp8_quantisation_error_bound(rng, kv_format, kv_scale):
    """|dequant(x) - x| <= 2^-4 |x| (3 mantissa bits, half an ulp) + 2^-10 * scale (half the smallest
    subnormal step) for every element; bf16 rope in fp8_ds_mla is within 2^-8 |x|."""
    L, R = 256, 32
    rows = (rng.standard_normal((16, L + R)) * np.exp2(rng.uniform(-6, 3, (16, 1)))).astype(np.float32)
    rows[3] = 0.0
    if kv_format == "fp8_e4m3":
        kv_scale = in_range_scale(rows)
    got = ref.decode_rows(ref.encode_rows(rows, kv_format, L, R, kv_scale=kv_scale), kv_format, L, R, kv_scale)
    x = rows.astype(np.float64)
    if kv_format == "fp8_e4m3":
        scale = np.full_like(x, kv_scale)
    elif kv_format == "fp8_e4m3_token":
        scale = np.concatenate([
            np.broadcast_to(np.maximum(np.abs(x[:, :L]).max(1, keepdims=True), 1e-4) / 448, (16, L)),
            np.broadcast_to(np.maximum(np.abs(x[:, L:]).max(1, keepdims=True), 1e-4) / 448, (16, R))], axis=1)
    else:
        tile = np.maximum(np.abs(x[:, :L]).reshape(16, -1, 128).max(2), 1e-4) / 448
        scale = np.concatenate([np.repeat(tile, 128, axis=1), np.zeros((16, R))], axis=1)
    bound = 2.0**-4 * np.abs(x) + 2.0**-10 * scale * (1 + 1e-6)
    if kv_format == "fp8_ds_mla":
        bound[:, L:] = 2.0**-8 * np.abs(x[:, L:])
    assert np.all(np.abs(got - x) <= bound)
    assert np.all(got[3] == 0.0)


def test_token_format_layout(rng):
    L, R = 64, 16
    rows = rng.standard_normal((4, L + R)).astype(np.float32)
    rows[2] = 0.0
    stored = ref.encode_rows(rows, "fp8_e4m3_token", L, R)
    for t in range(4):
        s0, s1 = struct.unpack("<ff", bytes(stored[t, L + R :]))
        assert s0 == np.float32(max(np.abs(rows[t, :L]).max(), np.float32(1e-4))) / np.float32(448)
        assert s1 == np.float32(max(np.abs(rows[t, L:]).max(), np.float32(1e-4))) / np.float32(448)
        if t != 2:  # the element carrying the amax lands on the largest code
            assert stored[t, np.argmax(np.abs(rows[t, :L]))] & 0x7F == 0x7E
            assert stored[t, L + np.argmax(np.abs(rows[t, L:]))] & 0x7F == 0x7E
    assert np.all(stored[2, : L + R] & 0x7F == 0)


def test_ds_mla_layout(rng):
    L, R = 512, 64
    rows = rng.standard_normal((2, L + R)).astype(np.float32)
    stored = ref.encode_rows(rows, "fp8_ds_mla", L, R)
    assert stored.shape == (2, 656)
    for t in range(2):
        scales = struct.unpack("<4f", bytes(stored[t, 512:528]))
        for k in range(4):
            tile = rows[t, 128 * k : 128 * (k + 1)]
            assert scales[k] == np.float32(np.abs(tile).max()) / np.float32(448)
            expected = [brute_encode_e4m3(v / np.float32(scales[k])) for v in tile]
            assert list(stored[t, 128 * k : 128 * (k + 1)]) == expected
        rope = struct.unpack("<64H", bytes(stored[t, 528:]))
        assert [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in rope] == [
            brute_bf16(v) for v in rows[t, L:]]


def test_per_tensor_fp8_bytes_exact(rng):
    x = rng.standard_normal((3, 20)).astype(np.float32)
    stored = ref.encode_rows(x, "fp8_e4m3", 16, 4, kv_scale=0.125)
    assert list(stored.ravel()) == [brute_encode_e4m3(v * 8) for v in x.ravel()]


@pytest.mark.parametrize("kv_format,kv_scale,dtype", [("auto", None, np.float32), ("auto", None, np.float16)]
                         + [(f, s, np.uint8) for f, s in FP8_FORMATS])
def test_cache_write_places_rows(rng, kv_format, kv_scale, dtype):
    L, R, pages, ps = 128, 16, 3, 16
    width = ref.kv_row_width(kv_format, L, R)
    cache = rng.integers(0, 255, (pages, ps, width)).astype(np.uint8) if dtype == np.uint8 else \
        rng.standard_normal((pages, ps, width)).astype(dtype)
    before = cache.copy()
    T = 6
    kv_c = rng.standard_normal((T, L)).astype(np.float32)
    k_pe = rng.standard_normal((T, 1, R)).astype(np.float32)
    slots = np.array([17, -1, 0, 47, -5, 30])
    new = ref.cache_write_ref(kv_c, k_pe, cache, slots, kv_format, kv_scale)
    np.testing.assert_array_equal(cache, before)  # the input is not modified
    flat_new, flat_old = new.reshape(-1, width), before.reshape(-1, width)
    written = {int(s): t for t, s in enumerate(slots) if s >= 0}
    for slot in range(pages * ps):
        if slot in written:
            t = written[slot]
            row = np.concatenate([kv_c[t], k_pe[t, 0]])[None]
            stored = ref.encode_rows(row, kv_format, L, R, dtype, kv_scale)[0]
            np.testing.assert_array_equal(flat_new[slot], stored)
        else:
            np.testing.assert_array_equal(flat_new[slot], flat_old[slot])
    again = ref.cache_write_ref(kv_c, k_pe[:, 0], cache, slots, kv_format, kv_scale)  # [T, R] k_pe
    np.testing.assert_array_equal(again, new)


def test_cache_write_rejects_out_of_range_slot():
    cache = np.zeros((2, 4, 8), np.float32)
    with pytest.raises(ValueError):
        ref.cache_write_ref(np.zeros((1, 6)), np.zeros((1, 2)), cache, [8])


# ---------------------------------------------------------------------------------------------------
# Weight products
# ---------------------------------------------------------------------------------------------------


def test_split_kv_b_proj_indices(rng):
    N, P, V, L = 3, 4, 5, 7
    w = rng.standard_normal((N * (P + V), L)).astype(np.float32)
    w_uk_t, w_uv = ref.split_kv_b_proj_ref(w, N, P, V)
    assert w_uk_t.shape == (N, P, L) and w_uv.shape == (N, L, V)
    for n in range(N):
        for l in range(L):
            for p in range(P):
                assert w_uk_t[n, p, l] == w[n * (P + V) + p, l]
            for v in range(V):
                assert w_uv[n, l, v] == w[n * (P + V) + P + v, l]


def test_absorb_up_proj_loops(rng):
    T, N, P, R, L, V = 3, 2, 4, 3, 6, 5
    q = rng.standard_normal((T, N, P + R))
    w = rng.standard_normal((N * (P + V), L))
    w_uk_t, w_uv = ref.split_kv_b_proj_ref(w, N, P, V)
    qa = ref.absorb_q_ref(q, w_uk_t)
    o = rng.standard_normal((T, N, L))
    up = ref.up_proj_out_ref(o, w_uv)
    latent = rng.standard_normal((T, L))
    k_nope, v = ref.up_proj_kv_ref(latent, w, N, P, V)
    for t in range(T):
        bk, bv = brute_up_proj(list(latent[t]), w, N, P, V)
        np.testing.assert_allclose(k_nope[t], bk, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(v[t], bv, rtol=RTOL, atol=ATOL)
        for n in range(N):
            for l in range(L):
                expected = sum(q[t, n, p] * w[n * (P + V) + p, l] for p in range(P))
                assert qa[t, n, l] == pytest.approx(expected, rel=RTOL, abs=ATOL)
            np.testing.assert_array_equal(qa[t, n, L:], q[t, n, P:].astype(np.float32))
            for j in range(V):
                expected = sum(o[t, n, l] * w[n * (P + V) + P + j, l] for l in range(L))
                assert up[t, n * V + j] == pytest.approx(expected, rel=RTOL, abs=ATOL)


# ---------------------------------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------------------------------


def test_merge_known_values():
    out_a = np.array([[[1.0, 0.0]]])
    out_b = np.array([[[0.0, 4.0]]])
    out, lse = ref.merge_states_ref(out_a, np.log([[2.0]]), out_b, np.log([[6.0]]))
    np.testing.assert_allclose(out, [[[0.25, 3.0]]], rtol=1e-7)
    np.testing.assert_allclose(lse, np.log([[8.0]]), rtol=1e-7)


def test_merge_non_contributing_states():
    a = np.full((2, 1, 3), 5.0)
    junk = np.full((2, 1, 3), np.nan)
    lse_a = np.array([[0.5, -np.inf]])
    for lse_junk in (np.full((1, 2), np.inf), np.full((1, 2), -np.inf)):
        out, lse = ref.merge_states_ref(a, lse_a, junk, lse_junk)
        np.testing.assert_array_equal(out[0], a[0])
        np.testing.assert_array_equal(out[1], 0.0)  # both sides empty
        np.testing.assert_array_equal(lse, np.float32([[0.5, -np.inf]]))


def test_merge_of_two_halves_equals_full_softmax(rng):
    N, S, H = 3, 20, 4
    scores = rng.standard_normal((N, 1, S)) * 4
    values = rng.standard_normal((S, H))
    full_o, full_l = ref._masked_softmax_attend(scores, values, True)
    a = ref._masked_softmax_attend(scores[..., :7], values[:7], True)
    b = ref._masked_softmax_attend(scores[..., 7:], values[7:], True)
    out, lse = ref.merge_states_ref(a[0].transpose(1, 0, 2), a[1], b[0].transpose(1, 0, 2), b[1])
    np.testing.assert_allclose(out, full_o.transpose(1, 0, 2), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(lse, full_l, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kv_format,kv_scale,dtype", [
    ("auto", None, np.float32), ("auto", None, np.float16), ("fp8_e4m3", 1 / 32, None),
    ("fp8_e4m3_token", None, None), ("fp8_ds_mla", None, None)])
@pytest.mark.parametrize("Sq,causal", [(1, False), (3, True), (2, False)])
def test_decode_matches_brute_force(rng, kv_format, kv_scale, dtype, Sq, causal):
    L, R, N, ps = 128, 8, 2, 16
    seq_lens = [0, 1, 15, 16, 17, 33] if not causal else [3, 4, 15, 16, 17, 33]
    cache = ref.make_paged_cache(rng, seq_lens, ps, L, R, kv_format=kv_format, dtype=dtype or np.float32,
                                 kv_scale=kv_scale)
    q = rng.standard_normal((len(seq_lens), Sq, N, L + R)).astype(np.float32)
    scale = 0.11
    args = (q, cache.kv_cache, cache.block_table, cache.seq_lens, L, scale, causal, kv_format, kv_scale)
    out, lse = ref.decode_ref(*args)
    assert out.dtype == np.float32 and lse.dtype == np.float32
    assert out.shape == (len(seq_lens), Sq, N, L) and lse.shape == (len(seq_lens), N, Sq)
    b_out, b_lse = brute_decode(*args)
    np.testing.assert_allclose(out, b_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(lse, b_lse, rtol=RTOL, atol=ATOL)
    assert np.all(np.isfinite(out))


def test_decode_known_values():
    L, R = 4, 2
    cache = np.full((3, 4, L + R), np.nan, np.float32)
    row = np.float32([1, 2, 3, 4, 5, 6])
    cache[2, 0] = row
    cache[1, 0] = cache[1, 1] = row
    q = np.ones((3, 1, 1, L + R), np.float32)
    block_table = np.array([[2, 0], [1, 0], [0, 0]], np.int32)
    out, lse = ref.decode_ref(q, cache, block_table, np.int32([1, 2, 0]), L, 0.5)
    np.testing.assert_allclose(out[0, 0, 0], row[:L])
    np.testing.assert_allclose(lse[0, 0, 0], 0.5 * row.sum(), rtol=1e-7)
    np.testing.assert_allclose(out[1, 0, 0], row[:L])
    np.testing.assert_allclose(lse[1, 0, 0], 0.5 * row.sum() + np.log(2), rtol=1e-7)
    np.testing.assert_array_equal(out[2], 0.0)
    assert lse[2, 0, 0] == -np.inf


def test_decode_causal_rows_that_see_nothing(rng):
    """Row i of a causal request with S < Sq sees S - (Sq-1-i) positions, possibly none."""
    cache = ref.make_paged_cache(rng, [2], 16, 8, 4)
    q = rng.standard_normal((1, 4, 2, 12)).astype(np.float32)
    out, lse = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, 8, 0.3, causal=True)
    assert np.all(lse[0, :, :2] == -np.inf) and np.all(out[0, :2] == 0)
    one, one_lse = ref.decode_ref(q[:, 2:3], cache.kv_cache, cache.block_table, np.int32([1]), 8, 0.3)
    np.testing.assert_allclose(out[:, 2:3], one, rtol=RTOL)
    np.testing.assert_allclose(lse[:, :, 2:3], one_lse, rtol=RTOL)


@pytest.mark.parametrize("num_splits", [1, 2, 3, 4, 7, 64])
@pytest.mark.parametrize("Sq,causal", [(1, False), (4, True), (3, False)])
def test_split_decode_matches_single_pass(rng, num_splits, Sq, causal):
    L, R, N, ps = 64, 16, 3, 16
    seq_lens = [0, 5, 16, 17, 100] if not causal else [4, 5, 16, 17, 100]
    cache = ref.make_paged_cache(rng, seq_lens, ps, L, R)
    q = rng.standard_normal((len(seq_lens), Sq, N, L + R)).astype(np.float32)
    args = (q, cache.kv_cache, cache.block_table, cache.seq_lens, L, 0.2, causal)
    out, lse = ref.decode_ref(*args)
    s_out, s_lse = ref.decode_split_ref(*args, num_splits=num_splits)
    np.testing.assert_allclose(s_out, out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(s_lse, lse, rtol=RTOL, atol=ATOL)


def test_split_ranges():
    assert ref.split_ranges(10, 3) == [(0, 4), (4, 8), (8, 10)]
    assert ref.split_ranges(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert ref.split_ranges(0, 2) == [(0, 0), (0, 0)]


def test_decode_never_reads_outside_the_request(rng):
    """Poisoned spare pages, page tails and stale block-table entries must not reach the output."""
    cache = ref.make_paged_cache(rng, [1, 15, 16, 17], 16, 32, 8, cols=4)
    assert np.isnan(cache.kv_cache).any()
    q = rng.standard_normal((4, 1, 2, 40)).astype(np.float32)
    out, lse = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, 32, 0.1)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(lse))


def test_make_paged_cache_layout(rng):
    seq_lens = [0, 1, 16, 17, 40]
    cache = ref.make_paged_cache(rng, seq_lens, 16, 8, 4, num_pages=12, cols=4)
    assert cache.kv_cache.shape == (12, 16, 12) and cache.block_table.shape == (5, 4)
    assert cache.block_table.dtype == np.int32 and cache.seq_lens.dtype == np.int32
    used = [cache.block_table[b, p] for b, s in enumerate(seq_lens) for p in range(-(-s // 16))]
    assert len(set(used)) == len(used) == 7
    for b, s in enumerate(seq_lens):
        for p in range(-(-s // 16), 4):
            assert cache.block_table[b, p] not in used and np.isnan(cache.kv_cache[cache.block_table[b, p]]).all()
        rows = cache.kv_cache.reshape(-1, 12)[cache.slots(b, np.arange(s))]
        np.testing.assert_array_equal(rows, cache.latent(b))
    written = sum(seq_lens)
    assert np.count_nonzero(~np.isnan(cache.kv_cache[..., 0])) == written
    fp8 = ref.make_paged_cache(rng, seq_lens, 16, 128, 4, kv_format="fp8_e4m3_token", num_pages=12)
    assert fp8.kv_cache.dtype == np.uint8
    assert np.count_nonzero(np.all(fp8.kv_cache == 0x7F, axis=-1)) == 12 * 16 - written


@pytest.mark.parametrize("kv_format,kv_scale", FP8_FORMATS_NORMAL)
def test_fp8_decode_close_to_float_decode(rng, kv_format, kv_scale):
    """Decode over an fp8 cache stays within ref.FP8_OUT_TOL (relative to the largest |value|) and
    ref.FP8_LSE_TOL of decode over the unquantised rows; this is the budget test_api.py holds mla to."""
    L, R, N = 512, 64, 16
    seq_lens = [2, 64, 65, 700]
    q = rng.standard_normal((4, 2, N, L + R)).astype(np.float32)
    scale = 192**-0.5
    cache = ref.make_paged_cache(rng, seq_lens, 64, L, R, kv_format=kv_format, kv_scale=kv_scale)
    out, lse = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, L, scale, True,
                              kv_format, kv_scale)
    f_out, f_lse = ref.decode_ref(q, cache.unquantised(), cache.block_table, cache.seq_lens, L, scale, True)
    assert np.max(np.abs(out - f_out)) <= ref.FP8_OUT_TOL * np.abs(np.concatenate(cache.kv_c)).max()
    assert np.max(np.abs(lse - f_lse)) <= ref.FP8_LSE_TOL


@pytest.mark.parametrize("kv_format,kv_scale", FP8_FORMATS_NORMAL)
def test_fp8_prefill_close_to_float_prefill(rng, kv_format, kv_scale):
    """Same budget for prefill, relative to the largest up-projected |v|. New tokens are never
    quantised, so only the context contributes error."""
    L, R, N, P, V = 512, 64, 16, 128, 128
    case = ref.make_prefill_case(rng, [3, 17, 1], [64, 0, 300], 64, L, R, N, P, V, kv_format=kv_format,
                                 kv_scale=kv_scale)
    cache = case.cache
    args = (case.q, case.kv_c, case.k_pe, case.kv_b_proj)
    tail = (case.query_start_loc, case.seq_lens, (P + R) ** -0.5, V)
    out = ref.prefill_ref(*args, cache.kv_cache, cache.block_table, *tail, kv_format, kv_scale)
    f_out = ref.prefill_ref(*args, cache.unquantised(), cache.block_table, *tail)
    _, v = ref.up_proj_kv_ref(np.concatenate(cache.kv_c), case.kv_b_proj, N, P, V)
    assert np.max(np.abs(out - f_out)) <= ref.FP8_OUT_TOL * np.abs(v).max()
    # Only context rows went through fp8: a request without context is bit-identical.
    np.testing.assert_array_equal(out[3:20], f_out[3:20])


def test_prefill_ignores_new_token_cache_slots(rng):
    case = ref.make_prefill_case(rng, [3, 2], [5, 16], 16, 32, 8, 2, 4, 3)
    args = (case.q, case.kv_c, case.k_pe, case.kv_b_proj)
    tail = (case.query_start_loc, case.seq_lens, 0.3, 3)
    out = ref.prefill_ref(*args, case.cache.kv_cache, case.cache.block_table, *tail)
    poisoned = case.cache.kv_cache.copy()
    poisoned.reshape(-1, 40)[case.new_token_slots()] = np.nan
    np.testing.assert_array_equal(ref.prefill_ref(*args, poisoned, case.cache.block_table, *tail), out)


# ---------------------------------------------------------------------------------------------------
# MHA and prefill
# ---------------------------------------------------------------------------------------------------


def test_mha_matches_brute_force(rng):
    N, Dqk, V = 2, 5, 3
    q_lens, k_lens = [3, 1, 4, 2], [5, 1, 2, 0]
    cu_q, cu_k = np.cumsum([0] + q_lens), np.cumsum([0] + k_lens)
    q = rng.standard_normal((cu_q[-1], N, Dqk))
    k = rng.standard_normal((cu_k[-1], N, Dqk))
    v = rng.standard_normal((cu_k[-1], N, V))
    for causal in (False, True):
        out, lse = ref.mha_ref(q, k, v, cu_q, cu_k, causal, 0.4)
        for b in range(len(q_lens)):
            for i in range(q_lens[b]):
                seen = max(min(k_lens[b] - q_lens[b] + i + 1, k_lens[b]), 0) if causal else k_lens[b]
                t = cu_q[b] + i
                for n in range(N):
                    keys = range(cu_k[b], cu_k[b] + seen)
                    o, l = scalar_softmax([0.4 * float(q[t, n] @ k[j, n]) for j in keys],
                                          [list(v[j, n]) for j in keys])
                    np.testing.assert_allclose(out[t, n], o if o is not None else 0.0, rtol=RTOL, atol=ATOL)
                    np.testing.assert_allclose(lse[n, t], l, rtol=RTOL, atol=ATOL)


def unpack(case):
    return case.cache, case.q, case.kv_c, case.k_pe, case.kv_b_proj, case.query_start_loc


@pytest.mark.parametrize("kv_format,kv_scale", [("auto", None), ("fp8_e4m3", 1 / 32), ("fp8_e4m3_token", None)])
def test_prefill_matches_brute_force(rng, kv_format, kv_scale):
    L, R, N, P, V, ps = 8, 4, 2, 3, 2, 4
    q_lens, ctx_lens = [3, 1, 2], [0, 6, 4]
    cache, q, kv_c, k_pe, w, qsl = unpack(ref.make_prefill_case(rng, q_lens, ctx_lens, ps, L, R, N, P, V,
                                                                 kv_format=kv_format, kv_scale=kv_scale))
    scale = (P + R) ** -0.5
    out = ref.prefill_ref(q, kv_c, k_pe, w, cache.kv_cache, cache.block_table, qsl, cache.seq_lens, scale, V,
                          kv_format, kv_scale)
    for b in range(len(q_lens)):
        ctx = scalar_request_rows(cache.kv_cache, cache.block_table[b], 0, ctx_lens[b], kv_format, L, R, kv_scale)
        new = [list(map(float, kv_c[t])) + list(map(float, k_pe[t])) for t in range(qsl[b], qsl[b + 1])]
        keys = [(brute_up_proj(r[:L], w, N, P, V), r[L:]) for r in ctx + new]
        for i in range(q_lens[b]):
            t = qsl[b] + i
            seen = keys[: ctx_lens[b] + i + 1]
            for n in range(N):
                scores = [scale * sum(float(q[t, n, d]) * (kn[n] + pe)[d] for d in range(P + R))
                          for (kn, _), pe in seen]
                o, _ = scalar_softmax(scores, [vv[n] for (_, vv), _ in seen])
                np.testing.assert_allclose(out[t, n], o, rtol=RTOL, atol=ATOL)


def chunked_prefill(q, kv_c, k_pe, w, cache, qsl, ctx_lens, scale, N, P, V, chunk):
    """The compiler's algorithm written with reference pieces: context in chunks of `chunk` rows, each
    gathered, up-projected and attended non-causally, merged; then merged with the causal new-token
    attention."""
    L, R = cache.L, cache.R
    out = np.zeros((q.shape[0], N, V), np.float32)
    for b in range(len(ctx_lens)):
        qs, qe = qsl[b], qsl[b + 1]
        qb = q[qs:qe]
        new_lat = np.concatenate([kv_c[qs:qe], k_pe[qs:qe]], axis=1)
        kn, v = ref.up_proj_kv_ref(new_lat[:, :L], w, N, P, V)
        k = np.concatenate([kn, np.broadcast_to(new_lat[:, None, L:], kn.shape[:2] + (R,))], axis=-1)
        acc_o, acc_l = ref.mha_ref(qb, k, v, [0, qe - qs], [0, qe - qs], True, scale)
        for start in range(0, ctx_lens[b], chunk):
            n = min(chunk, ctx_lens[b] - start)
            rows = ref.gather_cache_ref(cache.kv_cache, cache.kv_format, cache.block_table[b:b + 1], [start],
                                        [0, n], L, R, cache.kv_scale)
            kn, v = ref.up_proj_kv_ref(rows[:, :L], w, N, P, V)
            k = np.concatenate([kn, np.broadcast_to(rows[:, None, L:], kn.shape[:2] + (R,))], axis=-1)
            o, l = ref.mha_ref(qb, k, v, [0, qe - qs], [0, n], False, scale)
            acc_o, acc_l = ref.merge_states_ref(acc_o, acc_l, o, l)
        out[qs:qe] = acc_o
    return out


@pytest.mark.parametrize("chunk", [1, 5, 16, 1000])
def test_prefill_equals_chunked_composition(rng, chunk):
    L, R, N, P, V, ps = 64, 16, 3, 8, 5, 16
    q_lens, ctx_lens = [5, 1, 7, 2], [0, 37, 16, 70]
    cache, q, kv_c, k_pe, w, qsl = unpack(ref.make_prefill_case(rng, q_lens, ctx_lens, ps, L, R, N, P, V))
    scale = (P + R) ** -0.5
    out = ref.prefill_ref(q, kv_c, k_pe, w, cache.kv_cache, cache.block_table, qsl, cache.seq_lens, scale, V)
    got = chunked_prefill(q, kv_c, k_pe, w, cache, qsl, ctx_lens, scale, N, P, V, chunk)
    np.testing.assert_allclose(got, out, rtol=1e-5, atol=1e-6)


def test_prefill_equals_absorbed_decode(rng):
    """Primer section 5 vs 7: absorbing W_UK into q and W_UV into the output gives the same attention as
    up-projecting the cache, when the new tokens are in the cache too (float cache, so bit-equal rows)."""
    L, R, N, P, V, ps, Sq = 64, 16, 3, 8, 5, 16, 3
    ctx_lens = [0, 13, 16, 40]
    cache, q, kv_c, k_pe, w, qsl = unpack(ref.make_prefill_case(rng, [Sq] * 4, ctx_lens, ps, L, R, N, P, V))
    scale = (P + R) ** -0.5
    out = ref.prefill_ref(q, kv_c, k_pe, w, cache.kv_cache, cache.block_table, qsl, cache.seq_lens, scale, V)
    w_uk_t, w_uv = ref.split_kv_b_proj_ref(w, N, P, V)
    qa = ref.absorb_q_ref(q, w_uk_t).reshape(4, Sq, N, L + R)
    o_lat, _ = ref.decode_ref(qa, cache.kv_cache, cache.block_table, cache.seq_lens, L, scale, causal=True)
    absorbed = ref.up_proj_out_ref(o_lat.reshape(4 * Sq, N, L), w_uv)
    np.testing.assert_allclose(absorbed, out.reshape(4 * Sq, N * V), rtol=1e-5, atol=1e-5)


def test_gather_cache_matches_loops(rng):
    L, R = 128, 8
    cache = ref.make_paged_cache(rng, [40, 3, 70], 16, L, R, kv_format="fp8_ds_mla")
    starts, counts = [16, 0, 33], [24, 3, 37]
    cu = np.cumsum([0] + counts)
    got = ref.gather_cache_ref(cache.kv_cache, "fp8_ds_mla", cache.block_table, starts, cu, L, R)
    expected = sum((scalar_request_rows(cache.kv_cache, cache.block_table[b], starts[b], counts[b],
                                        "fp8_ds_mla", L, R, None) for b in range(3)), [])
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=0)


def test_dequant_cache_matches_gather(rng):
    cache = ref.make_paged_cache(rng, [20], 16, 64, 16, kv_format="fp8_e4m3", kv_scale=0.05)
    full = ref.dequant_cache_ref(cache.kv_cache, "fp8_e4m3", 64, 16, 0.05)
    rows = full.reshape(-1, 80)[cache.slots(0, np.arange(20))]
    np.testing.assert_array_equal(rows, ref.gather_cache_ref(cache.kv_cache, "fp8_e4m3", cache.block_table, [0],
                                                             [0, 20], 64, 16, 0.05))


def test_flops_bytes_deepseek():
    flops, nbytes = ref.decode_flops_bytes([4096] * 2, 1, 128, 512, 64, row_bytes=1152, act_bytes=2)
    assert flops == 2 * 1 * 8192 * 128 * (576 + 512)
    assert nbytes == 8192 * 1152 + 2 * 128 * 576 * 2 + 2 * 128 * 512 * 2
