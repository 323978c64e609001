"""FlashMLA's and vLLM's MLA entry points, with their names, argument order, shapes, defaults and
return conventions, over mla's own kernels: an engine written against them swaps the import.

  get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k) -> (tile_scheduler_metadata, None)
  flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                         num_splits, softmax_scale=None, causal=False, is_fp8_kvcache=False) -> (out, lse)
  merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None)
  concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)

torch CUDA tensors run on the GPU (`mla.gpu`); numpy arrays and torch CPU tensors run on the CPU. torch
CPU tensors are used in place through numpy views (so float32 and float16 only: numpy has no bfloat16)
and results come back as torch tensors. Where the peers assert, these raise ValueError, before anything
is written.
"""

import dataclasses

from . import _is_torch_cuda, cache_write, decode, merge_states, plan_decode

__all__ = ["MlaMetadata", "concat_and_cache_mla", "flash_mla_with_kvcache", "get_mla_metadata",
           "merge_attn_states"]

#: vLLM's kv_cache_dtype strings -> mla's kv_format (and whether `scale` is the per-tensor fp8 scale).
_VLLM_CACHE_FORMATS = {"auto": ("auto", False), "fp8": ("fp8_e4m3", True), "fp8_e4m3": ("fp8_e4m3", True),
                       "fp8_ds_mla": ("fp8_ds_mla", False)}


def _is_torch(value):
    return type(value).__module__.startswith("torch")


def _host(name, value):
    """`value` as the CPU path takes it: a torch CPU tensor becomes a numpy view of its memory (fp8
    bytes as uint8), anything else is passed on."""
    if not _is_torch(value):
        return value
    import torch

    if value.dtype == torch.bfloat16:
        raise ValueError(f"{name} is a bfloat16 CPU tensor; the CPU path takes float32 or float16 "
                         "(bfloat16 runs on the GPU)")
    if value.dtype.is_floating_point and value.element_size() == 1:
        value = value.view(torch.uint8)
    return value.detach().numpy()


def _fp8_bytes(value):
    """A torch fp8 cache (float8_e4m3fn, torch >= 2.1) as the uint8 bytes mla's cache arguments take."""
    if _is_torch(value) and value.dtype.is_floating_point and value.element_size() == 1:
        import torch

        return value.view(torch.uint8)
    return value


def _torch_results(results, like):
    """`results` (numpy arrays) as torch tensors when the caller passed torch CPU tensors."""
    if not _is_torch(like):
        return results
    import torch

    return tuple(torch.from_numpy(r) for r in results)


@dataclasses.dataclass
class MlaMetadata:
    """What `get_mla_metadata` returns and `flash_mla_with_kvcache` takes as tile_scheduler_metadata.

    Like FlashMLA's scheduling metadata it is bound to a problem on its first use (batch, query rows,
    heads, page size, causality, cache format) and later calls must match it, and it belongs to one
    batch step: make it again when cache_seqlens change. On the GPU the first call of the step makes
    mla's device plan (`mla.plan_decode`: split bounds computed on the GPU from cache_seqlens) and every
    later call of the step (the other layers) decodes with it, with no host synchronisation; on the CPU
    the splits are planned per call.
    """

    config: tuple = None
    plan: object = dataclasses.field(default=None, repr=False, compare=False)

    _FIELDS = ("batch size", "seq_len_q", "num_heads_q", "page_block_size", "num_heads_k", "causal",
               "is_fp8_kvcache")

    def bind(self, config):
        if self.config is None:
            self.config = config
            return
        for field, was, now in zip(self._FIELDS, self.config, config):
            if was != now:
                raise ValueError(f"tile_scheduler_metadata was made for {field} {was}, this call has {now}; "
                                 "use one get_mla_metadata() per problem shape")


def get_mla_metadata(cache_seqlens=None, num_q_tokens_per_head_k=None, num_heads_k=1, num_heads_q=None,
                     is_fp8_kvcache=False, topk=None):
    """FlashMLA's get_mla_metadata: returns (tile_scheduler_metadata, num_splits) for
    flash_mla_with_kvcache, both passed on as they are. FlashMLA's own arguments (cache_seqlens,
    s_q * h_q // h_kv, h_kv) are accepted and may be left out, as its current interface allows; num_splits
    is None (mla plans the splits). Sparse attention (`topk`) and more than one KV head are not supported.
    """
    if num_heads_k != 1:
        raise ValueError(f"num_heads_k must be 1 (MLA's one latent KV head), got {num_heads_k}")
    if topk is not None:
        raise ValueError("sparse attention (topk) is not supported")
    return MlaMetadata(), None


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False,
                           indices=None):
    """FlashMLA's flash_mla_with_kvcache (dense): absorbed MLA decode over a paged latent cache.

    q [b, s_q, h_q, d]; k_cache [num_blocks, page_block_size, 1, d] (or without the head axis); bf16/f16
    (GPU) or f32/f16 (CPU) of q's dtype, or with `is_fp8_kvcache` uint8 (or float8_e4m3fn) rows of 656
    bytes for d = 576 (fp8_ds_mla: 512 e4m3 codes, 4 float32 scales, 64 bfloat16 RoPE values; CPU path).
    block_table int32 [b, max_num_blocks]; cache_seqlens int32 [b]; head_dim_v the latent width (512).
    softmax_scale defaults to d ** -0.5, FlashMLA's default. With `causal`, query row i of request b
    sees positions [0, cache_seqlens[b] - s_q + i].
    Returns (out [b, s_q, h_q, head_dim_v] of q's dtype, softmax_lse float32 [b, h_q, s_q]).
    """
    if not isinstance(tile_scheduler_metadata, MlaMetadata):
        raise ValueError("tile_scheduler_metadata must come from mla.compat.get_mla_metadata, got "
                         f"{type(tile_scheduler_metadata).__name__}")
    if num_splits is not None:
        raise ValueError("num_splits must be what get_mla_metadata returned (None)")
    if indices is not None:
        raise ValueError("sparse attention (indices) is not supported")
    shape = tuple(k_cache.shape)
    if len(shape) == 4:
        if shape[2] != 1:
            raise ValueError(f"k_cache {shape} has {shape[2]} KV heads; MLA has one")
        k_cache = k_cache.reshape(shape[0], shape[1], shape[3])
    elif len(shape) != 3:
        raise ValueError(f"k_cache must be [num_blocks, page_block_size, 1, d], got shape {shape}")
    if len(q.shape) != 4:
        raise ValueError(f"q must be [batch, seq_len_q, num_heads_q, head_dim], got shape {tuple(q.shape)}")
    b, s_q, h_q, d = q.shape
    tile_scheduler_metadata.bind((b, s_q, h_q, shape[1], 1, bool(causal), bool(is_fp8_kvcache)))
    options = dict(head_dim_v=head_dim_v, softmax_scale=d ** -0.5 if softmax_scale is None else softmax_scale,
                   causal=causal, kv_format="fp8_ds_mla" if is_fp8_kvcache else "auto")
    k_cache = _fp8_bytes(k_cache)
    if any(_is_torch_cuda(v) for v in (q, k_cache, block_table, cache_seqlens)):
        if is_fp8_kvcache:
            return decode(q, k_cache, block_table, cache_seqlens, **options)
        if tile_scheduler_metadata.plan is None:
            tile_scheduler_metadata.plan = plan_decode(q, k_cache, block_table, cache_seqlens,
                                                       head_dim_v=head_dim_v, causal=causal)
        return decode(q, k_cache, block_table, cache_seqlens, plan=tile_scheduler_metadata.plan, **options)
    out, lse = decode(_host("q", q), _host("k_cache", k_cache), _host("block_table", block_table),
                      _host("cache_seqlens", cache_seqlens), **options)
    return _torch_results((out, lse), q)


def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None):
    """vLLM's merge_attn_states: merges two attention states over disjoint keys into `output` (and
    `output_lse` when given), in place; returns None.

    output, prefix_output, suffix_output [num_tokens, num_heads, head_size]; prefix_lse, suffix_lse,
    output_lse float32 [num_heads, num_tokens]. A side whose LSE is not finite (vLLM: +inf) contributes
    nothing; where neither side does, output is 0 and output_lse -inf. output may be prefix_output.
    """
    states = (prefix_output, prefix_lse, suffix_output, suffix_lse)
    if any(_is_torch_cuda(v) for v in (output, output_lse, *states)):
        merge_states(*states, out=output, lse=output_lse)
        return None
    names = ("prefix_output", "prefix_lse", "suffix_output", "suffix_lse")
    merge_states(*(_host(n, v) for n, v in zip(names, states)), out=_host("output", output),
                 lse=None if output_lse is None else _host("output_lse", output_lse))
    return None


def concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale):
    """vLLM's concat_and_cache_mla: stores concat(kv_c[t], k_pe[t]) at slot slot_mapping[t] =
    block * block_size + offset of kv_cache [num_blocks, block_size, entry], in place; slot -1 (any
    negative slot) is padding and writes nothing. Returns None.

    kv_c [num_tokens, kv_lora_rank], k_pe [num_tokens, rope_dim]. kv_cache_dtype is vLLM's: "auto" (a
    cache of kv_c's dtype), "fp8" / "fp8_e4m3" (uint8 e4m3 codes of value / scale; scale is vLLM's k_scale,
    a one-element float32 tensor: on the GPU the kernel reads it by pointer, with no host read, so the call
    can be captured in a CUDA graph and sees the tensor's value at replay; a number works too), or
    "fp8_ds_mla" (656-byte rows with their own scales; `scale` is not read).
    """
    if kv_cache_dtype not in _VLLM_CACHE_FORMATS:
        raise ValueError(f"kv_cache_dtype must be one of {sorted(_VLLM_CACHE_FORMATS)}, got {kv_cache_dtype!r}")
    kv_format, scaled = _VLLM_CACHE_FORMATS[kv_cache_dtype]
    kv_scale = scale if scaled else None
    kv_cache = _fp8_bytes(kv_cache)
    if any(_is_torch_cuda(v) for v in (kv_c, k_pe, kv_cache, slot_mapping)):
        cache_write(kv_c, k_pe, kv_cache, slot_mapping, kv_format=kv_format, kv_scale=kv_scale)
        return None
    cache_write(_host("kv_c", kv_c), _host("k_pe", k_pe), _host("kv_cache", kv_cache),
                _host("slot_mapping", slot_mapping), kv_format=kv_format, kv_scale=kv_scale)
    return None
