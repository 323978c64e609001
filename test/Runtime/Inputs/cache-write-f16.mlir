// A cache update in value form: the function returns the written cache.
// Tensor arguments are never written, so the result is a new array and the
// argument keeps its contents.
func.func @cache_write(%kv_c: tensor<4x64xf16>, %k_pe: tensor<4x16xf16>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf16>)
    -> tensor<8x16x80xf16> {
  %written = mla.cache_write %kv_c, %k_pe, %slots layout #mla.cache_layout<format = f16, page_size = 16> into %cache
      : tensor<4x64xf16>, tensor<4x16xf16>, tensor<4xi32> into tensor<8x16x80xf16>
  return %written : tensor<8x16x80xf16>
}
