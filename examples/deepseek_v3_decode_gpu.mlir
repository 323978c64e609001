// The GPU form of deepseek_v3_decode.mlir: the same layer with the weights
// already split at load time (W_UK^T [N, P, L], W_UV [N, L, V]), so every op
// has a GPU kernel: absorb_q, decode (decode_partial + combine) and
// up_proj_out. Compile it: `mla-opt examples/deepseek_v3_decode_gpu.mlir
// --mla-to-nvvm="chip=sm_90a format=isa"` (or chip=sm_100a with 128-token
// pages).
module {
  func.func @decode_layer(%q: tensor<4x2x128x192xbf16>,          // [B, Sq, N, P+R]
                          %w_uk_t: tensor<128x128x512xbf16>,      // [N, P, L]
                          %w_uv: tensor<128x512x128xbf16>,        // [N, L, V]
                          %cache: tensor<160x64x576xbf16>,        // [pages, page, L+R]
                          %block_table: tensor<4x32xi32>,         // [B, maxPages]
                          %seq_lens: tensor<4xi32>)               // [B]
      -> (tensor<8x16384xbf16>, tensor<4x128x2xf32>) {
    // Absorb W_UK into the query rows ([B*Sq] tokens).
    %q_tok = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<4x2x128x192xbf16> into tensor<8x128x192xbf16>
    %q_abs = mla.absorb_q %q_tok, %w_uk_t
        : tensor<8x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<8x128x576xbf16>
    %q_dec = tensor.expand_shape %q_abs [[0, 1], [2], [3]] output_shape [4, 2, 128, 576]
        : tensor<8x128x576xbf16> into tensor<4x2x128x576xbf16>
    // MQA over the 576-wide latent cache; scale = (P+R)^-0.5 = 192^-0.5.
    %o_lat, %lse = mla.decode %q_dec, %cache[%block_table, %seq_lens]
        layout #mla.cache_layout<format = bf16, page_size = 64>
        scale 0.0721687824 causal
        : (tensor<4x2x128x576xbf16>, tensor<160x64x576xbf16>, tensor<4x32xi32>, tensor<4xi32>)
        -> (tensor<4x2x128x512xbf16>, tensor<4x128x2xf32>)
    // Up-project the latent output with W_UV.
    %o_tok = tensor.collapse_shape %o_lat [[0, 1], [2], [3]] : tensor<4x2x128x512xbf16> into tensor<8x128x512xbf16>
    %out = mla.up_proj_out %o_tok, %w_uv
        : tensor<8x128x512xbf16>, tensor<128x512x128xbf16> -> tensor<8x16384xbf16>
    return %out, %lse : tensor<8x16384xbf16>, tensor<4x128x2xf32>
  }
}
