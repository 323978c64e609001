// Decode shapes for the ptxas test: one module per shape.
module @shape0 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
// -----
module @shape1 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}
// -----
module @shape2 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x2x16x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        : (tensor<?x2x16x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>)
    return %o, %l : tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>
  }
}
// -----
module @shape3 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x32x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x32x512xbf16>, tensor<?x32x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<?x1x32x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x32x512xbf16>, tensor<?x32x1xf32>)
    return %o, %l : tensor<?x1x32x512xbf16>, tensor<?x32x1xf32>
  }
}
// -----
module @shape4 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x2x64x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x2x64x512xbf16>, tensor<?x64x2xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        : (tensor<?x2x64x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x2x64x512xbf16>, tensor<?x64x2xf32>)
    return %o, %l : tensor<?x2x64x512xbf16>, tensor<?x64x2xf32>
  }
}
// -----
module @shape5 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x16x288xbf16>, %cache: tensor<?x64x288xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x16x256xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x288xbf16>, tensor<?x64x288xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x16x256xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x256xbf16>, tensor<?x16x1xf32>
  }
}
