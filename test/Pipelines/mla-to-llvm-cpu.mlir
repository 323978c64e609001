// RUN: mla-opt %s --mla-to-llvm-cpu | FileCheck %s
// RUN: mla-opt %s --mla-to-llvm-cpu="workspace-rows=64" | FileCheck %s

// The whole CPU pipeline ends in the LLVM dialect. A cache write updates the
// caller's buffer in place: the entry returns nothing, and no cache-sized
// allocation or copy appears.
// CHECK-LABEL: llvm.func @cache_write(
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: memrefCopy
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_cache_write(
// CHECK-NOT: !llvm.struct<{{.*}}> {{.*}}-> !llvm.struct
func.func @cache_write(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) -> tensor<8x16x80xf32> {
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32, page_size = 16> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x80xf32>
  return %0 : tensor<8x16x80xf32>
}
