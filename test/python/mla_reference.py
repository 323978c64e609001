"""Independent numpy reference for every `mla` op, used only by the tests.

The semantics follow the MLA primer (docs/Primer.md) and the row formats the compiler implements. The
reference deliberately takes the simplest route to each answer (whole-sequence softmax in float64, no
tiling, no online softmax) so that it shares no algorithmic structure with the compiled kernels; the only
place it mirrors the compiler's arithmetic is quantisation, which is computed in float32 because the
stored bytes are part of the contract.

Conventions:
  L  kv_lora_rank (latent width)     R  qk_rope_head_dim     D = L + R  cache row width
  N  query heads                     P  qk_nope_head_dim     V  v_head_dim
Layouts of log-sum-exp outputs: decode `[B, N, Sq]`; merge/MHA `[N, T]`. LSE is a natural log, -inf for
a query row that saw no keys (its output is then exactly 0).
"""

from dataclasses import dataclass

import numpy as np

KV_FORMATS = ("auto", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla")

E4M3_MAX = 448.0
# Floor on per-token / per-tile amax so an all-zero row still gets a usable (non-zero) scale.
AMAX_FLOOR = 1e-4
# fp8_ds_mla quantises the latent in tiles of this many entries, one float32 scale each.
DS_MLA_TILE = 128
_E4M3_NAN_CODE = 0x7F

# End-to-end budget for attention over an fp8 cache versus the same rows unquantised, with N(0,1)
# values, N(0,1) queries and scale (P+R)^-0.5. e4m3 keeps 3 mantissa bits, so each stored value is
# within 2^-4 relative (half an ulp): outputs, being convex combinations of values, stay within 2^-4 of
# the largest |value| (observed ~2^-5), and LSE moves by the largest score error, a few hundredths per
# key and ~0.13 at worst over thousands of keys.
FP8_OUT_TOL = 2.0**-4
FP8_LSE_TOL = 0.25


# ---------------------------------------------------------------------------------------------------
# float8 E4M3FN and bfloat16 codecs
# ---------------------------------------------------------------------------------------------------


def _build_e4m3_table():
    """Values of all 256 E4M3FN codes, derived from the bit fields (bias 7, no infinities)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    mant = codes & 0x7
    # Subnormals (exp == 0) have no implicit leading one and the exponent of the smallest normal.
    mag = np.where(exp == 0, mant / 8.0 * 2.0**-6, (1.0 + mant / 8.0) * np.exp2(exp - 7.0))
    values = sign * mag
    values[(exp == 0xF) & (mant == 0x7)] = np.nan
    return values.astype(np.float32)


E4M3_TABLE = _build_e4m3_table()
# Non-negative finite codes 0x00..0x7E are increasing in value, so a sorted search finds neighbours.
_E4M3_POSITIVE = E4M3_TABLE[:0x7F].astype(np.float64)


def e4m3_to_f32(codes):
    """Decode uint8 E4M3FN codes to float32 (0x7F / 0xFF decode to NaN)."""
    return E4M3_TABLE[np.asarray(codes, dtype=np.uint8)]


def f32_to_e4m3(x):
    """Encode float32 values as E4M3FN codes.

    Round-to-nearest-even; magnitudes beyond 448 (infinities included, i.e. "satfinite") clamp to 448
    because E4M3FN has no infinity and caches must not silently acquire NaNs; NaN encodes as 0x7F with
    its sign kept.
    """
    x = np.asarray(x, dtype=np.float32)
    mag = np.abs(x).astype(np.float64)
    is_nan = np.isnan(mag)
    mag = np.minimum(np.where(is_nan, 0.0, mag), E4M3_MAX)
    hi = np.clip(np.searchsorted(_E4M3_POSITIVE, mag, side="left"), 0, 0x7E)
    lo = np.maximum(hi - 1, 0)
    # Both differences are exact in float64, so an exact tie is detected exactly.
    d_lo = mag - _E4M3_POSITIVE[lo]
    d_hi = _E4M3_POSITIVE[hi] - mag
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(take_hi, hi, lo)
    code = np.where(is_nan, _E4M3_NAN_CODE, code)
    sign = np.signbit(x).astype(np.int64) << 7
    return (code | sign).astype(np.uint8)


def f32_to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round-to-nearest-even; NaN stays a quiet NaN."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    # Typed constants: numpy would promote uint64 with a Python int to float64.
    u = lambda c: np.uint64(c)
    rounded = (bits + u(0x7FFF) + ((bits >> u(16)) & u(1))) >> u(16)
    quiet_nan = (bits >> u(16)) | u(0x40)
    out = np.where(np.isnan(np.asarray(x, dtype=np.float32)), quiet_nan, rounded)
    return out.astype(np.uint16)


def bf16_bits_to_f32(bits):
    """bfloat16 bit patterns (uint16) -> float32 (exact)."""
    wide = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return np.asarray(wide, dtype=np.uint32).view(np.float32)


def _f32_to_le_bytes(values):
    """float32 array [...] -> uint8 [..., 4] little-endian."""
    values = np.ascontiguousarray(np.asarray(values, dtype="<f4"))
    return values.view(np.uint8).reshape(values.shape + (4,))


def _le_bytes_to_f32(raw):
    """uint8 [..., 4k] little-endian -> float32 [..., k]."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    return raw.view("<f4").astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Row formats
# ---------------------------------------------------------------------------------------------------


def _check_format(kv_format, L, kv_scale):
    if kv_format not in KV_FORMATS:
        raise ValueError(f"unknown kv_format {kv_format!r}")
    if kv_format == "fp8_e4m3" and kv_scale is None:
        raise ValueError("kv_format 'fp8_e4m3' needs kv_scale")
    if kv_format == "fp8_ds_mla" and L % DS_MLA_TILE != 0:
        raise ValueError(f"kv_format 'fp8_ds_mla' needs L % {DS_MLA_TILE} == 0, got L={L}")


def kv_row_bytes(kv_format, L, R, dtype=np.float32):
    """Bytes one cache row occupies (dtype only matters for 'auto')."""
    _check_format(kv_format, L, kv_scale=1.0)
    D = L + R
    if kv_format == "auto":
        return D * np.dtype(dtype).itemsize
    if kv_format == "fp8_e4m3":
        return D
    if kv_format == "fp8_e4m3_token":
        return D + 8
    return L + 4 * (L // DS_MLA_TILE) + 2 * R


def kv_row_width(kv_format, L, R):
    """Last-axis length of the cache array for a format (elements for 'auto', bytes otherwise)."""
    if kv_format == "auto":
        return L + R
    return kv_row_bytes(kv_format, L, R)


def encode_rows(rows, kv_format, L, R, cache_dtype=np.float32, kv_scale=None):
    """Quantise float rows [M, D] into the stored representation [M, row width] of `kv_format`.

    Arithmetic on the way to fp8 is float32 because the compiler stores exactly these bytes.
    """
    _check_format(kv_format, L, kv_scale)
    rows = np.asarray(rows)
    if rows.shape[-1] != L + R:
        raise ValueError(f"rows have width {rows.shape[-1]}, expected L+R={L + R}")
    if kv_format == "auto":
        return rows.astype(cache_dtype)
    x = rows.astype(np.float32)
    M = x.shape[0]
    if kv_format == "fp8_e4m3":
        return f32_to_e4m3(x / np.float32(kv_scale))
    if kv_format == "fp8_e4m3_token":
        lat, rope = x[:, :L], x[:, L:]
        s0 = np.maximum(np.abs(lat).max(axis=1), np.float32(AMAX_FLOOR)) / np.float32(E4M3_MAX)
        s1 = np.maximum(np.abs(rope).max(axis=1), np.float32(AMAX_FLOOR)) / np.float32(E4M3_MAX)
        out = np.empty((M, L + R + 8), dtype=np.uint8)
        out[:, :L] = f32_to_e4m3(lat / s0[:, None])
        out[:, L : L + R] = f32_to_e4m3(rope / s1[:, None])
        out[:, L + R : L + R + 4] = _f32_to_le_bytes(s0)
        out[:, L + R + 4 :] = _f32_to_le_bytes(s1)
        return out
    # fp8_ds_mla
    tiles = L // DS_MLA_TILE
    lat = x[:, :L].reshape(M, tiles, DS_MLA_TILE)
    scales = np.maximum(np.abs(lat).max(axis=2), np.float32(AMAX_FLOOR)) / np.float32(E4M3_MAX)
    out = np.empty((M, kv_row_bytes(kv_format, L, R)), dtype=np.uint8)
    out[:, :L] = f32_to_e4m3(lat / scales[:, :, None]).reshape(M, L)
    out[:, L : L + 4 * tiles] = _f32_to_le_bytes(scales).reshape(M, 4 * tiles)
    bf16 = f32_to_bf16_bits(x[:, L:])
    out[:, L + 4 * tiles :] = np.ascontiguousarray(bf16.astype("<u2")).view(np.uint8).reshape(M, 2 * R)
    return out


def decode_rows(stored, kv_format, L, R, kv_scale=None):
    """Stored rows [..., row width] -> float64 [..., D] exactly as a reader dequantises them."""
    _check_format(kv_format, L, kv_scale)
    stored = np.asarray(stored)
    D = L + R
    if kv_format == "auto":
        if stored.shape[-1] != D:
            raise ValueError(f"float cache rows have width {stored.shape[-1]}, expected {D}")
        return stored.astype(np.float64)
    if stored.dtype != np.uint8:
        raise ValueError(f"kv_format {kv_format!r} needs a uint8 cache, got {stored.dtype}")
    if stored.shape[-1] != kv_row_bytes(kv_format, L, R):
        raise ValueError(
            f"{kv_format} rows have {stored.shape[-1]} bytes, expected {kv_row_bytes(kv_format, L, R)}"
        )
    lead = stored.shape[:-1]
    if kv_format == "fp8_e4m3":
        return e4m3_to_f32(stored).astype(np.float64) * float(kv_scale)
    out = np.empty(lead + (D,), dtype=np.float64)
    if kv_format == "fp8_e4m3_token":
        s = _le_bytes_to_f32(stored[..., D : D + 8]).astype(np.float64)
        out[..., :L] = e4m3_to_f32(stored[..., :L]) * s[..., 0:1]
        out[..., L:] = e4m3_to_f32(stored[..., L:D]) * s[..., 1:2]
        return out
    tiles = L // DS_MLA_TILE
    scales = _le_bytes_to_f32(stored[..., L : L + 4 * tiles]).astype(np.float64)
    lat = e4m3_to_f32(stored[..., :L]).astype(np.float64).reshape(lead + (tiles, DS_MLA_TILE))
    out[..., :L] = (lat * scales[..., None]).reshape(lead + (L,))
    rope_bits = np.ascontiguousarray(stored[..., L + 4 * tiles :]).view("<u2")
    out[..., L:] = bf16_bits_to_f32(rope_bits)
    return out


def _split_cache_dims(kv_cache, kv_format, L, R):
    pages, page_size, width = kv_cache.shape
    if width != kv_row_width(kv_format, L, R):
        raise ValueError(f"cache rows have width {width}, expected {kv_row_width(kv_format, L, R)}")
    return pages, page_size


def _flatten_k_pe(k_pe):
    k_pe = np.asarray(k_pe)
    if k_pe.ndim == 3:
        if k_pe.shape[1] != 1:
            raise ValueError(f"k_pe must be [T, R] or [T, 1, R], got {k_pe.shape}")
        k_pe = k_pe[:, 0, :]
    return k_pe


def cache_write_ref(kv_c, k_pe, kv_cache, slot_mapping, kv_format="auto", kv_scale=None):
    """Return a copy of `kv_cache` with row concat(kv_c[t], k_pe[t]) stored at slot_mapping[t].

    Negative slots are padding tokens and write nothing.
    """
    kv_c = np.asarray(kv_c)
    k_pe = _flatten_k_pe(k_pe)
    L, R = kv_c.shape[1], k_pe.shape[1]
    pages, page_size = _split_cache_dims(kv_cache, kv_format, L, R)
    slots = np.asarray(slot_mapping).astype(np.int64)
    if slots.shape != (kv_c.shape[0],) or k_pe.shape[0] != kv_c.shape[0]:
        raise ValueError("kv_c, k_pe and slot_mapping disagree on the token count")
    if np.any(slots >= pages * page_size):
        raise ValueError("slot beyond the cache")
    out = kv_cache.copy()
    keep = slots >= 0
    rows = np.concatenate([kv_c, k_pe], axis=1)[keep]
    stored = encode_rows(rows, kv_format, L, R, cache_dtype=kv_cache.dtype, kv_scale=kv_scale)
    flat = out.reshape(pages * page_size, out.shape[2])
    flat[slots[keep]] = stored
    return out


def dequant_cache_ref(kv_cache, kv_format, L, R, kv_scale=None):
    """Whole cache as float32 [pages, page_size, D] (poisoned slots decode to whatever they hold)."""
    _split_cache_dims(kv_cache, kv_format, L, R)
    return decode_rows(kv_cache, kv_format, L, R, kv_scale).astype(np.float32)


def _read_positions(kv_cache, block_row, start, count):
    """Raw stored rows of logical positions [start, start+count) of one request.

    Only the pages those positions live in are indexed, so poisoned pages and stale block-table entries
    past the request's length are never touched.
    """
    page_size = kv_cache.shape[1]
    pos = np.arange(start, start + count, dtype=np.int64)
    pages = np.asarray(block_row, dtype=np.int64)[pos // page_size]
    if np.any((pages < 0) | (pages >= kv_cache.shape[0])):
        raise ValueError("block_table entry out of range for a used page")
    return kv_cache[pages, pos % page_size]


def gather_cache_ref(kv_cache, kv_format, block_table, starts, cu_rows, L, R, kv_scale=None):
    """Dequantised rows [cu_rows[-1], D] float32: request b contributes positions
    starts[b] .. starts[b] + (cu_rows[b+1] - cu_rows[b]) - 1 in order."""
    _split_cache_dims(kv_cache, kv_format, L, R)
    cu_rows = np.asarray(cu_rows, dtype=np.int64)
    pieces = []
    for b in range(len(starts)):
        raw = _read_positions(kv_cache, block_table[b], int(starts[b]), int(cu_rows[b + 1] - cu_rows[b]))
        pieces.append(decode_rows(raw, kv_format, L, R, kv_scale))
    out = np.concatenate(pieces, axis=0) if pieces else np.zeros((0, L + R))
    return out.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Weight preparation and the batched head products (primer section 4 and 5 steps 1, 4)
# ---------------------------------------------------------------------------------------------------


def split_kv_b_proj_ref(kv_b_proj, N, P, V):
    """kv_b_proj [N*(P+V), L] -> (W_UK_T [N, P, L], W_UV' [N, L, V]) as float32."""
    w = np.asarray(kv_b_proj, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != N * (P + V):
        raise ValueError(f"kv_b_proj must be [{N * (P + V)}, L], got {w.shape}")
    L = w.shape[1]
    per_head = w.T.reshape(L, N, P + V)
    w_uk, w_uv = per_head[..., :P], per_head[..., P:]
    w_uk_t = w_uk.transpose(1, 2, 0)
    w_uv_t = w_uv.transpose(1, 0, 2)
    return w_uk_t.astype(np.float32), w_uv_t.astype(np.float32)


def absorb_q_ref(q, w_uk_t):
    """q [T, N, P+R] -> [T, N, L+R]: the nope part moves into latent space, the rope part is kept."""
    q = np.asarray(q, dtype=np.float64)
    w = np.asarray(w_uk_t, dtype=np.float64)
    P = w.shape[1]
    q_lat = (q[..., :P].transpose(1, 0, 2) @ w).transpose(1, 0, 2)
    return np.concatenate([q_lat, q[..., P:]], axis=-1).astype(np.float32)


def up_proj_out_ref(o, w_uv):
    """Latent attention output o [T, N, L] -> [T, N*V]."""
    o = np.asarray(o, np.float64).transpose(1, 0, 2)
    out = (o @ np.asarray(w_uv, np.float64)).transpose(1, 0, 2)
    return out.reshape(out.shape[0], -1).astype(np.float32)


def _up_proj_kv64(latent, kv_b_proj, N, P, V):
    kv = np.asarray(latent, np.float64) @ np.asarray(kv_b_proj, np.float64).T
    kv = kv.reshape(kv.shape[0], N, P + V)
    return kv[..., :P], kv[..., P:]


def up_proj_kv_ref(latent, kv_b_proj, N, P, V):
    """latent [S, L] -> (k_nope [S, N, P], v [S, N, V]) float32, via kv = latent @ kv_b_proj^T."""
    k_nope, v = _up_proj_kv64(latent, kv_b_proj, N, P, V)
    return k_nope.astype(np.float32), v.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Softmax core and the LSE merge (primer section 6)
# ---------------------------------------------------------------------------------------------------


def _masked_softmax_attend(scores, values, visible):
    """Attention of pre-scaled `scores` [..., M, S] over `values` [..., S, H] with boolean `visible`
    (broadcastable to scores). Returns out [..., M, H] and lse [..., M] in float64; rows that see
    nothing get out 0 and lse -inf."""
    scores = np.asarray(scores, dtype=np.float64)
    visible = np.broadcast_to(visible, scores.shape)
    out_shape = scores.shape[:-1] + (values.shape[-1],)
    if scores.shape[-1] == 0:
        return np.zeros(out_shape), np.full(scores.shape[:-1], -np.inf)
    masked = np.where(visible, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    anchor = np.where(np.isfinite(row_max), row_max, 0.0)
    weights = np.where(visible, np.exp(masked - anchor), 0.0)
    total = weights.sum(axis=-1, keepdims=True)
    has_keys = total > 0
    out = (weights @ values) / np.where(has_keys, total, 1.0)
    lse = np.where(has_keys, anchor + np.log(np.where(has_keys, total, 1.0)), -np.inf)
    return out, lse[..., 0]


def combine_ref(partial_out, partial_lse):
    """Merge k partial attention states along axis 0.

    partial_out [k, ..., H], partial_lse [k, ...]. An LSE of +inf or -inf means "no contribution"
    (that piece's output is ignored whatever it holds); if nothing contributes, out 0 and lse -inf.
    Returns float64 (out, lse).
    """
    o = np.asarray(partial_out, dtype=np.float64)
    lse = np.asarray(partial_lse, dtype=np.float64)
    live = np.isfinite(lse)
    lse_live = np.where(live, lse, -np.inf)
    m = lse_live.max(axis=0)
    anchor = np.where(np.isfinite(m), m, 0.0)
    w = np.where(live, np.exp(lse_live - anchor), 0.0)
    total = w.sum(axis=0)
    any_live = total > 0
    # Zero the ignored pieces' outputs first: 0 * NaN would still poison the sum.
    num = (w[..., None] * np.where(live[..., None], o, 0.0)).sum(axis=0)
    out = num / np.where(any_live, total, 1.0)[..., None]
    out_lse = np.where(any_live, anchor + np.log(np.where(any_live, total, 1.0)), -np.inf)
    return out, out_lse


def merge_states_ref(out_a, lse_a, out_b, lse_b):
    """Two-way merge with the merge_attn_states layouts: out [T, N, H], lse [N, T]. float32 results."""
    lse_a = np.asarray(lse_a).T
    lse_b = np.asarray(lse_b).T
    out, lse = combine_ref(np.stack([out_a, out_b]), np.stack([lse_a, lse_b]))
    return out.astype(np.float32), lse.T.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Decode (primer section 5): MQA over the latent cache
# ---------------------------------------------------------------------------------------------------


def _check_decode_inputs(q, block_table, seq_lens, kv_cache):
    # Only what the reference cannot compute through; causal q_len > seq_len is deliberately allowed
    # here (those rows see nothing) so the reference stays total while the API rejects it.
    if block_table.shape[0] != q.shape[0] or len(seq_lens) != q.shape[0]:
        raise ValueError("batch sizes of q, block_table and seq_lens differ")
    if np.any(np.asarray(seq_lens) > block_table.shape[1] * kv_cache.shape[1]):
        raise ValueError("seq_len beyond block_table capacity")


def _visible_counts(S, Sq, causal):
    """Number of leading cache positions each of the Sq query rows may attend to."""
    if not causal:
        return np.full(Sq, S, dtype=np.int64)
    return np.maximum(S - (Sq - 1 - np.arange(Sq)), 0)


def _decode_request(qb, rows, head_dim_v, scale, visible_count, lo, hi):
    """One request, keys restricted to positions [lo, hi). qb [Sq, N, D] float64, rows [S, D] float64.
    Returns out [Sq, N, Hv], lse [N, Sq]."""
    keys = rows[lo:hi]
    pos = np.arange(lo, hi)
    scores = scale * (qb.transpose(1, 0, 2) @ keys.T)  # [N, Sq, S_piece]
    visible = pos[None, :] < visible_count[:, None]  # [Sq, S_piece]
    out, lse = _masked_softmax_attend(scores, keys[:, :head_dim_v], visible[None])
    return out.transpose(1, 0, 2), lse


def decode_ref(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal=False,
               kv_format="auto", kv_scale=None):
    """Absorbed MLA decode.

    q [B, Sq, N, D] (rope part last), cache as stored, block_table int [B, maxPages], seq_lens [B]
    (already counting the Sq new tokens). Returns out float32 [B, Sq, N, head_dim_v] and lse float32
    [B, N, Sq]. Causal row i of request b sees positions [0, S_b - Sq + i].
    """
    q = np.asarray(q)
    B, Sq, N, D = q.shape
    L, R = head_dim_v, D - head_dim_v
    _split_cache_dims(kv_cache, kv_format, L, R)
    _check_decode_inputs(q, block_table, seq_lens, kv_cache)
    out = np.zeros((B, Sq, N, head_dim_v))
    lse = np.full((B, N, Sq), -np.inf)
    for b in range(B):
        S = int(seq_lens[b])
        if S == 0:
            continue
        rows = decode_rows(_read_positions(kv_cache, block_table[b], 0, S), kv_format, L, R, kv_scale)
        out[b], lse[b] = _decode_request(q[b].astype(np.float64), rows, head_dim_v, softmax_scale,
                                         _visible_counts(S, Sq, causal), 0, S)
    return out.astype(np.float32), lse.astype(np.float32)


def decode_varlen_ref(q, kv_cache, block_table, seq_lens, query_start_loc, head_dim_v, softmax_scale,
                      causal=False, kv_format="auto", kv_scale=None):
    """Varlen absorbed MLA decode (speculative decoding with mixed draft lengths).

    q [T, N, D] packs the requests' query tokens: request b owns tokens
    query_start_loc[b] .. query_start_loc[b+1]-1 (q_b of them). Causal token i of request b sees
    positions [0, S_b - q_b + i]; otherwise all S_b. Returns out float32 [T, N, head_dim_v] and lse
    float32 [T, N] (token-major)."""
    q = np.asarray(q)
    qsl = np.asarray(query_start_loc, dtype=np.int64)
    T, N, D = q.shape
    L, R = head_dim_v, D - head_dim_v
    _split_cache_dims(kv_cache, kv_format, L, R)
    if len(qsl) != len(seq_lens) + 1 or qsl[0] != 0 or qsl[-1] != T or np.any(np.diff(qsl) < 0):
        raise ValueError("query_start_loc must be [B+1], from 0, non-decreasing, ending at T")
    out = np.zeros((T, N, head_dim_v))
    lse = np.full((T, N), -np.inf)
    for b, S in enumerate(int(s) for s in seq_lens):
        first, last = int(qsl[b]), int(qsl[b + 1])
        if S == 0 or first == last:
            continue
        rows = decode_rows(_read_positions(kv_cache, block_table[b], 0, S), kv_format, L, R, kv_scale)
        keys = rows[:S]
        for t in range(first, last):
            i, qb = t - first, last - first
            seen = S - (qb - 1 - i) if causal else S
            if seen <= 0:
                continue
            qt = q[t].astype(np.float64)  # [N, D]
            scores = softmax_scale * (qt @ keys[:seen].T)  # [N, seen]
            m = scores.max(axis=1, keepdims=True)
            w = np.exp(scores - m)
            total = w.sum(axis=1, keepdims=True)
            out[t] = (w @ keys[:seen, :head_dim_v]) / total
            lse[t] = (m + np.log(total))[:, 0]
    return out.astype(np.float32), lse.astype(np.float32)


def split_ranges(S, num_splits):
    """The contiguous pieces of [0, S) split-KV uses: chunk c = ceil(S / num_splits); trailing pieces
    may be empty."""
    if num_splits < 1:
        raise ValueError("num_splits must be >= 1")
    c = -(-S // num_splits)
    return [(min(s * c, S), min((s + 1) * c, S)) for s in range(num_splits)]


def decode_split_ref(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal=False,
                     kv_format="auto", kv_scale=None, *, num_splits):
    """decode_ref computed as `num_splits` independently normalised pieces per request, merged with
    combine_ref. Same outputs and layouts as decode_ref."""
    q = np.asarray(q)
    B, Sq, N, D = q.shape
    L, R = head_dim_v, D - head_dim_v
    _split_cache_dims(kv_cache, kv_format, L, R)
    _check_decode_inputs(q, block_table, seq_lens, kv_cache)
    out = np.zeros((B, Sq, N, head_dim_v))
    lse = np.full((B, N, Sq), -np.inf)
    for b in range(B):
        S = int(seq_lens[b])
        rows = decode_rows(_read_positions(kv_cache, block_table[b], 0, S), kv_format, L, R, kv_scale)
        visible = _visible_counts(S, Sq, causal)
        parts = [_decode_request(q[b].astype(np.float64), rows, head_dim_v, softmax_scale, visible, lo, hi)
                 for lo, hi in split_ranges(S, num_splits)]
        o_b, lse_b = combine_ref(np.stack([p[0] for p in parts]),
                                 np.stack([p[1].T for p in parts]))  # lse pieces as [Sq, N]
        out[b], lse[b] = o_b, lse_b.T
    return out.astype(np.float32), lse.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Prefill (primer section 7): up-projected MHA
# ---------------------------------------------------------------------------------------------------


def _mha_request(qb, kb, vb, causal, scale):
    """qb [Tq, N, Dqk], kb [Tk, N, Dqk], vb [Tk, N, V] float64 -> out [Tq, N, V], lse [N, Tq].
    Causal masking is bottom-right aligned: row i sees keys [0, Tk - Tq + i]."""
    Tq, Tk = qb.shape[0], kb.shape[0]
    scores = scale * (qb.transpose(1, 0, 2) @ kb.transpose(1, 2, 0))  # [N, Tq, Tk]
    if causal:
        visible = np.arange(Tk)[None, :] <= (Tk - Tq + np.arange(Tq))[:, None]
    else:
        visible = np.ones((Tq, Tk), dtype=bool)
    out, lse = _masked_softmax_attend(scores, vb.transpose(1, 0, 2), visible[None])
    return out.transpose(1, 0, 2), lse


def mha_ref(q, k, v, cu_q, cu_k, causal, scale):
    """Varlen MHA: q [T, N, Dqk], k [S, N, Dqk], v [S, N, V]; request b owns q rows cu_q[b]:cu_q[b+1]
    and keys cu_k[b]:cu_k[b+1]. Returns out float32 [T, N, V], lse float32 [N, T]."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    T, N = q.shape[0], q.shape[1]
    out = np.zeros((T, N, v.shape[-1]))
    lse = np.full((N, T), -np.inf)
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        out[qs:qe], lse[:, qs:qe] = _mha_request(q[qs:qe], k[ks:ke], v[ks:ke], causal, scale)
    return out.astype(np.float32), lse.astype(np.float32)


def prefill_ref(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens,
                softmax_scale, v_head_dim, kv_format="auto", kv_scale=None):
    """MLA prefill with cached context, computed as one softmax per query row (no chunking).

    Request i's new tokens are q[qsl[i]:qsl[i+1]]; their keys/values come from kv_c/k_pe of the same
    tokens (not from the cache), the context from cache positions [0, seq_lens[i] - q_len_i). A new token
    sees all context plus the new tokens up to and including itself. Returns float32 [T, N, V].
    """
    q = np.asarray(q, dtype=np.float64)
    kv_c = np.asarray(kv_c, dtype=np.float64)
    k_pe = _flatten_k_pe(k_pe).astype(np.float64)
    T, N, Dqk = q.shape
    L, R = kv_c.shape[1], k_pe.shape[1]
    P, V = Dqk - R, v_head_dim
    if np.asarray(kv_b_proj).shape != (N * (P + V), L):
        raise ValueError(f"kv_b_proj must be [{N * (P + V)}, {L}], got {np.asarray(kv_b_proj).shape}")
    _split_cache_dims(kv_cache, kv_format, L, R)
    out = np.zeros((T, N, V))
    for i in range(len(seq_lens)):
        qs, qe = int(query_start_loc[i]), int(query_start_loc[i + 1])
        ctx = int(seq_lens[i]) - (qe - qs)
        if ctx < 0:
            raise ValueError("seq_len shorter than the request's new tokens")
        ctx_rows = decode_rows(_read_positions(kv_cache, block_table[i], 0, ctx), kv_format, L, R, kv_scale)
        new_rows = np.concatenate([kv_c[qs:qe], k_pe[qs:qe]], axis=1)
        rows = np.concatenate([ctx_rows, new_rows], axis=0)
        k_nope, v = _up_proj_kv64(rows[:, :L], kv_b_proj, N, P, V)
        k = np.concatenate([k_nope, np.broadcast_to(rows[:, None, L:], (rows.shape[0], N, R))], axis=-1)
        out[qs:qe], _ = _mha_request(q[qs:qe], k, v, causal=True, scale=softmax_scale)
    return out.astype(np.float32)


def attention_ref(q, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, softmax_scale, v_head_dim,
                  L, R, kv_format="auto", kv_scale=None):
    """MLA attention of a mixed batch (mla.attention), however it is split: request i's new tokens
    q[qsl[i]:qsl[i+1]] are its last q_len positions, and every key/value comes from the cache, which
    already holds the new tokens' rows; query row j sees positions [0, seq_len - q_len + j], each
    up-projected with kv_b_proj. Requests without tokens produce nothing. Returns float32 [T, N, V].
    """
    q = np.asarray(q, dtype=np.float64)
    T, N, Dqk = q.shape
    P, V = Dqk - R, v_head_dim
    if np.asarray(kv_b_proj).shape != (N * (P + V), L):
        raise ValueError(f"kv_b_proj must be [{N * (P + V)}, {L}], got {np.asarray(kv_b_proj).shape}")
    _split_cache_dims(kv_cache, kv_format, L, R)
    out = np.zeros((T, N, V))
    for i in range(len(seq_lens)):
        qs, qe = int(query_start_loc[i]), int(query_start_loc[i + 1])
        if qe == qs:
            continue
        if int(seq_lens[i]) < qe - qs:
            raise ValueError("seq_len shorter than the request's new tokens")
        rows = decode_rows(_read_positions(kv_cache, block_table[i], 0, int(seq_lens[i])), kv_format, L, R,
                           kv_scale)
        k_nope, v = _up_proj_kv64(rows[:, :L], kv_b_proj, N, P, V)
        k = np.concatenate([k_nope, np.broadcast_to(rows[:, None, L:], (rows.shape[0], N, R))], axis=-1)
        out[qs:qe], _ = _mha_request(q[qs:qe], k, v, causal=True, scale=softmax_scale)
    return out.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# Accounting (primer section 9)
# ---------------------------------------------------------------------------------------------------


def decode_flops_bytes(seq_lens, s_q, N, L, R, row_bytes, act_bytes):
    """FlashMLA's decode accounting: (FLOPs, bytes). `row_bytes` is the cache's real bytes per row,
    `act_bytes` the element size of q and out."""
    total = int(np.sum(seq_lens))
    b = len(seq_lens)
    D = L + R
    flops = 2 * s_q * total * N * (D + L)
    nbytes = total * row_bytes + b * s_q * N * D * act_bytes + b * s_q * N * L * act_bytes
    return flops, nbytes


# ---------------------------------------------------------------------------------------------------
# Test data: paged caches with poisoned free space
# ---------------------------------------------------------------------------------------------------


@dataclass
class PagedCache:
    """A filled paged cache plus the float rows that were written into it (before quantisation)."""

    kv_cache: np.ndarray  # as the ops consume it
    block_table: np.ndarray  # int32 [B, cols]
    seq_lens: np.ndarray  # int32 [B]
    kv_c: list  # per request float32 [S_b, L]
    k_pe: list  # per request float32 [S_b, R]
    kv_format: str
    kv_scale: object
    L: int
    R: int

    @property
    def page_size(self):
        return self.kv_cache.shape[1]

    def slots(self, b, positions):
        """Cache slots of request b's logical positions."""
        positions = np.asarray(positions, dtype=np.int64)
        pages = self.block_table[b].astype(np.int64)[positions // self.page_size]
        return pages * self.page_size + positions % self.page_size

    def latent(self, b):
        """Request b's written rows [S_b, D] float32, unquantised."""
        return np.concatenate([self.kv_c[b], self.k_pe[b]], axis=1)

    def unquantised(self):
        """A float32 'auto' cache with the same pages and block table holding the rows before
        quantisation: the baseline an fp8 cache's results are compared with."""
        pages, page_size = self.kv_cache.shape[:2]
        out = np.full((pages, page_size, self.L + self.R), np.nan, dtype=np.float32)
        flat = out.reshape(pages * page_size, self.L + self.R)
        for b, s in enumerate(self.seq_lens):
            flat[self.slots(b, np.arange(int(s)))] = self.latent(b)
        return out


def poison_value(kv_format, dtype=np.float32):
    """What free cache space holds: NaN for float caches, 0x7F bytes (e4m3 NaN) for fp8 ones."""
    return np.array(np.nan, dtype=dtype) if kv_format == "auto" else np.uint8(_E4M3_NAN_CODE)


def make_paged_cache(rng, seq_lens, page_size, L, R, *, kv_format="auto", dtype=np.float32,
                     kv_scale=None, num_pages=None, cols=None, value_scale=1.0):
    """Random cache for requests of `seq_lens` tokens.

    Pages are assigned through a random permutation; every slot not holding a request's token (the tail
    of each last page, pages nobody uses) is poisoned, and block-table entries past a request's last
    page point at poisoned pages, so any read outside [0, S_b) shows up as NaN. `num_pages` and `cols`
    pin the array shapes (the JIT compiles per shape); by default there are two spare pages and one spare
    column. Values are N(0, value_scale^2), written with cache_write_ref.
    """
    seq_lens = np.asarray(seq_lens, dtype=np.int32)
    B = len(seq_lens)
    pages_needed = [-(-int(s) // page_size) for s in seq_lens]
    used = sum(pages_needed)
    num_pages = used + 2 if num_pages is None else num_pages
    cols = max(pages_needed + [0]) + 1 if cols is None else cols
    if num_pages <= used or cols < max(pages_needed + [0]):
        raise ValueError("num_pages/cols too small for these seq_lens (need one spare page)")
    perm = rng.permutation(num_pages)
    spare = perm[used:]
    block_table = rng.choice(spare, size=(B, cols)).astype(np.int32)
    nxt = 0
    for b, n in enumerate(pages_needed):
        block_table[b, :n] = perm[nxt : nxt + n]
        nxt += n
    width = kv_row_width(kv_format, L, R)
    store_dtype = dtype if kv_format == "auto" else np.uint8
    kv_cache = np.full((num_pages, page_size, width), poison_value(kv_format, store_dtype), dtype=store_dtype)
    kv_c = [(rng.standard_normal((int(s), L)) * value_scale).astype(np.float32) for s in seq_lens]
    k_pe = [(rng.standard_normal((int(s), R)) * value_scale).astype(np.float32) for s in seq_lens]
    cache = PagedCache(kv_cache, block_table, seq_lens, kv_c, k_pe, kv_format, kv_scale, L, R)
    all_slots = np.concatenate([cache.slots(b, np.arange(s)) for b, s in enumerate(seq_lens)] + [[]])
    cache.kv_cache = cache_write_ref(np.concatenate(kv_c + [np.zeros((0, L), np.float32)]),
                                     np.concatenate(k_pe + [np.zeros((0, R), np.float32)]),
                                     kv_cache, all_slots.astype(np.int64), kv_format, kv_scale)
    return cache


@dataclass
class PrefillCase:
    """Inputs of one prefill call; the cache already holds context + new tokens, as after cache_write."""

    cache: PagedCache
    q: np.ndarray  # [T, N, P+R]
    kv_c: np.ndarray  # [T, L], the new tokens' latents
    k_pe: np.ndarray  # [T, R]
    kv_b_proj: np.ndarray  # [N*(P+V), L]
    query_start_loc: np.ndarray  # int32 [B+1]
    ctx_lens: list

    @property
    def seq_lens(self):
        return self.cache.seq_lens

    def new_token_slots(self):
        """Cache slots holding the new tokens (a prefill must take them from kv_c/k_pe instead)."""
        return np.concatenate([self.cache.slots(b, np.arange(c, int(self.seq_lens[b])))
                               for b, c in enumerate(self.ctx_lens)])


def make_prefill_case(rng, q_lens, ctx_lens, page_size, L, R, N, P, V, *, kv_format="auto",
                      dtype=np.float32, kv_scale=None, num_pages=None, cols=None):
    """Random prefill inputs. kv_b_proj is N(0, 1/L) so up-projected K/V entries are O(1)."""
    seq_lens = [c + n for c, n in zip(ctx_lens, q_lens)]
    cache = make_paged_cache(rng, seq_lens, page_size, L, R, kv_format=kv_format, dtype=dtype,
                             kv_scale=kv_scale, num_pages=num_pages, cols=cols)
    qsl = np.cumsum([0] + list(q_lens)).astype(np.int32)
    kv_c = np.concatenate([cache.kv_c[b][c:] for b, c in enumerate(ctx_lens)]).astype(dtype)
    k_pe = np.concatenate([cache.k_pe[b][c:] for b, c in enumerate(ctx_lens)]).astype(dtype)
    q = rng.standard_normal((int(qsl[-1]), N, P + R)).astype(dtype)
    w = (rng.standard_normal((N * (P + V), L)) / np.sqrt(L)).astype(dtype)
    return PrefillCase(cache, q, kv_c, k_pe, w, qsl, list(ctx_lens))
