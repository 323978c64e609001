// Executes mla.cache_write in every row format and mla.gather_cache on the
// results, and checks the stored bytes and the dequantised rows exactly.
// RUN: mla-opt %s --mla-to-llvm-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s
//
// The expected values are derived by hand below (float8 E4M3FN: bias 7,
// 3 mantissa bits, largest finite 448 = 0x7E, subnormals m * 2^-9; bf16: the
// top 16 bits of the f32, rounded to nearest even) and agree with
// test/python/mla_reference.py (cache_write_ref, gather_cache_ref).
//
// The functions under test are private: drop-equivalent-buffer-results only
// drops the (in-place) cache results of private functions.

func.func private @write_bf16(%kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %slots: tensor<3xi32>, %cache: tensor<2x16x6xbf16>) -> tensor<2x16x6xbf16> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 16> into %cache
      : tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<3xi32> into tensor<2x16x6xbf16>
  return %r : tensor<2x16x6xbf16>
}

func.func private @gather_bf16(%cache: tensor<2x16x6xbf16>, %bt: tensor<2x2xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = bf16> into %ws
      : tensor<2x16x6xbf16>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32> into tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// Dynamic token count, page count, batch and workspace rows.
func.func private @write_fp8(%kv: tensor<?x4xf32>, %pe: tensor<?x2xf32>, %slots: tensor<?xi32>, %cache: tensor<?x16x6xi8>) -> tensor<?x16x6xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, scale = 2.0 : f32> into %cache
      : tensor<?x4xf32>, tensor<?x2xf32>, tensor<?xi32> into tensor<?x16x6xi8>
  return %r : tensor<?x16x6xi8>
}

func.func private @gather_fp8(%cache: tensor<?x16x6xi8>, %bt: tensor<?x?xi32>, %starts: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_e4m3, scale = 2.0 : f32> into %ws
      : tensor<?x16x6xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x6xf32>
  return %r : tensor<?x6xf32>
}

func.func private @write_fp8_token(%kv: tensor<2x4xf32>, %pe: tensor<2x1x2xf32>, %slots: tensor<2xi32>, %cache: tensor<1x16x14xi8>) -> tensor<1x16x14xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token> into %cache
      : tensor<2x4xf32>, tensor<2x1x2xf32>, tensor<2xi32> into tensor<1x16x14xi8>
  return %r : tensor<1x16x14xi8>
}

func.func private @write_ds_mla(%kv: tensor<1x128xf32>, %pe: tensor<1x2xf32>, %slots: tensor<1xi32>, %cache: tensor<1x16x136xi8>) -> tensor<1x16x136xi8> {
  %r = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_ds_mla> into %cache
      : tensor<1x128xf32>, tensor<1x2xf32>, tensor<1xi32> into tensor<1x16x136xi8>
  return %r : tensor<1x16x136xi8>
}

func.func private @gather_ds_mla(%cache: tensor<1x16x136xi8>, %bt: tensor<1x1xi32>, %starts: tensor<1xi32>, %cu: tensor<2xi32>, %ws: tensor<2x130xf32>) -> tensor<2x130xf32> {
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla> into %ws
      : tensor<1x16x136xi8>, tensor<1x1xi32>, tensor<1xi32>, tensor<2xi32> into tensor<2x130xf32>
  return %r : tensor<2x130xf32>
}

// Prints bytes as unsigned values 0..255.
func.func private @print_bytes(%t: tensor<?x?x?xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %d0 = tensor.dim %t, %c0 : tensor<?x?x?xi8>
  %d1 = tensor.dim %t, %c1 : tensor<?x?x?xi8>
  %d2 = tensor.dim %t, %c2 : tensor<?x?x?xi8>
  %e = tensor.empty(%d0, %d1, %d2) : tensor<?x?x?xi32>
  %w = linalg.map { arith.extui } ins(%t : tensor<?x?x?xi8>) outs(%e : tensor<?x?x?xi32>)
  %u = tensor.cast %w : tensor<?x?x?xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  return
}

// Prints bf16 values as their bit patterns.
func.func private @print_bf16_bits(%t: tensor<?x?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %d0 = tensor.dim %t, %c0 : tensor<?x?x?xbf16>
  %d1 = tensor.dim %t, %c1 : tensor<?x?x?xbf16>
  %d2 = tensor.dim %t, %c2 : tensor<?x?x?xbf16>
  %e = tensor.empty(%d0, %d1, %d2) : tensor<?x?x?xi32>
  %w = linalg.map ins(%t : tensor<?x?x?xbf16>) outs(%e : tensor<?x?x?xi32>)
      (%x: bf16, %init: i32) {
        %b = arith.bitcast %x : bf16 to i16
        %z = arith.extui %b : i16 to i32
        linalg.yield %z : i32
      }
  %u = tensor.cast %w : tensor<?x?x?xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  return
}

func.func private @print_f32(%t: tensor<?x?xf32>) {
  %u = tensor.cast %t : tensor<?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func @main() {
  //===--------------------------------------------------------------------===//
  // bf16 (L = 4, R = 2), 2 pages of 16, every slot initially 7.0 (0x40E0).
  // Token 1 is padding (slot -1).
  //===--------------------------------------------------------------------===//
  %kv_bf16 = arith.constant dense<[[1.0, -2.5, 1.00390625, 1.01171875],
                                   [9.0, 9.0, 9.0, 9.0],
                                   [0.5, 448.0, -0.0, 3.0]]> : tensor<3x4xf32>
  %pe_bf16 = arith.constant dense<[[[2.0, -0.125]], [[9.0, 9.0]], [[65504.0, 1.0e-3]]]> : tensor<3x1x2xf32>
  %slots_bf16 = arith.constant dense<[17, -1, 0]> : tensor<3xi32>
  %cache_bf16 = arith.constant dense<7.0> : tensor<2x16x6xbf16>
  %c_bf16 = call @write_bf16(%kv_bf16, %pe_bf16, %slots_bf16, %cache_bf16)
      : (tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<3xi32>, tensor<2x16x6xbf16>) -> tensor<2x16x6xbf16>
  // Slots 0, 1 (page 0) and 16, 17 (page 1).
  %rows_bf16 = tensor.extract_slice %c_bf16[0, 0, 0] [2, 2, 6] [1, 1, 1] : tensor<2x16x6xbf16> to tensor<2x2x6xbf16>
  %rows_bf16d = tensor.cast %rows_bf16 : tensor<2x2x6xbf16> to tensor<?x?x?xbf16>
  call @print_bf16_bits(%rows_bf16d) : (tensor<?x?x?xbf16>) -> ()
  // Slot 0 (token 2): 0.5 = 0x3F00, 448 = 0x43E0, -0.0 = 0x8000, 3.0 = 0x4040,
  // 65504 = 0x477FE000 rounds up to 0x4780 (65536), 1e-3 = 0x3A83126F -> 0x3A83.
  // CHECK: sizes = [2, 2, 6]
  // CHECK-NEXT: [16128, 17376, 32768, 16448, 18304, 14979]
  // CHECK-NEXT: [16608, 16608, 16608, 16608, 16608, 16608]
  // CHECK-NEXT: [16608, 16608, 16608, 16608, 16608, 16608]
  // Slot 17 (token 0): 1.0 = 0x3F80, -2.5 = 0xC020; 1 + 2^-8 is halfway
  // between 0x3F80 and 0x3F81 and rounds to even 0x3F80; 1 + 3 * 2^-8 is
  // halfway between 0x3F81 and 0x3F82 and rounds to even 0x3F82;
  // 2.0 = 0x4000, -0.125 = 0xBE00.
  // CHECK-NEXT: [16256, 49184, 16256, 16258, 16384, 48640]

  // Request 0 reads position 16 (logical page 1 -> page 0, slot 0); request 1
  // reads positions 1, 2 (page 1, slots 17, 18); workspace row 3 is not
  // covered by cu_rows and keeps its -1.
  %bt_bf16 = arith.constant dense<[[1, 0], [1, 0]]> : tensor<2x2xi32>
  %starts_bf16 = arith.constant dense<[16, 1]> : tensor<2xi32>
  %cu_bf16 = arith.constant dense<[0, 1, 3]> : tensor<3xi32>
  %ws_bf16 = arith.constant dense<-1.0> : tensor<4x6xf32>
  %g_bf16 = call @gather_bf16(%c_bf16, %bt_bf16, %starts_bf16, %cu_bf16, %ws_bf16)
      : (tensor<2x16x6xbf16>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %gd_bf16 = tensor.cast %g_bf16 : tensor<4x6xf32> to tensor<?x?xf32>
  call @print_f32(%gd_bf16) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 6]
  // CHECK-NEXT: [0.5, 448, -0, 3, 65536, 0.000999451]
  // CHECK-NEXT: [1, -2.5, 1, 1.01562, 2, -0.125]
  // CHECK-NEXT: [7, 7, 7, 7, 7, 7]
  // CHECK-NEXT: [-1, -1, -1, -1, -1, -1]

  //===--------------------------------------------------------------------===//
  // fp8_e4m3, per-tensor scale 2 (L = 4, R = 2): byte = e4m3(x / 2). One page
  // of 16, initially 0. Token 1 is padding (slot -1), token 3's slot 16 is
  // past the cache; both write nothing.
  //===--------------------------------------------------------------------===//
  %kv_fp8 = arith.constant dense<[[896.0, 1000.0, -1000.0, 2.125],
                                  [5.0, 5.0, 5.0, 5.0],
                                  [0.00390625, 0.009765625, 0.01171875, 0.0009765625],
                                  [5.0, 5.0, 5.0, 5.0]]> : tensor<4x4xf32>
  %pe_fp8 = arith.constant dense<[[2.375, -0.0], [5.0, 5.0], [0.03125, -3.0], [5.0, 5.0]]> : tensor<4x2xf32>
  %slots_fp8 = arith.constant dense<[2, -1, 5, 16]> : tensor<4xi32>
  %cache_fp8 = arith.constant dense<0> : tensor<1x16x6xi8>
  %kv_fp8d = tensor.cast %kv_fp8 : tensor<4x4xf32> to tensor<?x4xf32>
  %pe_fp8d = tensor.cast %pe_fp8 : tensor<4x2xf32> to tensor<?x2xf32>
  %slots_fp8d = tensor.cast %slots_fp8 : tensor<4xi32> to tensor<?xi32>
  %cache_fp8d = tensor.cast %cache_fp8 : tensor<1x16x6xi8> to tensor<?x16x6xi8>
  %c_fp8 = call @write_fp8(%kv_fp8d, %pe_fp8d, %slots_fp8d, %cache_fp8d)
      : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x16x6xi8>) -> tensor<?x16x6xi8>
  %all_fp8 = tensor.cast %c_fp8 : tensor<?x16x6xi8> to tensor<?x?x?xi8>
  call @print_bytes(%all_fp8) : (tensor<?x?x?xi8>) -> ()
  // Slot 2 (token 0): 448 -> 0x7E; 500 saturates to 0x7E; -500 -> 0xFE;
  // 1.0625 is halfway between 1.0 (0x38) and 1.125 (0x39), rounds to even
  // 0x38; 1.1875 is halfway between 0x39 and 1.25 (0x3A), rounds to even
  // 0x3A; -0.0 -> 0x80.
  // Slot 5 (token 2): 2^-9 is the smallest subnormal 0x01; 2.5 * 2^-9 rounds
  // to even 0x02; 3 * 2^-9 -> 0x03; 2^-11 rounds to 0; 2^-6 is the smallest
  // normal 0x08; -1.5 -> 0xBC.
  // CHECK: sizes = [1, 16, 6]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [126, 126, 254, 56, 58, 128]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [1, 2, 3, 0, 8, 188]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0]

  // Request 0 reads position 5, request 1 position 2; row 2 keeps its -1.
  // Dequantisation is e4m3 * 2.
  %bt_fp8 = arith.constant dense<[[0], [0]]> : tensor<2x1xi32>
  %starts_fp8 = arith.constant dense<[5, 2]> : tensor<2xi32>
  %cu_fp8 = arith.constant dense<[0, 1, 2]> : tensor<3xi32>
  %ws_fp8 = arith.constant dense<-1.0> : tensor<3x6xf32>
  %bt_fp8d = tensor.cast %bt_fp8 : tensor<2x1xi32> to tensor<?x?xi32>
  %starts_fp8d = tensor.cast %starts_fp8 : tensor<2xi32> to tensor<?xi32>
  %cu_fp8d = tensor.cast %cu_fp8 : tensor<3xi32> to tensor<?xi32>
  %ws_fp8d = tensor.cast %ws_fp8 : tensor<3x6xf32> to tensor<?x6xf32>
  %g_fp8 = call @gather_fp8(%c_fp8, %bt_fp8d, %starts_fp8d, %cu_fp8d, %ws_fp8d)
      : (tensor<?x16x6xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %gd_fp8 = tensor.cast %g_fp8 : tensor<?x6xf32> to tensor<?x?xf32>
  call @print_f32(%gd_fp8) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 6]
  // CHECK-NEXT: [0.00390625, 0.0078125, 0.0117188, 0, 0.03125, -3]
  // CHECK-NEXT: [896, 896, -896, 2, 2.5, -0]
  // CHECK-NEXT: [-1, -1, -1, -1, -1, -1]

  //===--------------------------------------------------------------------===//
  // fp8_e4m3_token (L = 4, R = 2): 6 e4m3 bytes, then s0 and s1 as
  // little-endian f32, s = max(amax, 1e-4) / 448.
  //===--------------------------------------------------------------------===//
  %kv_tok = arith.constant dense<[[-28.0, 7.0, 0.4375, 1.0], [3.0, 1.5, -0.75, 0.0]]> : tensor<2x4xf32>
  %pe_tok = arith.constant dense<[[[0.5, -0.25]], [[0.0, 0.0]]]> : tensor<2x1x2xf32>
  %slots_tok = arith.constant dense<[0, 3]> : tensor<2xi32>
  %cache_tok = arith.constant dense<0> : tensor<1x16x14xi8>
  %c_tok = call @write_fp8_token(%kv_tok, %pe_tok, %slots_tok, %cache_tok)
      : (tensor<2x4xf32>, tensor<2x1x2xf32>, tensor<2xi32>, tensor<1x16x14xi8>) -> tensor<1x16x14xi8>
  %rows_tok = tensor.extract_slice %c_tok[0, 0, 0] [1, 4, 14] [1, 1, 1] : tensor<1x16x14xi8> to tensor<1x4x14xi8>
  %rows_tokd = tensor.cast %rows_tok : tensor<1x4x14xi8> to tensor<?x?x?xi8>
  call @print_bytes(%rows_tokd) : (tensor<?x?x?xi8>) -> ()
  // Slot 0: s0 = 28 / 448 = 0.0625 exactly (0x3D800000), so the latent
  // quotients are exact: -448 -> 0xFE, 112 -> 0x6E, 7 -> 0x4E, 16 -> 0x58.
  // s1 = 0.5 / 448 = 0x3A924925; 0.5 / s1 and -0.25 / s1 round to the
  // nearest e4m3 448 (0x7E) and -224 (0xF6).
  // Slot 3: s0 = 3 / 448 = 0x3BDB6DB7; 3 / s0, 1.5 / s0 and -0.75 / s0 round
  // to 448 (0x7E), 224 (0x76) and -112 (0xEE). The RoPE part is all zero, so
  // s1 is the floor 1e-4 / 448 = 0x346FACAD.
  // CHECK: sizes = [1, 4, 14]
  // CHECK-NEXT: [254, 110, 78, 88, 126, 246, 0, 0, 128, 61, 37, 73, 146, 58]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
  // CHECK-NEXT: [126, 118, 238, 0, 0, 0, 183, 109, 219, 59, 173, 172, 111, 52]

  //===--------------------------------------------------------------------===//
  // fp8_ds_mla (L = 128, R = 2): 128 e4m3 bytes, one f32 scale, 2 bf16.
  //===--------------------------------------------------------------------===//
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c127 = arith.constant 127 : index
  %v0 = arith.constant 896.0 : f32
  %v1 = arith.constant -2.125 : f32
  %v2 = arith.constant 0.00390625 : f32
  %v3 = arith.constant 0.009765625 : f32
  %v127 = arith.constant 1.0 : f32
  %z = arith.constant dense<0.0> : tensor<1x128xf32>
  %k0 = tensor.insert %v0 into %z[%c0, %c0] : tensor<1x128xf32>
  %k1 = tensor.insert %v1 into %k0[%c0, %c1] : tensor<1x128xf32>
  %k2 = tensor.insert %v2 into %k1[%c0, %c2] : tensor<1x128xf32>
  %k3 = tensor.insert %v3 into %k2[%c0, %c3] : tensor<1x128xf32>
  %kv_ds = tensor.insert %v127 into %k3[%c0, %c127] : tensor<1x128xf32>
  %pe_ds = arith.constant dense<[[1.00390625, -2.5]]> : tensor<1x2xf32>
  %slots_ds = arith.constant dense<[7]> : tensor<1xi32>
  %cache_ds = arith.constant dense<0> : tensor<1x16x136xi8>
  %c_ds = call @write_ds_mla(%kv_ds, %pe_ds, %slots_ds, %cache_ds)
      : (tensor<1x128xf32>, tensor<1x2xf32>, tensor<1xi32>, tensor<1x16x136xi8>) -> tensor<1x16x136xi8>
  %row_ds = tensor.extract_slice %c_ds[0, 7, 0] [1, 1, 136] [1, 1, 1] : tensor<1x16x136xi8> to tensor<1x1x136xi8>
  %row_dsd = tensor.cast %row_ds : tensor<1x1x136xi8> to tensor<?x?x?xi8>
  call @print_bytes(%row_dsd) : (tensor<?x?x?xi8>) -> ()
  // The tile's amax is 896, so its scale is 2.0 (0x40000000) and the bytes
  // are those of the fp8_e4m3 case: 448 -> 0x7E, -1.0625 -> 0xB8 (even),
  // 2^-9 -> 0x01, 2.5 * 2^-9 -> 0x02, zeros, 0.5 -> 0x30. RoPE bf16
  // little-endian: 1 + 2^-8 -> 0x3F80 (even), -2.5 -> 0xC020.
  // CHECK: sizes = [1, 1, 136]
  // CHECK-NEXT: [126, 184, 1, 2, {{(0, ){122}0, }}48, 0, 0, 0, 64, 128, 63, 32, 192]

  %bt_ds = arith.constant dense<[[0]]> : tensor<1x1xi32>
  %starts_ds = arith.constant dense<[7]> : tensor<1xi32>
  %cu_ds = arith.constant dense<[0, 1]> : tensor<2xi32>
  %ws_ds = arith.constant dense<-1.0> : tensor<2x130xf32>
  %g_ds = call @gather_ds_mla(%c_ds, %bt_ds, %starts_ds, %cu_ds, %ws_ds)
      : (tensor<1x16x136xi8>, tensor<1x1xi32>, tensor<1xi32>, tensor<2xi32>, tensor<2x130xf32>) -> tensor<2x130xf32>
  %gd_ds = tensor.cast %g_ds : tensor<2x130xf32> to tensor<?x?xf32>
  call @print_f32(%gd_ds) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 130]
  // CHECK-NEXT: [896, -2, 0.00390625, 0.0078125, {{(0, ){122}0, }}1, 1, -2.5]
  // CHECK-NEXT: [{{(-1, ){128}-1, }}-1]
  return
}

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)
