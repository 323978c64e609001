// DeepSeek-V3 chunked-context prefill for one layer at TP1 (N = 128, P = 128,
// R = 64, V = 128, L = 512, bf16 cache, 64-token pages): 2 requests with 96
// new tokens in all, whose earlier context is already in the paged cache.
// The new tokens' latent rows are written to the cache first, then attention
// runs with at most 1024 context rows up-projected at a time.
module {
  func.func @prefill_layer(%q: tensor<96x128x192xbf16>,           // [T, N, P+R]
                           %kv_c: tensor<96x512xbf16>,             // [T, L]
                           %k_pe: tensor<96x1x64xbf16>,            // [T, 1, R]
                           %kv_b_proj: tensor<32768x512xbf16>,     // [N*(P+V), L]
                           %cache: tensor<96x64x576xbf16>,         // [pages, page, L+R]
                           %slot_mapping: tensor<96xi32>,          // [T]
                           %block_table: tensor<2x48xi32>,         // [B, maxPages]
                           %query_start_loc: tensor<3xi32>,        // [B+1]
                           %seq_lens: tensor<2xi32>)               // [B], context + new
      -> tensor<96x128x128xbf16> {
    %cache1 = mla.cache_write %kv_c, %k_pe, %slot_mapping
        layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
        : tensor<96x512xbf16>, tensor<96x1x64xbf16>, tensor<96xi32> into tensor<96x64x576xbf16>
    %out = mla.prefill %q, %kv_c, %k_pe, %kv_b_proj, %cache1[%block_table, %query_start_loc, %seq_lens]
        layout #mla.cache_layout<format = bf16, page_size = 64>
        scale 0.0721687824 workspace_rows 1024
        : (tensor<96x128x192xbf16>, tensor<96x512xbf16>, tensor<96x1x64xbf16>, tensor<32768x512xbf16>,
           tensor<96x64x576xbf16>, tensor<2x48xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<96x128x128xbf16>
    return %out : tensor<96x128x128xbf16>
  }
}
