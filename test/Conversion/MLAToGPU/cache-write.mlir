// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck --check-prefix=PTX %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// sm_100a plans 128-token pages, so the same writes are assembled with those.
// RUN: %if ptxas %{ sed -e 's/page_size = 64/page_size = 128/' -e 's/x64x\([0-9]\)/x128x\1/g' %s | env CUDA_ROOT=/usr/local/cuda mla-opt --mla-to-nvvm="chip=sm_100a format=bin" -o /dev/null %}

// One `mla_cache_write` kernel per op (later ones get a numeric suffix):
// one warp per token, a slot check, then 16-byte vector stores per lane.

// bf16 into bf16: a bit-exact vector copy, 8 entries per lane and step.
// CHECK-LABEL: gpu.func @mla_cache_write(
// CHECK-SAME:    %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[SLOTS:.*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         %[[SLOT:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         arith.cmpi ult, %[[SLOT]], %[[SLOTS]] : i32
// CHECK:         arith.constant 1152 : i64
// CHECK:         %[[ROW:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK-NOT:     arith.truncf
// CHECK:         llvm.store %[[ROW]], %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:         gpu.return
func.func @bf16(%kv: tensor<?x512xbf16>, %pe: tensor<?x1x64xbf16>, %s: tensor<?xi32>, %c: tensor<16x64x576xbf16>) -> tensor<16x64x576xbf16> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = bf16, page_size = 64> into %c
     : tensor<?x512xbf16>, tensor<?x1x64xbf16>, tensor<?xi32> into tensor<16x64x576xbf16>
  return %r : tensor<16x64x576xbf16>
}

// f32 activations into an f16 cache (L = 256, R = 32): one rounding each.
// CHECK-LABEL: gpu.func @mla_cache_write_1(
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf32>
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<1>
func.func @f16_from_f32(%kv: tensor<?x256xf32>, %pe: tensor<?x32xf32>, %s: tensor<?xi32>, %c: tensor<?x64x288xf16>) -> tensor<?x64x288xf16> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = f16, page_size = 64> into %c
     : tensor<?x256xf32>, tensor<?x32xf32>, tensor<?xi32> into tensor<?x64x288xf16>
  return %r : tensor<?x64x288xf16>
}

// bf16 into an f32 cache: exact widening, 4 entries (16 bytes) per store.
// CHECK-LABEL: gpu.func @mla_cache_write_2(
// CHECK:         arith.constant 2304 : i64
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
func.func @f32(%kv: tensor<?x512xbf16>, %pe: tensor<?x64xbf16>, %s: tensor<?xi32>, %c: tensor<?x64x576xf32>) -> tensor<?x64x576xf32> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = f32, page_size = 64> into %c
     : tensor<?x512xbf16>, tensor<?x64xbf16>, tensor<?xi32> into tensor<?x64x576xf32>
  return %r : tensor<?x64x576xf32>
}

// fp8_e4m3, per-tensor scale: x / scale (a true division), then the e4m3
// encoder: saturation at 448, round-to-nearest-even of subnormals. The scale
// is the f32 the trailing kv_scale parameter points at, loaded once by each
// writing warp; the layout's 0.02 is the CPU lowering's and is not baked in.
// CHECK-LABEL: gpu.func @mla_cache_write_3(
// CHECK-SAME:    %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %[[KVS:.*]]: !llvm.ptr<1>) kernel
// CHECK-NOT:     2.000000e-02
// CHECK:         %[[SCALE:.*]] = llvm.load %[[KVS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT:     llvm.load %[[KVS]]
// CHECK:         arith.divf %{{.*}}, %[[SCALE]] : f32
// CHECK:         llvm.intr.minimum
// CHECK:         llvm.call_intrinsic "llvm.roundeven.f32"
// CHECK:         arith.fptoui
// CHECK:         arith.trunci %{{.*}} : i32 to i8
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK-NOT:     2.000000e-02
// CHECK:         gpu.return
func.func @fp8(%kv: tensor<?x512xbf16>, %pe: tensor<?x64xbf16>, %s: tensor<?xi32>, %c: tensor<?x64x576xi8>) -> tensor<?x64x576xi8> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.0e-02 : f32> into %c
     : tensor<?x512xbf16>, tensor<?x64xbf16>, tensor<?xi32> into tensor<?x64x576xi8>
  return %r : tensor<?x64x576xi8>
}

// fp8_e4m3_token: latent and RoPE amax reduced over the warp (5 butterfly
// steps each), 584-byte rows (8-byte aligned), s0/s1 stored by lane 0.
// CHECK-LABEL: gpu.func @mla_cache_write_4(
// CHECK:         arith.constant 584 : i64
// CHECK:         scf.for
// CHECK:         llvm.intr.maximum
// CHECK-COUNT-5: nvvm.shfl.sync bfly
// CHECK:         %[[S0:.*]] = arith.divf
// CHECK-COUNT-5: nvvm.shfl.sync bfly
// CHECK:         %[[S1:.*]] = arith.divf
// CHECK:         llvm.store %{{.*}} {alignment = 8 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK:         llvm.store %[[S0]], %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK:         llvm.store %[[S1]], %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
func.func @fp8_token(%kv: tensor<?x512xbf16>, %pe: tensor<?x64xbf16>, %s: tensor<?xi32>, %c: tensor<?x64x584xi8>) -> tensor<?x64x584xi8> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into %c
     : tensor<?x512xbf16>, tensor<?x64xbf16>, tensor<?xi32> into tensor<?x64x584xi8>
  return %r : tensor<?x64x584xi8>
}

// fp8_ds_mla: 8 lanes per 128-entry tile (3 butterfly steps), one f32 scale
// per tile at L + 4 * tile, then the RoPE part as bf16 bits (nearest even,
// NaN -> 0x7FC0) at L + 4 * L / 128.
// CHECK-LABEL: gpu.func @mla_cache_write_5(
// CHECK:         arith.constant 656 : i64
// CHECK-COUNT-3: nvvm.shfl.sync bfly
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK:         arith.divui %{{.*}}, %c8_i32
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK:         arith.constant 32704 : i32
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xi16>, !llvm.ptr<1>
func.func @ds_mla(%kv: tensor<?x512xbf16>, %pe: tensor<?x1x64xbf16>, %s: tensor<?xi32>, %c: tensor<?x64x656xi8>) -> tensor<?x64x656xi8> {
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %c
     : tensor<?x512xbf16>, tensor<?x1x64xbf16>, tensor<?xi32> into tensor<?x64x656xi8>
  return %r : tensor<?x64x656xi8>
}

// In the PTX, fp8_e4m3's kv_scale is the last parameter, loaded once from
// global memory and divided into every value.
// PTX: .entry mla_cache_write(
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTX: .entry mla_cache_write_3(
// PTX: .param .u64 .ptr .global .align 1 mla_cache_write_3_param_6\0A)
// PTX: ld.param.b64 \09[[KVS:%rd[0-9]+]], [mla_cache_write_3_param_6]
// PTX: ld.global.b32 \09[[SCALE:%r[0-9]+]], {{\[}}[[KVS]]]
// PTX: div.rn.f32 \09%r{{[0-9]+}}, %r{{[0-9]+}}, [[SCALE]];
// PTX: cvt.rni.f32.f32
// PTX: .entry mla_cache_write_4(
// PTX: shfl.sync.bfly.b32
// PTX: .entry mla_cache_write_5(
// PTX: shfl.sync.bfly.b32
