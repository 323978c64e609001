// RUN: mla-opt %s --convert-mla-to-linalg | FileCheck %s
// RUN: mla-opt %s --convert-mla-to-linalg --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize | FileCheck %s --check-prefix=INPLACE

// cache_write is a loop over tokens that carries the cache; a slot passes
// one unsigned compare against pages * page_size (negative slots fail it),
// and the row is converted by linalg.map ops writing slices of the cache.
// CHECK-LABEL: func.func @write_bf16(
// CHECK-SAME: %[[KV:[a-z0-9_]+]]: tensor<4x32xf32>, %[[PE:[a-z0-9_]+]]: tensor<4x1x16xf32>, %[[SLOTS:[a-z0-9_]+]]: tensor<4xi32>, %[[CACHE:[a-z0-9_]+]]: tensor<8x16x48xbf16>)
// CHECK-NOT: mla.
// CHECK: %[[NSLOTS:.*]] = arith.muli %c8, %c16 : index
// CHECK: %[[RES:.*]] = scf.for %[[T:[a-z0-9_]+]] = %{{.*}} to %c4 step %{{.*}} iter_args(%[[C:[a-z0-9_]+]] = %[[CACHE]]) -> (tensor<8x16x48xbf16>)
// CHECK:   %[[S32:.*]] = tensor.extract %[[SLOTS]][%[[T]]] : tensor<4xi32>
// CHECK:   %[[SLOT:.*]] = arith.index_cast %[[S32]] : i32 to index
// CHECK:   %[[OK:.*]] = arith.cmpi ult, %[[SLOT]], %[[NSLOTS]] : index
// CHECK:   %[[NEW:.*]] = scf.if %[[OK]] -> (tensor<8x16x48xbf16>)
// CHECK:     %[[PAGE:.*]] = arith.divui %[[SLOT]], %c16
// CHECK:     %[[OFF:.*]] = arith.remui %[[SLOT]], %c16
// CHECK:     %[[LAT:.*]] = tensor.extract_slice %[[KV]][%[[T]], 0] [1, 32] [1, 1] : tensor<4x32xf32> to tensor<32xf32>
// CHECK:     %[[ROPE:.*]] = tensor.extract_slice %[[PE]][%[[T]], 0, 0] [1, 1, 16] [1, 1, 1] : tensor<4x1x16xf32> to tensor<16xf32>
// CHECK:     %[[DST0:.*]] = tensor.extract_slice %[[C]][%[[PAGE]], %[[OFF]], 0] [1, 1, 32] [1, 1, 1] : tensor<8x16x48xbf16> to tensor<32xbf16>
// CHECK:     %[[M0:.*]] = linalg.map { arith.truncf } ins(%[[LAT]] : tensor<32xf32>) outs(%[[DST0]] : tensor<32xbf16>)
// CHECK:     %[[C1:.*]] = tensor.insert_slice %[[M0]] into %[[C]][%[[PAGE]], %[[OFF]], 0] [1, 1, 32] [1, 1, 1]
// CHECK:     %[[DST1:.*]] = tensor.extract_slice %[[C1]][%[[PAGE]], %[[OFF]], 32] [1, 1, 16] [1, 1, 1]
// CHECK:     %[[M1:.*]] = linalg.map { arith.truncf } ins(%[[ROPE]] : tensor<16xf32>) outs(%[[DST1]] : tensor<16xbf16>)
// CHECK:     %[[C2:.*]] = tensor.insert_slice %[[M1]] into %[[C1]][%[[PAGE]], %[[OFF]], 32] [1, 1, 16] [1, 1, 1]
// CHECK:     scf.yield %[[C2]]
// CHECK:   } else {
// CHECK:     scf.yield %[[C]]
// CHECK:   scf.yield %[[NEW]]
// CHECK: return %[[RES]]

// The whole write happens in the caller's cache buffer: no allocation or copy
// of the cache, and the result is the argument itself.
// INPLACE-LABEL: func.func @write_bf16(
// INPLACE-SAME: %[[CACHE:[a-z0-9_]+]]: memref<8x16x48xbf16>) -> memref<8x16x48xbf16>
// INPLACE-NOT: memref.alloc
// INPLACE: linalg.map { arith.truncf }
// INPLACE-NOT: memref.alloc
// INPLACE: return %[[CACHE]] : memref<8x16x48xbf16>
func.func @write_bf16(%kv: tensor<4x32xf32>, %pe: tensor<4x1x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x48xbf16>) -> tensor<8x16x48xbf16> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 16> into %cache
      : tensor<4x32xf32>, tensor<4x1x16xf32>, tensor<4xi32> into tensor<8x16x48xbf16>
  return %r : tensor<8x16x48xbf16>
}

// bf16 and f16 have the same width: the conversion goes through f32.
// CHECK-LABEL: func.func @write_f16_from_bf16(
// CHECK: linalg.map ins(%{{.*}} : tensor<32xbf16>) outs(%{{.*}} : tensor<32xf16>)
// CHECK:   %[[X:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:   %[[Y:.*]] = arith.truncf %[[X]] : f32 to f16
// CHECK:   linalg.yield %[[Y]] : f16
// CHECK: linalg.map ins(%{{.*}} : tensor<16xbf16>) outs(%{{.*}} : tensor<16xf16>)
func.func @write_f16_from_bf16(%kv: tensor<4x32xbf16>, %pe: tensor<4x16xbf16>, %slots: tensor<4xi32>, %cache: tensor<8x16x48xf16>) -> tensor<8x16x48xf16> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f16> into %cache
      : tensor<4x32xbf16>, tensor<4x16xbf16>, tensor<4xi32> into tensor<8x16x48xf16>
  return %r : tensor<8x16x48xf16>
}

// Per-tensor fp8 with every dimension dynamic: byte = e4m3(x / 2.0), a true
// division; the RoPE part starts at column L.
// CHECK-LABEL: func.func @write_fp8_dynamic(
// CHECK-SAME: %[[KV:[a-z0-9_]+]]: tensor<?x?xf32>, %[[PE:[a-z0-9_]+]]: tensor<?x?xf32>, %[[SLOTS:[a-z0-9_]+]]: tensor<?xi32>, %[[CACHE:[a-z0-9_]+]]: tensor<?x?x?xi8>)
// CHECK: %[[T:.*]] = tensor.dim %[[KV]], %c0
// CHECK: %[[PS:.*]] = tensor.dim %[[CACHE]], %c1
// CHECK: %[[NP:.*]] = tensor.dim %[[CACHE]], %c0
// CHECK: %[[NSLOTS:.*]] = arith.muli %[[NP]], %[[PS]] : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]] step %{{.*}} iter_args(%{{.*}} = %[[CACHE]]) -> (tensor<?x?x?xi8>)
// CHECK:   arith.cmpi ult, %{{.*}}, %[[NSLOTS]] : index
// CHECK:   scf.if
// CHECK:     %[[PAGE:.*]] = arith.divui %{{.*}}, %[[PS]] : index
// CHECK:     %[[OFF:.*]] = arith.remui %{{.*}}, %[[PS]] : index
// CHECK:     %[[L:.*]] = tensor.dim %[[KV]], %c1
// CHECK:     %[[SCALE:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:     linalg.map ins(%{{.*}} : tensor<?xf32>) outs(%{{.*}} : tensor<?xi8>)
// CHECK:       %[[Q:.*]] = arith.divf %{{.*}}, %[[SCALE]] : f32
// CHECK:       math.roundeven
// CHECK:       %[[B:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK:       linalg.yield %[[B]] : i8
// CHECK:     tensor.insert_slice %{{.*}} into %{{.*}}[%[[PAGE]], %[[OFF]], 0]
// CHECK:     tensor.extract_slice %{{.*}}[%[[PAGE]], %[[OFF]], %[[L]]]
// CHECK:     linalg.map
// CHECK:       arith.divf %{{.*}}, %[[SCALE]] : f32
// CHECK:     tensor.insert_slice %{{.*}} into %{{.*}}[%[[PAGE]], %[[OFF]], %[[L]]]

// INPLACE-LABEL: func.func @write_fp8_dynamic(
// INPLACE-SAME: %[[CACHE:[a-z0-9_]+]]: memref<?x?x?xi8>) -> memref<?x?x?xi8>
// INPLACE-NOT: memref.alloc
// INPLACE: return %[[CACHE]] : memref<?x?x?xi8>
func.func @write_fp8_dynamic(%kv: tensor<?x?xf32>, %pe: tensor<?x?xf32>, %slots: tensor<?xi32>, %cache: tensor<?x?x?xi8>) -> tensor<?x?x?xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, scale = 2.0 : f32> into %cache
      : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xi32> into tensor<?x?x?xi8>
  return %r : tensor<?x?x?xi8>
}

// Per-token fp8: the floored amax of both parts is reduced for all tokens
// before the loop; each row divides by amax / 448 and stores s0 and s1 as
// four bytes each after the D = 48 e4m3 bytes.
// CHECK-LABEL: func.func @write_fp8_token(
// CHECK-SAME: %[[KV:[a-z0-9_]+]]: tensor<4x32xbf16>, %[[PE:[a-z0-9_]+]]: tensor<4x1x16xbf16>
// CHECK: %[[FLOOR:.*]] = arith.constant 9.99999974E-5 : f32
// CHECK: %[[INIT0:.*]] = linalg.fill ins(%[[FLOOR]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[AMAX0:.*]] = linalg.reduce ins(%[[KV]] : tensor<4x32xbf16>) outs(%[[INIT0]] : tensor<4xf32>) dimensions = [1]
// CHECK:   arith.extf
// CHECK:   math.absf
// CHECK:   arith.maximumf
// CHECK: %[[AMAX1:.*]] = linalg.reduce ins(%[[PE]] : tensor<4x1x16xbf16>) outs(%{{.*}} : tensor<4xf32>) dimensions = [1, 2]
// CHECK: scf.for %[[T:[a-z0-9_]+]] =
// CHECK:   scf.if
// CHECK:     %[[MAX:.*]] = arith.constant 4.480000e+02 : f32
// CHECK:     %[[A0:.*]] = tensor.extract %[[AMAX0]][%[[T]]] : tensor<4xf32>
// CHECK:     %[[S0:.*]] = arith.divf %[[A0]], %[[MAX]] : f32
// CHECK:     %[[A1:.*]] = tensor.extract %[[AMAX1]][%[[T]]] : tensor<4xf32>
// CHECK:     %[[S1:.*]] = arith.divf %[[A1]], %[[MAX]] : f32
// CHECK:     linalg.map ins(%{{.*}} : tensor<32xbf16>) outs(%{{.*}} : tensor<32xi8>)
// CHECK:       arith.divf %{{.*}}, %[[S0]] : f32
// CHECK:     linalg.map ins(%{{.*}} : tensor<16xbf16>) outs(%{{.*}} : tensor<16xi8>)
// CHECK:       arith.divf %{{.*}}, %[[S1]] : f32
// CHECK:     arith.bitcast %[[S0]] : f32 to i32
// CHECK-COUNT-4: tensor.insert %{{.*}} : tensor<8x16x56xi8>
// CHECK:     arith.bitcast %[[S1]] : f32 to i32
// CHECK-COUNT-4: tensor.insert %{{.*}} : tensor<8x16x56xi8>
// CHECK:     scf.yield

// The amax tensors are the only allocations.
// INPLACE-LABEL: func.func @write_fp8_token(
// INPLACE-SAME: %[[CACHE:[a-z0-9_]+]]: memref<8x16x56xi8>) -> memref<8x16x56xi8>
// INPLACE-NOT: memref.alloc() {{.*}} : memref<8x16x56xi8>
// INPLACE-NOT: memref.copy {{.*}} to memref<8x16x56xi8>
// INPLACE: return %[[CACHE]] : memref<8x16x56xi8>
func.func @write_fp8_token(%kv: tensor<4x32xbf16>, %pe: tensor<4x1x16xbf16>, %slots: tensor<4xi32>, %cache: tensor<8x16x56xi8>) -> tensor<8x16x56xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token> into %cache
      : tensor<4x32xbf16>, tensor<4x1x16xbf16>, tensor<4xi32> into tensor<8x16x56xi8>
  return %r : tensor<8x16x56xi8>
}

// fp8_ds_mla (L = 256, R = 64): one amax per 128-wide tile from a [T, 2, 128]
// view, a loop over tiles (e4m3 bytes, then the tile's f32 scale at
// L + 4 * k) and a loop writing each RoPE value as two bf16 bytes.
// CHECK-LABEL: func.func @write_ds_mla(
// CHECK-SAME: %[[KV:[a-z0-9_]+]]: tensor<?x256xf32>, %[[PE:[a-z0-9_]+]]: tensor<?x1x64xf32>
// CHECK: %[[TILED:.*]] = tensor.expand_shape %[[KV]] {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 2, 128] : tensor<?x256xf32> into tensor<?x2x128xf32>
// CHECK: %[[AMAX:.*]] = linalg.reduce ins(%[[TILED]] : tensor<?x2x128xf32>) outs(%{{.*}} : tensor<?x2xf32>) dimensions = [2]
// CHECK: scf.for %[[T:[a-z0-9_]+]] =
// CHECK:   scf.if
// CHECK:     %[[PAGE:.*]] = arith.divui %{{.*}}, %c64
// CHECK:     %[[OFF:.*]] = arith.remui %{{.*}}, %c64
// CHECK:     %[[TILES:.*]] = arith.divui %c256, %c128
// CHECK:     %[[C0:.*]] = scf.for %[[K:[a-z0-9_]+]] = %{{.*}} to %[[TILES]] step %{{.*}} iter_args(%[[CT:[a-z0-9_]+]] = %{{.*}})
// CHECK:       %[[A:.*]] = tensor.extract %[[AMAX]][%[[T]], %[[K]]] : tensor<?x2xf32>
// CHECK:       %[[S:.*]] = arith.divf %[[A]], %{{.*}} : f32
// CHECK:       %[[COL:.*]] = arith.muli %[[K]], %c128
// CHECK:       %[[SRC:.*]] = tensor.extract_slice %[[KV]][%[[T]], %[[COL]]] [1, 128] [1, 1] : tensor<?x256xf32> to tensor<128xf32>
// CHECK:       %[[DST:.*]] = tensor.extract_slice %[[CT]][%[[PAGE]], %[[OFF]], %[[COL]]] [1, 1, 128] [1, 1, 1]
// CHECK:       linalg.map ins(%[[SRC]] : tensor<128xf32>) outs(%[[DST]] : tensor<128xi8>)
// CHECK:         arith.divf %{{.*}}, %[[S]] : f32
// CHECK:       arith.muli %[[K]], %c4
// CHECK:       arith.bitcast %[[S]] : f32 to i32
// CHECK-COUNT-4: tensor.insert %{{.*}} : tensor<?x64x392xi8>
// CHECK:     scf.for %[[R:[a-z0-9_]+]] = %{{.*}} to %c64{{[_0-9]*}} step %{{.*}} iter_args(%{{.*}} = %[[C0]])
// CHECK:       tensor.extract %[[PE]][%[[T]], %{{.*}}, %[[R]]] : tensor<?x1x64xf32>
// CHECK:       arith.addi %c32767_i32
// CHECK-COUNT-2: tensor.insert %{{.*}} : tensor<?x64x392xi8>

// INPLACE-LABEL: func.func @write_ds_mla(
// INPLACE-SAME: %[[CACHE:[a-z0-9_]+]]: memref<?x64x392xi8>) -> memref<?x64x392xi8>
// INPLACE-NOT: memref.alloc({{.*}}) {{.*}} : memref<?x64x392xi8>
// INPLACE-NOT: memref.copy {{.*}} to memref<?x64x392xi8>
// INPLACE: return %[[CACHE]] : memref<?x64x392xi8>
func.func @write_ds_mla(%kv: tensor<?x256xf32>, %pe: tensor<?x1x64xf32>, %slots: tensor<?xi32>, %cache: tensor<?x64x392xi8>) -> tensor<?x64x392xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %cache
      : tensor<?x256xf32>, tensor<?x1x64xf32>, tensor<?xi32> into tensor<?x64x392xi8>
  return %r : tensor<?x64x392xi8>
}

// gather_cache loops over requests and their workspace rows
// [cu_rows[b], min(cu_rows[b+1], W)); row r reads position
// starts[b] + r - cu_rows[b] through the block table and fills the workspace
// row with a linalg.generic that loads element d of the cache row.
// CHECK-LABEL: func.func @gather_bf16(
// CHECK-SAME: %[[CACHE:[a-z0-9_]+]]: tensor<8x16x48xbf16>, %[[BT:[a-z0-9_]+]]: tensor<2x4xi32>, %[[STARTS:[a-z0-9_]+]]: tensor<2xi32>, %[[CU:[a-z0-9_]+]]: tensor<3xi32>, %[[WS:[a-z0-9_]+]]: tensor<?x48xf32>)
// CHECK: %[[W:.*]] = tensor.dim %[[WS]], %c0
// CHECK: %[[RES:.*]] = scf.for %[[B:[a-z0-9_]+]] = %{{.*}} to %c2 step %{{.*}} iter_args(%[[WB:[a-z0-9_]+]] = %[[WS]]) -> (tensor<?x48xf32>)
// CHECK:   %[[F32:.*]] = tensor.extract %[[CU]][%[[B]]]
// CHECK:   %[[FIRST:.*]] = arith.index_cast %[[F32]]
// CHECK:   %[[NEXT:.*]] = arith.addi %[[B]], %c1
// CHECK:   %[[E32:.*]] = tensor.extract %[[CU]][%[[NEXT]]]
// CHECK:   %[[END:.*]] = arith.index_cast %[[E32]]
// CHECK:   %[[LAST:.*]] = arith.minsi %[[END]], %[[W]] : index
// CHECK:   %[[S32:.*]] = tensor.extract %[[STARTS]][%[[B]]]
// CHECK:   %[[START:.*]] = arith.index_cast %[[S32]]
// CHECK:   %[[ROWS:.*]] = scf.for %[[R:[a-z0-9_]+]] = %[[FIRST]] to %[[LAST]] step %{{.*}} iter_args(%[[WR:[a-z0-9_]+]] = %[[WB]])
// CHECK:     %[[REL:.*]] = arith.subi %[[R]], %[[FIRST]]
// CHECK:     %[[POS:.*]] = arith.addi %[[START]], %[[REL]]
// CHECK:     %[[LP:.*]] = arith.divui %[[POS]], %c16
// CHECK:     %[[P32:.*]] = tensor.extract %[[BT]][%[[B]], %[[LP]]] : tensor<2x4xi32>
// CHECK:     %[[PAGE:.*]] = arith.index_cast %[[P32]]
// CHECK:     %[[SLOT:.*]] = arith.remui %[[POS]], %c16
// CHECK:     %[[DST:.*]] = tensor.extract_slice %[[WR]][%[[R]], 0] [1, 48] [1, 1] : tensor<?x48xf32> to tensor<48xf32>
// CHECK:     %[[ROW:.*]] = linalg.generic {{.*}} outs(%[[DST]] : tensor<48xf32>)
// CHECK:       %[[D:.*]] = linalg.index 0 : index
// CHECK:       %[[V:.*]] = tensor.extract %[[CACHE]][%[[PAGE]], %[[SLOT]], %[[D]]] : tensor<8x16x48xbf16>
// CHECK:       %[[X:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK:       linalg.yield %[[X]] : f32
// CHECK:     %[[UPD:.*]] = tensor.insert_slice %[[ROW]] into %[[WR]][%[[R]], 0] [1, 48] [1, 1]
// CHECK:     scf.yield %[[UPD]]
// CHECK:   scf.yield %[[ROWS]]
// CHECK: return %[[RES]]

// INPLACE-LABEL: func.func @gather_bf16(
// INPLACE-SAME: %[[WS:[a-z0-9_]+]]: memref<?x48xf32>) -> memref<?x48xf32>
// INPLACE-NOT: memref.alloc
// INPLACE: return %[[WS]] : memref<?x48xf32>
func.func @gather_bf16(%cache: tensor<8x16x48xbf16>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<?x48xf32>) -> tensor<?x48xf32> {
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = bf16> into %ws
      : tensor<8x16x48xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<?x48xf32>
  return %r : tensor<?x48xf32>
}

// fp8_ds_mla rows (L = 256 from the 392-byte row and D = 320) dequantised
// into a bf16 workspace: the latent branch (tile scale at byte 256 + 4 * tile)
// or the bf16 RoPE branch (at byte 264 + 2 * (d - 256)) by d < 256, then
// rounded to bf16.
// CHECK-LABEL: func.func @gather_ds_mla(
// CHECK-SAME: %[[CACHE:[a-z0-9_]+]]: tensor<?x?x392xi8>
// CHECK: %[[PS:.*]] = tensor.dim %[[CACHE]], %c1
// CHECK: scf.for
// CHECK:   arith.minsi %{{.*}}, %c64 : index
// CHECK:   scf.for
// CHECK:     arith.divui %{{.*}}, %[[PS]] : index
// CHECK:     linalg.generic {{.*}} outs(%{{.*}} : tensor<320xbf16>)
// CHECK:       %[[D:.*]] = linalg.index 0 : index
// CHECK:       %[[LAT:.*]] = arith.cmpi ult, %[[D]], %c256 : index
// CHECK:       arith.addi %c264
// CHECK:       %[[V:.*]] = arith.select %[[LAT]], %{{.*}}, %{{.*}} : f32
// CHECK:       %[[X:.*]] = arith.truncf %[[V]] : f32 to bf16
// CHECK:       linalg.yield %[[X]] : bf16
func.func @gather_ds_mla(%cache: tensor<?x?x392xi8>, %bt: tensor<?x?xi32>, %starts: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<64x320xbf16>) -> tensor<64x320xbf16> {
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla> into %ws
      : tensor<?x?x392xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<64x320xbf16>
  return %r : tensor<64x320xbf16>
}
