//===- MLAOps.td - mla operations --------------------------*- tablegen -*-===//
//
// The ops of the MLA attention path. Shapes use the primer's symbols:
// T tokens, B requests, Sq query rows per request, N heads, L latent width,
// R RoPE width, D = L + R, P nope width, V value width.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLAOPS_TD
#define MLA_DIALECT_MLA_IR_MLAOPS_TD

include "mla/Dialect/MLA/IR/MLADialect.td"
include "mla/Dialect/MLA/IR/MLAAttrs.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def MLA_FloatTensor : RankedTensorOf<[AnyFloat]>;
def MLA_F32Tensor : RankedTensorOf<[F32]>;
def MLA_I32Tensor : RankedTensorOf<[I32]>;
def MLA_CacheTensor : RankedTensorOf<[BF16, F16, F32, I8]>;

class MLA_PureOp<string mnemonic, list<Trait> traits = []>
    : MLA_Op<mnemonic, !listconcat(traits, [Pure])> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Cache
//===----------------------------------------------------------------------===//

def MLA_CacheWriteOp : MLA_Op<"cache_write", [
    Pure, DestinationStyleOpInterface, AllTypesMatch<["cache", "result"]>]> {
  let summary = "write latent rows into the paged cache";
  let description = [{
    Stores `concat(kv_c[t], k_pe[t])` (quantised as `layout` says) at slot
    `slot_mapping[t] = page * page_size + offset` of `cache` for every token
    `t`; a negative slot means a padding token and writes nothing. The
    result is `cache` with the rows written (destination-passing style: it
    bufferizes to an in-place write).

    Operands: `kv_c [T, L]`, `k_pe [T, R]` or `[T, 1, R]`, `slot_mapping [T]`
    (i32), `cache [pages, page_size, row]`.

    ```mlir
    %c = mla.cache_write %kv_c, %k_pe, %slots
           layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
           : tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<16x64x576xbf16>
    ```
  }];
  let arguments = (ins MLA_FloatTensor:$kv_c, MLA_FloatTensor:$k_pe,
                       MLA_I32Tensor:$slot_mapping, MLA_CacheTensor:$cache,
                       MLA_CacheLayoutAttr:$layout);
  let results = (outs MLA_CacheTensor:$result);
  let assemblyFormat = [{
    $kv_c `,` $k_pe `,` $slot_mapping `layout` qualified($layout) `into` $cache
    attr-dict `:` type($kv_c) `,` type($k_pe) `,` type($slot_mapping) `into` type($cache)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getCacheMutable(); }
  }];
}

def MLA_GatherCacheOp : MLA_Op<"gather_cache", [
    Pure, DestinationStyleOpInterface, AllTypesMatch<["workspace", "result"]>]> {
  let summary = "gather paged cache rows into a contiguous workspace";
  let description = [{
    For request `b`, workspace rows `cu_rows[b] .. cu_rows[b+1]-1` receive the
    cache rows at logical positions `starts[b], starts[b]+1, ...` of that
    request (found through `block_table[b]`), dequantised to the workspace's
    element type. Rows at and after `cu_rows[B]` are left as they were.

    `latent_dim` is the latent width L. The `fp8_e4m3_token` format needs it
    (an element's scale depends on whether it is latent or RoPE, and the
    operand types do not say where L ends); for the other formats it is
    optional and checked.

    Operands: `cache [pages, page_size, row]`, `block_table [B, maxPages]`,
    `starts [B]`, `cu_rows [B+1]` (all i32), `workspace [W, L+R]`.

    ```mlir
    %w = mla.gather_cache %cache[%block_table] starts %starts rows %cu
           layout #mla.cache_layout<format = bf16, page_size = 64> into %ws
           : tensor<16x64x576xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
    ```
  }];
  let arguments = (ins MLA_CacheTensor:$cache, MLA_I32Tensor:$block_table,
                       MLA_I32Tensor:$starts, MLA_I32Tensor:$cu_rows,
                       MLA_FloatTensor:$workspace, MLA_CacheLayoutAttr:$layout,
                       OptionalAttr<I64Attr>:$latent_dim);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `[` $block_table `]` `starts` $starts `rows` $cu_rows
    `layout` qualified($layout) (`latent_dim` $latent_dim^)? `into` $workspace attr-dict `:` type($cache) `,` type($block_table) `,`
    type($starts) `,` type($cu_rows) `into` type($workspace)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getWorkspaceMutable(); }
  }];
}

//===----------------------------------------------------------------------===//
// Weight preparation and batched projections
//===----------------------------------------------------------------------===//

def MLA_SplitKvBProjOp : MLA_PureOp<"split_kv_b_proj"> {
  let summary = "split kv_b_proj into W_UK_T and W_UV";
  let description = [{
    `kv_b_proj [N*(P+V), L]` (out x in) is viewed as `[N, P+V, L]`; the first
    `P` rows of each head give `W_UK_T [N, P, L]` and the last `V` rows,
    transposed, give `W_UV [N, L, V]` (primer section 4). `N`, `P` and `V`
    are read from the result types.

    ```mlir
    %uk, %uv = mla.split_kv_b_proj %w : tensor<768x64xf32> -> tensor<3x128x64xf32>, tensor<3x64x128xf32>
    ```
  }];
  let arguments = (ins MLA_FloatTensor:$kv_b_proj);
  let results = (outs MLA_FloatTensor:$w_uk_t, MLA_FloatTensor:$w_uv);
  let assemblyFormat = [{
    $kv_b_proj attr-dict `:` type($kv_b_proj) `->` type($w_uk_t) `,` type($w_uv)
  }];
}

def MLA_AbsorbQOp : MLA_PureOp<"absorb_q"> {
  let summary = "absorb W_UK into the query: [T, N, P+R] -> [T, N, L+R]";
  let description = [{
    `result[t, n, 0:L] = q[t, n, 0:P] @ w_uk_t[n]` and
    `result[t, n, L:L+R] = q[t, n, P:P+R]` (the RoPE part passes through).
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_FloatTensor:$w_uk_t);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $w_uk_t attr-dict `:` type($q) `,` type($w_uk_t) `->` type($result)
  }];
}

def MLA_UpProjOutOp : MLA_PureOp<"up_proj_out"> {
  let summary = "up-project the latent output with W_UV: [T, N, L] -> [T, N*V]";
  let description = [{
    `result[t, n*V:(n+1)*V] = o[t, n, :] @ w_uv[n]`.
  }];
  let arguments = (ins MLA_FloatTensor:$o, MLA_FloatTensor:$w_uv);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $o `,` $w_uv attr-dict `:` type($o) `,` type($w_uv) `->` type($result)
  }];
}

def MLA_UpProjKvOp : MLA_PureOp<"up_proj_kv"> {
  let summary = "up-project latent rows to per-head K-nope and V";
  let description = [{
    `kv = latent @ kv_b_proj^T` viewed as `[S, N, P+V]` and split into
    `k_nope [S, N, P]` and `v [S, N, V]` (primer section 7).
  }];
  let arguments = (ins MLA_FloatTensor:$latent, MLA_FloatTensor:$kv_b_proj);
  let results = (outs MLA_FloatTensor:$k_nope, MLA_FloatTensor:$v);
  let assemblyFormat = [{
    $latent `,` $kv_b_proj attr-dict `:` type($latent) `,` type($kv_b_proj)
    `->` type($k_nope) `,` type($v)
  }];
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

def MLA_DecodeOp : MLA_PureOp<"decode"> {
  let summary = "absorbed MQA decode over the paged latent cache";
  let description = [{
    For request `b`, query row `i` and head `n`:
    `s[j] = softmax_scale * dot(q[b, i, n, :], row_j[0:D])` over the cache
    rows `j` the row may see, `out[b, i, n, :] = sum_j softmax(s)[j] * row_j[0:L]`
    and `lse[b, n, i] = log(sum_j exp(s[j]))` (natural log, f32).

    Request `b` holds `seq_lens[b]` rows, found through `block_table[b]`.
    With `causal`, row `i` of `Sq` sees positions `[0, seq_lens[b] - Sq + i]`;
    otherwise every row sees all of them. A row that sees nothing gets
    `out = 0`, `lse = -inf`. `num_splits`, when set, asks for a split-KV
    schedule with (at most) that many pieces per request; `split_plan`, set
    by `mla-plan-splits`, says how the pieces are chosen.

    Operands: `q [B, Sq, N, L+R]`, `cache [pages, page_size, row]`,
    `block_table [B, maxPages]`, `seq_lens [B]`; results `out [B, Sq, N, L]`,
    `lse [B, N, Sq]`.

    Varlen form (speculative decoding with mixed draft lengths): with
    `query_start_loc [B+1]` (i32), `q [T, N, L+R]` packs the requests' query
    tokens, request `b` owning tokens `[query_start_loc[b],
    query_start_loc[b+1])` (`q_b` of them, at most `max_query_len`, default
    8); causal row `i` of request `b` sees `[0, seq_lens[b] - q_b + i]`.
    Results `out [T, N, L]` and `lse [T, N]` (token-major, FlashMLA's packed
    layout). `q_b > seq_lens[b]` is an input error.

    ```mlir
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64>
                 scale 0.0721687824 causal
                 : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>)
                 -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
    ```
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_CacheTensor:$cache,
                       MLA_I32Tensor:$block_table, MLA_I32Tensor:$seq_lens,
                       Optional<MLA_I32Tensor>:$query_start_loc,
                       MLA_CacheLayoutAttr:$layout, F32Attr:$softmax_scale,
                       UnitAttr:$causal, OptionalAttr<I64Attr>:$num_splits,
                       OptionalAttr<MLA_SplitPlanAttr>:$split_plan,
                       OptionalAttr<I64Attr>:$max_query_len);
  let results = (outs MLA_FloatTensor:$out, MLA_F32Tensor:$lse);
  let assemblyFormat = [{
    $q `,` $cache `[` $block_table `,` $seq_lens `]`
    (`query_start_loc` $query_start_loc^)? `layout` qualified($layout)
    `scale` $softmax_scale (`causal` $causal^)? (`num_splits` $num_splits^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Checks a static split_plan's bounds against the batch and seq_lens.
    ::llvm::LogicalResult verifySplitPlan();
    bool isVarlen() { return static_cast<bool>(getQueryStartLoc()); }
    /// B, N, Sq (the largest per-request query length) and L+R in both forms.
    ::mla::DecodeQueryDims getQueryDims();
  }];
}

def MLA_DecodePartialOp : MLA_PureOp<"decode_partial",
                                     [AttrSizedOperandSegments]> {
  let summary = "one half of split-KV decode: per-split partial outputs and LSE";
  let description = [{
    Computes `mla.decode` separately on `num_splits` contiguous pieces of each
    request's positions. Without `split_bounds`, piece `s` of request `b`
    covers positions `[s*c, min((s+1)*c, seq_lens[b]))` with
    `c = ceil(seq_lens[b] / num_splits)`. With `split_bounds [B, num_splits+1]`
    (i32), piece `s` covers `[split_bounds[b, s], split_bounds[b, s+1])`
    (clamped to `seq_lens[b]`); this is how balanced plans, whose pieces
    differ per request, are expressed. Causal rows additionally stop at their
    own limit. Each piece is normalised on its own.

    Partial layout (split-major so that one split's state is contiguous):
    `partial_out [num_splits, B, Sq, N, L]` (f32) and
    `partial_lse [num_splits, B, N, Sq]` (f32, natural log). An empty piece
    has `partial_out = 0` and `partial_lse = -inf`. `mla.combine` merges them.

    With `shard #mla.dcp_shard<world_size = W, rank = r, interleave = I>`
    (decode context parallelism, set by `mla-dcp`) the cache and block table
    hold only rank `r`'s tokens, compacted to local positions, while
    `seq_lens` and the causal limits stay global: the request's local length
    is the number of global positions `[0, seq_lens[b])` rank `r` owns, the
    pieces above cut that local range, and causal row `i` sees the local
    positions whose global position is at most `seq_lens[b] - Sq + i`. A rank
    that owns none of a row's positions gives that row `partial_lse = -inf`.

    The varlen form (`query_start_loc`, as on `mla.decode`) writes
    token-packed `partial_out [num_splits, T, N, L]` and
    `partial_lse [num_splits, T, N]`. It takes no `shard`: decode context
    parallelism is built for uniform batches.
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_CacheTensor:$cache,
                       MLA_I32Tensor:$block_table, MLA_I32Tensor:$seq_lens,
                       Optional<MLA_I32Tensor>:$split_bounds,
                       Optional<MLA_I32Tensor>:$query_start_loc,
                       MLA_CacheLayoutAttr:$layout, F32Attr:$softmax_scale,
                       UnitAttr:$causal, I64Attr:$num_splits,
                       OptionalAttr<MLA_DcpShardAttr>:$shard,
                       OptionalAttr<I64Attr>:$max_query_len);
  let results = (outs MLA_F32Tensor:$partial_out, MLA_F32Tensor:$partial_lse);
  let assemblyFormat = [{
    $q `,` $cache `[` $block_table `,` $seq_lens `]` (`bounds` $split_bounds^)?
    (`query_start_loc` $query_start_loc^)? `layout` qualified($layout)
    (`shard` qualified($shard)^)?
    `scale` $softmax_scale (`causal` $causal^)? `num_splits` $num_splits
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    bool isVarlen() { return static_cast<bool>(getQueryStartLoc()); }
    /// B, N, Sq (the largest per-request query length) and L+R in both forms.
    ::mla::DecodeQueryDims getQueryDims();
  }];
}

def MLA_PlanSplitsOp : MLA_PureOp<"plan_splits"> {
  let summary = "split-KV piece bounds computed on the host at run time";
  let description = [{
    Runs the split planner (the same C++ planner `mla-plan-splits` uses at
    compile time) on run-time `seq_lens [B]` and returns the piece bounds
    `[B, S+1]` (i32) of `plan`'s policy, where `S` is the result's static
    piece capacity. `num_heads` and `query_rows` (N and Sq of the decode) size
    the balanced plan's CTAs. A plan with more pieces than the capacity (a
    heuristic plan for sequences longer than the compile-time bound) falls
    back to `S` equal pieces per request, which is always correct.
  }];
  let arguments = (ins MLA_I32Tensor:$seq_lens, MLA_SplitPlanAttr:$plan,
                       I64Attr:$num_heads, I64Attr:$query_rows);
  let results = (outs MLA_I32Tensor:$bounds);
  let assemblyFormat = [{
    $seq_lens `heads` $num_heads `rows` $query_rows attr-dict `:`
    type($seq_lens) `->` type($bounds)
  }];
}

def MLA_CombineOp : MLA_PureOp<"combine"> {
  let summary = "merge split-KV partial states (primer section 6)";
  let description = [{
    With `m = max_s lse_s` and `w_s = exp(lse_s - m)`:
    `out = sum_s w_s * o_s / sum_s w_s` and `lse = m + log(sum_s w_s)`.
    Pieces with `lse = -inf` weigh nothing; if every piece is empty,
    `out = 0` and `lse = -inf`.

    Operands: `partial_out [S, B, Sq, N, L]`, `partial_lse [S, B, N, Sq]`;
    results `out [B, Sq, N, L]`, `lse [B, N, Sq]`. Token-packed partials of
    a varlen decode, `partial_out [S, T, N, L]` and `partial_lse [S, T, N]`,
    give `out [T, N, L]` and `lse [T, N]`.
  }];
  let arguments = (ins MLA_F32Tensor:$partial_out, MLA_F32Tensor:$partial_lse);
  let results = (outs MLA_FloatTensor:$out, MLA_F32Tensor:$lse);
  let assemblyFormat = [{
    $partial_out `,` $partial_lse attr-dict `:` functional-type(operands, results)
  }];
}

def MLA_DcpAllGatherOp : MLA_Op<"dcp_all_gather"> {
  let summary = "all-gather a rank's decode state over the DCP ranks";
  let description = [{
    The one collective of decode context parallelism: every rank of the
    `world_size` ranks contributes its rank-local `out [B, Sq, N, L]` and
    `lse [B, N, Sq]` (f32), and every rank receives all of them stacked
    rank-major, `[world_size, B, Sq, N, L]` and `[world_size, B, N, Sq]`
    (NCCL's `all_gather_into_tensor`). It has no pure semantics in one
    process: the CPU lowering accepts `world_size = 1` only, and multi-rank
    programs run through `mla.dcp` (Python, `torch.distributed`).
  }];
  let arguments = (ins MLA_F32Tensor:$out, MLA_F32Tensor:$lse,
                       I64Attr:$world_size);
  let results = (outs MLA_F32Tensor:$gathered_out, MLA_F32Tensor:$gathered_lse);
  let assemblyFormat = [{
    $out `,` $lse `world_size` $world_size attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MLA_DcpCombineOp : MLA_PureOp<"dcp_combine"> {
  let summary = "merge the DCP ranks' decode states over a gathered rank axis";
  let description = [{
    `mla.combine` with the rank axis in place of the split axis: operand `r`
    along dim 0 is rank `r`'s decode state over its token shard. With
    `m = max_r lse_r` and `w_r = exp(lse_r - m)`:
    `out = sum_r w_r * o_r / sum_r w_r` and `lse = m + log(sum_r w_r)`;
    ranks with `lse = -inf` (no token of the row on that rank) weigh nothing,
    and if no rank holds a token the row is `out = 0`, `lse = -inf`.

    Operands: `gathered_out [W, B, Sq, N, L]`, `gathered_lse [W, B, N, Sq]`
    (f32); results `out [B, Sq, N, L]`, `lse [B, N, Sq]`.

    ```mlir
    %o, %lse = mla.dcp_combine %go, %gl
                 : (tensor<2x4x1x16x512xf32>, tensor<2x4x16x1xf32>)
                 -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
    ```
  }];
  let arguments = (ins MLA_F32Tensor:$gathered_out, MLA_F32Tensor:$gathered_lse);
  let results = (outs MLA_FloatTensor:$out, MLA_F32Tensor:$lse);
  let assemblyFormat = [{
    $gathered_out `,` $gathered_lse attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

def MLA_MhaOp : MLA_PureOp<"mha"> {
  let summary = "variable-length multi-head attention with LSE";
  let description = [{
    Request `b` owns query rows `cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1` and key
    rows `cu_seqlens_k[b] .. cu_seqlens_k[b+1]-1`. With `causal` the mask is
    bottom-right aligned: query `i` of `q_len` sees keys `[0, k_len - q_len + i]`.
    Rows that see no key get `out = 0`, `lse = -inf`.

    Operands: `q [T, N, P+R]`, `k [S, N, P+R]`, `v [S, N, V]`,
    `cu_seqlens_q [B+1]`, `cu_seqlens_k [B+1]`; results `out [T, N, V]`,
    `lse [N, T]` (f32, natural log).
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_FloatTensor:$k,
                       MLA_FloatTensor:$v, MLA_I32Tensor:$cu_seqlens_q,
                       MLA_I32Tensor:$cu_seqlens_k, F32Attr:$softmax_scale,
                       UnitAttr:$causal);
  let results = (outs MLA_FloatTensor:$out, MLA_F32Tensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $cu_seqlens_q `,` $cu_seqlens_k `scale` $softmax_scale
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
}

def MLA_MergeStatesOp : MLA_PureOp<"merge_states"> {
  let summary = "merge two attention states by their LSE";
  let description = [{
    `(out_a, lse_a)` and `(out_b, lse_b)` are attention over disjoint key sets;
    the result is attention over their union (primer section 6). An LSE of
    `+inf` or `-inf` means "no contribution"; if neither side contributes,
    `out = 0` and `lse = -inf`. Shapes follow vLLM's `merge_attn_states`:
    `out [T, N, H]`, `lse [N, T]` (f32).
  }];
  let arguments = (ins MLA_FloatTensor:$out_a, MLA_F32Tensor:$lse_a,
                       MLA_FloatTensor:$out_b, MLA_F32Tensor:$lse_b);
  let results = (outs MLA_FloatTensor:$out, MLA_F32Tensor:$lse);
  let assemblyFormat = [{
    $out_a `,` $lse_a `,` $out_b `,` $lse_b attr-dict `:` functional-type(operands, results)
  }];
}

def MLA_PrefillOp : MLA_PureOp<"prefill"> {
  let summary = "chunked-context MLA prefill (primer section 7)";
  let description = [{
    Request `i` has new tokens `q[query_start_loc[i] .. query_start_loc[i+1]-1]`
    (`q_len_i`) and cached context positions `[0, seq_lens[i] - q_len_i)`. The
    new tokens' K/V are `kv_c`/`k_pe` up-projected with `kv_b_proj`; they
    attend causally among themselves and to all of the context, whose K/V are
    the cache rows up-projected the same way. `workspace_rows` bounds the
    number of context rows up-projected at once (chunks are page-aligned);
    `mla-chunk-prefill` decomposes the op into gather_cache, up_proj_kv, mha
    and merge_states.

    Operands: `q [T, N, P+R]`, `kv_c [T, L]`, `k_pe [T, R]` or `[T, 1, R]`,
    `kv_b_proj [N*(P+V), L]`, `cache`, `block_table [B, maxPages]`,
    `query_start_loc [B+1]`, `seq_lens [B]`; result `out [T, N, V]`.
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_FloatTensor:$kv_c,
                       MLA_FloatTensor:$k_pe, MLA_FloatTensor:$kv_b_proj,
                       MLA_CacheTensor:$cache, MLA_I32Tensor:$block_table,
                       MLA_I32Tensor:$query_start_loc, MLA_I32Tensor:$seq_lens,
                       MLA_CacheLayoutAttr:$layout, F32Attr:$softmax_scale,
                       OptionalAttr<I64Attr>:$workspace_rows);
  let results = (outs MLA_FloatTensor:$out);
  let assemblyFormat = [{
    $q `,` $kv_c `,` $k_pe `,` $kv_b_proj `,` $cache `[` $block_table `,`
    $query_start_loc `,` $seq_lens `]` `layout` qualified($layout)
    `scale` $softmax_scale (`workspace_rows` $workspace_rows^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def MLA_AttentionOp : MLA_PureOp<"attention"> {
  let summary = "MLA attention of a mixed decode/prefill batch, algorithm not yet chosen";
  let description = [{
    The same operands and meaning as `mla.prefill`: request `i`'s new tokens
    `q[query_start_loc[i] .. query_start_loc[i+1]-1]` attend causally among
    themselves and to the request's cached context, and the cache already
    holds the new tokens' rows (cache_write ran first, as in vLLM).
    `mla-select-algorithm` splits the batch: requests with `q_len` at most
    the threshold take the absorbed MQA path (`absorb_q`, `decode`,
    `up_proj_out`) over the cache, the others the up-projected MHA path
    (`prefill`). Decode requests are expected first, as engines order them.
  }];
  let arguments = (ins MLA_FloatTensor:$q, MLA_FloatTensor:$kv_c,
                       MLA_FloatTensor:$k_pe, MLA_FloatTensor:$kv_b_proj,
                       MLA_CacheTensor:$cache, MLA_I32Tensor:$block_table,
                       MLA_I32Tensor:$query_start_loc, MLA_I32Tensor:$seq_lens,
                       MLA_CacheLayoutAttr:$layout, F32Attr:$softmax_scale,
                       OptionalAttr<I64Attr>:$workspace_rows);
  let results = (outs MLA_FloatTensor:$out);
  let assemblyFormat = [{
    $q `,` $kv_c `,` $k_pe `,` $kv_b_proj `,` $cache `[` $block_table `,`
    $query_start_loc `,` $seq_lens `]` `layout` qualified($layout)
    `scale` $softmax_scale (`workspace_rows` $workspace_rows^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

#endif // MLA_DIALECT_MLA_IR_MLAOPS_TD
