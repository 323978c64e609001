// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck --check-prefix=PTX %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// sm_100a plans 128-token pages, so the same gathers are assembled with those.
// RUN: %if ptxas %{ sed -e 's/page_size = 64/page_size = 128/' -e 's/?x64x/?x128x/g' %s | env CUDA_ROOT=/usr/local/cuda mla-opt --mla-to-nvvm="chip=sm_100a format=bin" -o /dev/null %}

// One `mla_gather_cache` kernel per op: one warp per workspace row, whose
// request is found by a binary search of cu_rows (an scf.while), then a
// bounds-checked block-table lookup (logical page against maxPages, the
// physical page against numPages) and 16-byte workspace stores.

// bf16 into bf16: a bit-exact vector copy of 8 entries per lane and step,
// 72 groups of a 576-entry row over 3 lane steps.
// CHECK-LABEL: gpu.func @mla_gather_cache(
// CHECK-SAME:    %[[CACHE:[^:]*]]: !llvm.ptr<1>, %[[TABLE:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %[[CU:[^:]*]]: !llvm.ptr<1>, %[[WS:[^:]*]]: !llvm.ptr<1>, %[[B:[^:]*]]: i32, %[[MAXP:[^:]*]]: i32, %[[NUMP:[^:]*]]: i32, %[[W:[^:]*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         %[[ROW:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi slt, %[[ROW]], %[[W]] : i32
// CHECK:         scf.while
// CHECK:           llvm.getelementptr %[[CU]][
// CHECK:           arith.cmpi sle, %{{.*}}, %[[ROW]] : i32
// CHECK:         arith.cmpi sle, %{{.*}}, %[[B]] : i32
// CHECK:         arith.divui %{{.*}}, %c64_i32 : i32
// CHECK:         arith.cmpi ult, %{{.*}}, %[[MAXP]] : i32
// CHECK:         llvm.getelementptr %[[TABLE]][
// CHECK:         %[[PAGE:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         arith.cmpi ult, %[[PAGE]], %[[NUMP]] : i32
// CHECK:         arith.constant 1152 : i64
// CHECK:         llvm.getelementptr %[[CACHE]][
// CHECK:         llvm.getelementptr %[[WS]][
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c3_i32
// CHECK:           arith.constant 72 : i32
// CHECK:           %[[V:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK-NOT:       arith.truncf
// CHECK:           llvm.store %[[V]], %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:         gpu.return
func.func @bf16(%c: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xbf16>) -> tensor<?x576xbf16> {
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = bf16, page_size = 64> latent_dim 512 into %ws
     : tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xbf16>
  return %r : tensor<?x576xbf16>
}

// An f32 cache into a bf16 workspace: one rounding per entry.
// CHECK-LABEL: gpu.func @mla_gather_cache_1(
// CHECK:         arith.constant 2304 : i64
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf32>
// CHECK-COUNT-8: arith.truncf %{{.*}} : f32 to bf16
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
func.func @f32_to_bf16(%c: tensor<?x64x576xf32>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xbf16>) -> tensor<?x576xbf16> {
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = f32, page_size = 64> into %ws
     : tensor<?x64x576xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xbf16>
  return %r : tensor<?x576xbf16>
}

// fp8_e4m3, per-tensor scale: 8 e4m3 bytes (one 8-byte load) per lane, decoded with integer
// operations (sign << 24, (exp + 120) << 23, mantissa << 20; subnormals as
// m / 512 with the sign; 0x7F codes to NaN), then times the scale: the f32
// the trailing kv_scale parameter points at, loaded once per warp (the
// layout's 0.02 is the CPU lowering's and is not baked in).
// CHECK-LABEL: gpu.func @mla_gather_cache_2(
// CHECK-SAME:    %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[KVS:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK-NOT:     2.000000e-02
// CHECK:         %[[SCALE:.*]] = llvm.load %[[KVS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:         arith.constant 576 : i64
// CHECK-NOT:     llvm.load %[[KVS]]
// CHECK:         llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<8xi8>
// CHECK:         arith.extui %{{.*}} : i8 to i32
// CHECK:         arith.shli %{{.*}}, %c24_i32
// CHECK:         arith.addi %{{.*}}, %c120_i32
// CHECK:         arith.uitofp
// CHECK:         arith.negf
// CHECK:         arith.constant 0x7FC00000 : f32
// CHECK:         arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT:     2.000000e-02
// CHECK:         gpu.return
func.func @fp8(%c: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xbf16>) -> tensor<?x576xbf16> {
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.0e-02 : f32> into %ws
     : tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xbf16>
  return %r : tensor<?x576xbf16>
}

// fp8_e4m3_token: 584-byte rows (8-byte aligned loads); s0 at byte 576 for
// latent groups (first < 512), s1 at byte 580 for the RoPE ones.
// CHECK-LABEL: gpu.func @mla_gather_cache_3(
// CHECK:         arith.constant 584 : i64
// CHECK:         %[[S0:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:         arith.constant 580 : i64
// CHECK:         %[[S1:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:         %[[LAT:.*]] = arith.cmpi slt, %{{.*}}, %c512_i32 : i32
// CHECK:         %[[S:.*]] = arith.select %[[LAT]], %[[S0]], %[[S1]] : f32
// CHECK:         llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<8xi8>
// CHECK:         arith.mulf %{{.*}}, %[[S]] : f32
func.func @fp8_token(%c: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xbf16>) -> tensor<?x576xbf16> {
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> latent_dim 512 into %ws
     : tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xbf16>
  return %r : tensor<?x576xbf16>
}

// fp8_ds_mla into f32 (L inferred from the 656-byte rows): latent groups
// read e4m3 bytes and their tile's scale, RoPE groups read bf16 from byte
// 528 on; 4 f32 entries (16 bytes) per store.
// CHECK-LABEL: gpu.func @mla_gather_cache_4(
// CHECK:         arith.constant 656 : i64
// CHECK:         scf.if %{{.*}} -> (vector<4xf32>) {
// CHECK:           llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:           llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> vector<4xi8>
// CHECK:         } else {
// CHECK:           arith.constant 528 : i32
// CHECK:           llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<4xi16>
// CHECK:           arith.shli %{{.*}}, %c16_i32
// CHECK:         }
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
func.func @ds_mla(%c: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xf32>) -> tensor<?x576xf32> {
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %ws
     : tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xf32>
  return %r : tensor<?x576xf32>
}

// In the PTX, the bf16 copy is one 16-byte load and one 16-byte store per
// lane and step, fp8_e4m3's kv_scale the last parameter, loaded once from
// global memory and multiplied into every value, and fp8_ds_mla's RoPE part
// one 8-byte load of 4 bf16.
// PTX: .visible .entry mla_gather_cache(
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTX: .visible .entry mla_gather_cache_1(
// PTX: .visible .entry mla_gather_cache_2(
// PTX: .param .u32 mla_gather_cache_2_param_8,\0A\09.param .u64 .ptr .global .align 1 mla_gather_cache_2_param_9\0A)
// PTX: ld.param.b64 \09[[KVS:%rd[0-9]+]], [mla_gather_cache_2_param_9]
// PTX: ld.global.b32 \09[[SCALE:%r[0-9]+]], {{\[}}[[KVS]]]
// PTX: mul.rn.f32 \09%r{{[0-9]+}}, [[SCALE]], %r{{[0-9]+}};
// PTX: .visible .entry mla_gather_cache_4(
// PTX: ld.global.v4.b16
