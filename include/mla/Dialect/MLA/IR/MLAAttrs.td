//===- MLAAttrs.td - mla attributes ------------------------*- tablegen -*-===//
//
// Cache layouts (page size, row format, scale) and compilation targets.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLAATTRS_TD
#define MLA_DIALECT_MLA_IR_MLAATTRS_TD

include "mla/Dialect/MLA/IR/MLADialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def MLA_RowFormat : I32EnumAttr<"RowFormat", "format of one latent cache row", [
    I32EnumAttrCase<"bf16", 0>,
    I32EnumAttrCase<"f16", 1>,
    I32EnumAttrCase<"f32", 2>,
    I32EnumAttrCase<"fp8_e4m3", 3>,
    I32EnumAttrCase<"fp8_e4m3_token", 4>,
    I32EnumAttrCase<"fp8_ds_mla", 5>
  ]> {
  let cppNamespace = "::mla";
  let genSpecializedAttr = 0;
}

def MLA_Chip : I32EnumAttr<"Chip", "compilation target", [
    I32EnumAttrCase<"sm90", 0>,
    I32EnumAttrCase<"sm100", 1>,
    I32EnumAttrCase<"cpu", 2>
  ]> {
  let cppNamespace = "::mla";
  let genSpecializedAttr = 0;
}

def MLA_SplitPolicy : I32EnumAttr<"SplitPolicy", "how split-KV pieces are chosen", [
    I32EnumAttrCase<"heuristic", 0>,
    I32EnumAttrCase<"balanced", 1>,
    I32EnumAttrCase<"batch_invariant", 2>
  ]> {
  let cppNamespace = "::mla";
  let genSpecializedAttr = 0;
}

// An optional integer parameter printed as a bare number when present.
class MLA_OptionalInt<string desc> :
    OptionalParameter<"std::optional<int64_t>", desc> {
  let printer = "$_printer << *$_self";
}

class MLA_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<MLA_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def MLA_CacheLayoutAttr : MLA_Attr<"CacheLayout", "cache_layout"> {
  let summary = "page size and row format of a paged latent cache";
  let description = [{
    Describes how one latent row `concat(kv_c, k_pe)` of width `D = L + R` is
    stored in a paged cache tensor `[pages, page_size, row]`:

    | format           | element | row width            | contents |
    |------------------|---------|----------------------|----------|
    | `bf16`/`f16`/`f32` | same  | `D`                  | the row |
    | `fp8_e4m3`       | `i8`    | `D`                  | `e4m3(x / scale)`, one per-tensor `scale` |
    | `fp8_e4m3_token` | `i8`    | `D + 8`              | `L` e4m3 latent (scale `s0`), `R` e4m3 RoPE (scale `s1`), `s0`, `s1` as f32 |
    | `fp8_ds_mla`     | `i8`    | `L + 4*L/128 + 2*R`  | `L` e4m3 latent in 128-wide tiles, one f32 scale per tile, `R` bf16 RoPE |

    Per-token and per-tile scales are `max(amax, 1e-4) / 448`; fp8 values are
    float8 E4M3FN rounded to nearest even and saturated at +-448. For
    DeepSeek-V3 (`L = 512`, `R = 64`) the rows are 1152 (bf16), 576, 584 and
    656 bytes.

    `page_size`, when present, must equal the cache's page dimension; when
    absent the page size is the cache type's (or is chosen by a planning
    pass for a dynamic one). Page sizes are multiples of 16.

    Example: `#mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.0e-02 : f32>`
  }];
  let parameters = (ins
    EnumParameter<MLA_RowFormat>:$format,
    MLA_OptionalInt<"tokens per page">:$page_size,
    OptionalParameter<"::mlir::FloatAttr", "per-tensor fp8 scale">:$scale
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True for the fp8 formats, whose cache tensors hold raw bytes (i8).
    bool isFp8() const;
    /// Element type a cache tensor of this format must have.
    ::mlir::Type getCacheElementType(::mlir::MLIRContext *ctx) const;
    /// Width of one stored row (in elements of the cache element type) for
    /// latent width `L` and RoPE width `R`.
    int64_t getRowWidth(int64_t latentDim, int64_t ropeDim) const;
  }];
}

def MLA_TargetAttr : MLA_Attr<"Target", "target"> {
  let summary = "the chip a module is compiled for";
  let description = [{
    `sm90` (Hopper, `sm_90a`), `sm100` (Blackwell, `sm_100a`) or `cpu` (the
    in-process LLVM path). `num_sms` optionally fixes the number of
    streaming multiprocessors the split-KV planner may use.

    Example: `module attributes {mla.target = #mla.target<chip = sm90, num_sms = 132>}`
  }];
  let parameters = (ins
    EnumParameter<MLA_Chip>:$chip,
    MLA_OptionalInt<"streaming multiprocessors">:$num_sms
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MLA_SplitPlanAttr : MLA_Attr<"SplitPlan", "split_plan"> {
  let summary = "the split-KV plan chosen for a decode";
  let description = [{
    Set by `mla-plan-splits`, consumed by `mla-split-kv`. `policy` is
    `heuristic` (vLLM Triton MLA: one power-of-two count for the batch, equal
    pieces per request), `balanced` (FlashMLA: 64-token blocks with a fixed
    per-request overhead spread evenly over `num_sm_parts` CTAs; a request may
    span CTAs) or `batch_invariant` (one piece per request). `num_sm_parts`
    is the number of persistent CTAs the plan was made for. When the
    sequence lengths are compile-time constants, `bounds` holds the plan
    itself: `[B, num_splits + 1]` row-major piece boundaries; otherwise the
    host planner computes them at run time (`mla.plan_splits`).

    Example: `#mla.split_plan<policy = balanced, num_sm_parts = 66, bounds = [0, 64, 100]>`
  }];
  let parameters = (ins
    EnumParameter<MLA_SplitPolicy>:$policy,
    "int64_t":$num_sm_parts,
    OptionalParameter<"::mlir::DenseI32ArrayAttr", "static piece bounds">:$bounds
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MLA_GpuTilingAttr : MLA_Attr<"GpuTiling", "gpu_tiling"> {
  let summary = "tile parameters of a GPU decode kernel";
  let description = [{
    Set on `mla.decode` / `mla.decode_partial` by `mla-select-gpu-tiling`
    (discardable attribute `mla.gpu_tiling`) and read by `convert-mla-to-gpu`.
    A CTA owns `rows_per_cta` query rows (token-major (query token, head)
    pairs of one request) and one split-KV piece; its warps form a
    `(rows_per_cta / 16) x warps_n` grid: warp (i, j) scores its share of
    each `kv_block`-token block for rows `16i..16i+15` and accumulates
    output columns `[j*L/warps_n, (j+1)*L/warps_n)`. KV blocks are staged in
    shared memory `stages` deep. `wgmma = true` (sm_90a) computes both
    products with warpgroup MMAs on 128B-swizzled shared-memory tiles
    (needs 64 rows, 2 warpgroups, 64-token blocks). `pipelined = true` (with
    `wgmma`) is its warp-specialised build: a producer warpgroup loads Q and
    the KV blocks by TMA into an mbarrier ring and the two consumer
    warpgroups overlap a block's softmax with the previous block's P V.
    `seesaw = true` (with `pipelined`) is that build's seesaw schedule: each
    consumer warpgroup scores whole alternate blocks and owns half of the
    output columns. `persistent = true` (with `seesaw`) launches one CTA per
    row block and SM part of a balanced split plan; each walks its part's
    pieces in turn (bf16/f16 caches, uniform s_q). `multicast = true` (with
    `seesaw`, not `persistent`) runs each query token's pair of 64-row
    blocks as a cluster of two CTAs that share the KV boxes: each loads half
    of a block's boxes and the TMA unit multicasts them into both (bf16/f16
    caches, N a multiple of 128, uniform s_q).

    Example: `#mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 2>`
  }];
  let parameters = (ins "int64_t":$rows_per_cta, "int64_t":$warps_n,
                        "int64_t":$kv_block, "int64_t":$stages,
                        DefaultValuedParameter<"bool", "false",
                          "warpgroup MMAs (sm_90a wgmma) instead of mma.sync">:$wgmma,
                        DefaultValuedParameter<"bool", "false",
                          "the warp-specialised TMA build of the wgmma kernel">:$pipelined,
                        DefaultValuedParameter<"bool", "false",
                          "the seesaw schedule of the pipelined build">:$seesaw,
                        DefaultValuedParameter<"bool", "false",
                          "the seesaw build walking a balanced split plan">:$persistent,
                        DefaultValuedParameter<"bool", "false",
                          "the seesaw build in clusters of two sharing the KV boxes">:$multicast);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The tiling as the contract's struct (KernelABI.h).
    ::mla::gpu::DecodeTiling getTiling() const;
    /// The attribute of `tiling`.
    static GpuTilingAttr get(::mlir::MLIRContext *context,
                             const ::mla::gpu::DecodeTiling &tiling);
  }];
}

def MLA_DcpShardAttr : MLA_Attr<"DcpShard", "dcp_shard"> {
  let summary = "the token shard one decode context parallel rank owns";
  let description = [{
    Decode context parallelism (DCP) spreads each request's latent cache over
    `world_size` ranks in runs of `interleave` tokens, as vLLM lays it out:
    global token `t` lives on rank `(t / interleave) % world_size`, at local
    position `(t / (world_size * interleave)) * interleave + t % interleave`.
    vLLM's default `interleave` is 1 (token `t` on rank `t % world_size`); a
    whole page keeps global pages whole. On `mla.decode_partial` it says that
    the cache and block table hold rank `rank`'s shard while `seq_lens` stay
    global (`mla/Contract/DcpShard.h` has the rule).

    Example: `#mla.dcp_shard<world_size = 4, rank = 1, interleave = 1>`
  }];
  let parameters = (ins "int64_t":$world_size, "int64_t":$rank,
                        "int64_t":$interleave);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MLA_DIALECT_MLA_IR_MLAATTRS_TD
