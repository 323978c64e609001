// RUN: mla-opt %s --convert-mla-to-linalg --split-input-file | FileCheck %s

// split_kv_b_proj is data movement: view [N*(P+V), L] as [N, P+V, L], the
// first P rows of each head are W_UK_T, the last V rows transposed W_UV.
// CHECK-LABEL: func.func @split
// CHECK-NOT: mla.
// CHECK: %[[HEADS:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [3, 13, 64] : tensor<39x64xf32> into tensor<3x13x64xf32>
// CHECK: %[[UK:.*]] = tensor.extract_slice %[[HEADS]][0, 0, 0] [3, 8, 64] [1, 1, 1] : tensor<3x13x64xf32> to tensor<3x8x64xf32>
// CHECK: %[[UVT:.*]] = tensor.extract_slice %[[HEADS]][0, 8, 0] [3, 5, 64] [1, 1, 1] : tensor<3x13x64xf32> to tensor<3x5x64xf32>
// CHECK: %[[UV:.*]] = linalg.transpose ins(%[[UVT]] : tensor<3x5x64xf32>) outs(%{{.*}} : tensor<3x64x5xf32>) permutation = [0, 2, 1]
// CHECK: return %[[UK]], %[[UV]]
func.func @split(%w: tensor<39x64xf32>) -> (tensor<3x8x64xf32>, tensor<3x64x5xf32>) {
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<3x64x5xf32>
  return %uk, %uv : tensor<3x8x64xf32>, tensor<3x64x5xf32>
}

// -----

// absorb_q: a (t, n, p, l) contraction with l innermost, accumulated in f32
// and converted to bf16 once; the RoPE part is copied.
// CHECK-DAG: #[[$Q:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
// CHECK-DAG: #[[$O:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @absorb_bf16
// CHECK-SAME: (%[[QIN:.*]]: tensor<5x3x24xbf16>, %[[WIN:.*]]: tensor<3x8x64xbf16>)
// CHECK-NOT: mla.
// CHECK: %[[NOPE:.*]] = tensor.extract_slice %[[QIN]][0, 0, 0] [5, 3, 8] [1, 1, 1]
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<5x3x64xf32>)
// CHECK: %[[QL:.*]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$W]], #[[$O]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[NOPE]], %[[WIN]] : tensor<5x3x8xbf16>, tensor<3x8x64xbf16>) outs(%[[ZERO]] : tensor<5x3x64xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK: %[[QLB:.*]] = linalg.generic
// CHECK-SAME: ins(%[[QL]] : tensor<5x3x64xf32>) outs(%{{.*}} : tensor<5x3x64xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[QLB]] into %{{.*}}[0, 0, 0] [5, 3, 64] [1, 1, 1] : tensor<5x3x64xbf16> into tensor<5x3x80xbf16>
// CHECK: %[[PE:.*]] = tensor.extract_slice %[[QIN]][0, 0, 8] [5, 3, 16] [1, 1, 1]
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[PE]] into %[[R0]][0, 0, 64] [5, 3, 16] [1, 1, 1] : tensor<5x3x16xbf16> into tensor<5x3x80xbf16>
// CHECK: return %[[R1]]
func.func @absorb_bf16(%q: tensor<5x3x24xbf16>, %w: tensor<3x8x64xbf16>) -> tensor<5x3x80xbf16> {
  %r = mla.absorb_q %q, %w : tensor<5x3x24xbf16>, tensor<3x8x64xbf16> -> tensor<5x3x80xbf16>
  return %r : tensor<5x3x80xbf16>
}

// -----

// Dynamic T and L: the sizes come from tensor.dim, the RoPE width is q's
// last dim - P.
// CHECK-LABEL: func.func @absorb_dynamic
// CHECK-SAME: (%[[QIN:.*]]: tensor<?x3x?xf32>, %[[WIN:.*]]: tensor<3x8x?xf32>)
// CHECK-DAG: %[[T:.*]] = tensor.dim %[[QIN]], %c0
// CHECK-DAG: %[[L:.*]] = tensor.dim %[[WIN]], %c2
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<?x3x?xf32>)
// CHECK: %[[QW:.*]] = tensor.dim %[[QIN]], %c2
// CHECK: %[[R:.*]] = arith.addi %[[QW]], %c-8
// CHECK: %[[W:.*]] = arith.addi %[[L]], %[[R]]
// CHECK: tensor.empty(%[[T]], %[[W]]) : tensor<?x3x?xf32>
func.func @absorb_dynamic(%q: tensor<?x3x?xf32>, %w: tensor<3x8x?xf32>) -> tensor<?x3x?xf32> {
  %r = mla.absorb_q %q, %w : tensor<?x3x?xf32>, tensor<3x8x?xf32> -> tensor<?x3x?xf32>
  return %r : tensor<?x3x?xf32>
}

// -----

// up_proj_out: a (t, n, l, v) contraction into [T, N, V], collapsed to
// [T, N*V].
// CHECK-DAG: #[[$O:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
// CHECK-DAG: #[[$R:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @up_proj_out
// CHECK-NOT: mla.
// CHECK: %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[$O]], #[[$W]], #[[$R]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
// CHECK-SAME: outs(%{{.*}} : tensor<5x3x5xf32>)
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[OUT]] {{\[}}[0], [1, 2]] : tensor<5x3x5xf32> into tensor<5x15xf32>
// CHECK: return %[[FLAT]]
func.func @up_proj_out(%o: tensor<5x3x64xf32>, %w: tensor<3x64x5xf32>) -> tensor<5x15xf32> {
  %r = mla.up_proj_out %o, %w : tensor<5x3x64xf32>, tensor<3x64x5xf32> -> tensor<5x15xf32>
  return %r : tensor<5x15xf32>
}

// -----

// up_proj_kv: latent @ kv_b_proj^T as an (s, r, l) contraction with the
// contiguous latent reduction innermost, viewed per head and split.
// CHECK-DAG: #[[$LAT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$KV:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @up_proj_kv
// CHECK-SAME: (%[[LATIN:.*]]: tensor<?x64xf16>, %[[WIN:.*]]: tensor<39x64xf16>)
// CHECK-NOT: mla.
// CHECK: %[[S:.*]] = tensor.dim %[[LATIN]], %c0
// CHECK: %[[KV:.*]] = linalg.generic {indexing_maps = [#[[$LAT]], #[[$W]], #[[$KV]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[LATIN]], %[[WIN]] : tensor<?x64xf16>, tensor<39x64xf16>) outs(%{{.*}} : tensor<?x39xf32>)
// CHECK: %[[HEADS:.*]] = tensor.expand_shape %[[KV]] {{\[}}[0], [1, 2]] output_shape [%[[S]], 3, 13] : tensor<?x39xf32> into tensor<?x3x13xf32>
// CHECK: %[[K32:.*]] = tensor.extract_slice %[[HEADS]][0, 0, 0] [%[[S]], 3, 8] [1, 1, 1]
// CHECK: %[[K:.*]] = linalg.generic {{.*}} ins(%[[K32]] : tensor<?x3x8xf32>) outs(%{{.*}} : tensor<?x3x8xf16>)
// CHECK: %[[V32:.*]] = tensor.extract_slice %[[HEADS]][0, 0, 8] [%[[S]], 3, 5] [1, 1, 1]
// CHECK: %[[V:.*]] = linalg.generic {{.*}} ins(%[[V32]] : tensor<?x3x5xf32>) outs(%{{.*}} : tensor<?x3x5xf16>)
// CHECK: return %[[K]], %[[V]]
func.func @up_proj_kv(%l: tensor<?x64xf16>, %w: tensor<39x64xf16>) -> (tensor<?x3x8xf16>, tensor<?x3x5xf16>) {
  %k, %v = mla.up_proj_kv %l, %w : tensor<?x64xf16>, tensor<39x64xf16> -> tensor<?x3x8xf16>, tensor<?x3x5xf16>
  return %k, %v : tensor<?x3x8xf16>, tensor<?x3x5xf16>
}
