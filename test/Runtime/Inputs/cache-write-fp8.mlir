// An in-place cache update as the runtime's kernels express it: the cache is
// a memref argument viewed as a tensor, and the op's result is materialized
// back into it. fp8_ds_mla rows for L = 128, R = 16: 128 + 4 + 32 bytes.
func.func @cache_write(%kv_c: tensor<5x128xf32>, %k_pe: tensor<5x1x16xf32>, %slots: tensor<5xi32>, %kv_cache: memref<4x16x164xi8>) {
  %cache = bufferization.to_tensor %kv_cache restrict writable : memref<4x16x164xi8> to tensor<4x16x164xi8>
  %written = mla.cache_write %kv_c, %k_pe, %slots layout #mla.cache_layout<format = fp8_ds_mla, page_size = 16> into %cache
      : tensor<5x128xf32>, tensor<5x1x16xf32>, tensor<5xi32> into tensor<4x16x164xi8>
  bufferization.materialize_in_destination %written in restrict writable %kv_cache
      : (tensor<4x16x164xi8>, memref<4x16x164xi8>) -> ()
  return
}
