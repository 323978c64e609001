// The two rank programs of decode.mlir's decode under token-interleaved DCP
// (world 2, interleave 1): each rank's cache and block table hold its own
// tokens (2 local pages per request), seq_lens are global. Each returns the
// rank's partial state; dcp_shards.py merges them.
func.func @rank0(%q: tensor<2x2x3x80xf32>, %cache: tensor<5x16x80xf32>, %block_table: tensor<2x2xi32>, %seq_lens: tensor<2xi32>)
    -> (tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>) {
  %po, %pl = mla.decode_partial %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 1>
      scale 0.176776692 causal num_splits 1
      : (tensor<2x2x3x80xf32>, tensor<5x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>)
  return %po, %pl : tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>
}

// Two pieces over the rank's local positions, merged before returning.
func.func @rank1(%q: tensor<2x2x3x80xf32>, %cache: tensor<5x16x80xf32>, %block_table: tensor<2x2xi32>, %seq_lens: tensor<2xi32>)
    -> (tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>) {
  %po, %pl = mla.decode_partial %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 1, interleave = 1>
      scale 0.176776692 causal num_splits 2
      : (tensor<2x2x3x80xf32>, tensor<5x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x2x3x64xf32>, tensor<2x2x3x2xf32>)
  %o, %l = mla.combine %po, %pl : (tensor<2x2x2x3x64xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>)
  %go, %gl = mla.dcp_all_gather %o, %l world_size 1 : (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>) -> (tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>)
  return %go, %gl : tensor<1x2x2x3x64xf32>, tensor<1x2x3x2xf32>
}
