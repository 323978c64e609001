// RUN: mla-opt %s --mla-prepare-cpu-entry | FileCheck %s

// A public function returning the buffer it wrote in place loses that result
// and gets a C interface; other results stay.
// CHECK-LABEL: func.func @write_in_place(
// CHECK-SAME: %[[CACHE:.*]]: memref<4x16x8xf32>, %{{.*}}: memref<2xf32>) -> memref<2xf32>
// CHECK-SAME: llvm.emit_c_interface
// CHECK: memref.store %{{.*}}, %[[CACHE]]
// CHECK: return %{{.*}} : memref<2xf32>
func.func @write_in_place(%cache: memref<4x16x8xf32>, %x: memref<2xf32>) -> (memref<4x16x8xf32>, memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  memref.store %f, %cache[%c0, %c0, %c0] : memref<4x16x8xf32>
  %y = memref.alloc() : memref<2xf32>
  memref.copy %x, %y : memref<2xf32> to memref<2xf32>
  return %cache, %y : memref<4x16x8xf32>, memref<2xf32>
}

// Private helpers and declarations are not entry points.
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT: llvm.emit_c_interface
// CHECK: return
func.func private @helper(%x: memref<2xf32>) {
  return
}
// CHECK-LABEL: func.func private @external
// CHECK-NOT: llvm.emit_c_interface
func.func private @external(memref<2xf32>)
