// RUN: mla-opt %s --convert-mla-to-linalg --split-input-file | FileCheck %s

// Causal varlen mha: requests, heads and query rows are scf.for loops that
// carry (out, lse, scores); out starts at 0 and lse at -inf so rows outside
// every request keep them. Per row, two passes over the visible keys only:
// scores (vector dot products over the head row) with their maximum, then
// exp(s - max) weights and the weighted V rows (vector.fma).
// CHECK-LABEL: func.func @mha_causal_bf16
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<4x2x24xbf16>, %[[K:[a-z0-9]+]]: tensor<?x2x24xbf16>, %[[V:[a-z0-9]+]]: tensor<?x2x5xbf16>, %[[CUQ:[a-z0-9]+]]: tensor<3xi32>, %[[CUK:[a-z0-9]+]]: tensor<3xi32>)
// CHECK-NOT: mla.
// CHECK: %[[OUT0:.*]] = linalg.fill ins(%{{.*}} : bf16) outs(%{{.*}} : tensor<4x2x5xbf16>)
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[LSE0:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[S:.*]] = tensor.dim %[[K]], %c0
// CHECK: %[[SCORES0:.*]] = tensor.empty(%[[S]]) : tensor<?xf32>
// CHECK: scf.for %[[B:[a-z0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[OUT0]], %{{.*}} = %[[LSE0]], %{{.*}} = %[[SCORES0]]) -> (tensor<4x2x5xbf16>, tensor<2x4xf32>, tensor<?xf32>)
// CHECK: %[[KSTART32:.*]] = tensor.extract %[[CUK]][%[[B]]] : tensor<3xi32>
// CHECK-NEXT: %[[KSTART:.*]] = arith.index_cast %[[KSTART32]] : i32 to index
// CHECK: scf.for %[[N:[a-z0-9]+]] = {{.*}} -> (tensor<4x2x5xbf16>, tensor<2x4xf32>, tensor<?xf32>)
// CHECK: scf.for %[[I:[a-z0-9]+]] = {{.*}} -> (tensor<4x2x5xbf16>, tensor<2x4xf32>, tensor<?xf32>)
// Bottom-right causal limit, clamped to [0, k_len].
// CHECK: arith.maxsi
// CHECK: %[[VISIBLE:.*]] = arith.minsi
// CHECK: %[[T:.*]] = arith.addi %{{.*}}, %[[I]] : index
// CHECK: vector.transfer_read %[[Q]][%[[T]], %[[N]], %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<4x2x24xbf16>, vector<24xbf16>
// CHECK: arith.extf %{{.*}} : vector<24xbf16> to vector<24xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<24xf32>
// CHECK: scf.for %[[J:[a-z0-9]+]] = %{{.*}} to %[[VISIBLE]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, tensor<?xf32>)
// CHECK: %[[ROW:.*]] = arith.addi %[[KSTART]], %[[J]] : index
// CHECK: vector.transfer_read %[[K]][%[[ROW]], %[[N]], %{{.*}}], {{.*}} : tensor<?x2x24xbf16>, vector<24xbf16>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<24xf32> into f32
// CHECK: arith.maximumf
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%[[J]]] : tensor<?xf32>
// CHECK: scf.for %[[J2:[a-z0-9]+]] = %{{.*}} to %[[VISIBLE]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, vector<5xf32>)
// CHECK: tensor.extract %{{.*}}[%[[J2]]] : tensor<?xf32>
// CHECK: math.exp
// CHECK: vector.transfer_read %[[V]]{{.*}} : tensor<?x2x5xbf16>, vector<5xbf16>
// CHECK: vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<5xf32>
// Normalise; a row that saw nothing gets out 0 and lse -inf.
// CHECK: arith.cmpf ugt
// CHECK: arith.truncf %{{.*}} : vector<5xf32> to vector<5xbf16>
// CHECK: vector.transfer_write %{{.*}}, %{{.*}}[%[[T]], %[[N]], %{{.*}}] {in_bounds = [true]} : vector<5xbf16>, tensor<4x2x5xbf16>
// CHECK: math.log
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%[[N]], %[[T]]] : tensor<2x4xf32>
func.func @mha_causal_bf16(%q: tensor<4x2x24xbf16>, %k: tensor<?x2x24xbf16>, %v: tensor<?x2x5xbf16>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) -> (tensor<4x2x5xbf16>, tensor<2x4xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.2 causal
      : (tensor<4x2x24xbf16>, tensor<?x2x24xbf16>, tensor<?x2x5xbf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<4x2x5xbf16>, tensor<2x4xf32>)
  return %o, %l : tensor<4x2x5xbf16>, tensor<2x4xf32>
}

// -----

// Non-causal: every row sees the request's k_len keys; f32 needs no
// conversions.
// CHECK-LABEL: func.func @mha_f32
// CHECK-SAME: %[[CUK:[a-z0-9]+]]: tensor<3xi32>)
// CHECK-NOT: mla.
// CHECK: scf.for
// CHECK: %[[KB32:.*]] = tensor.extract %[[CUK]]
// CHECK-NEXT: %[[KB:.*]] = arith.index_cast %[[KB32]]
// CHECK-NEXT: %[[KE32:.*]] = tensor.extract %[[CUK]]
// CHECK-NEXT: %[[KE:.*]] = arith.index_cast %[[KE32]]
// CHECK-NEXT: %[[KLEN:.*]] = arith.subi %[[KE]], %[[KB]] : index
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: arith.minsi
// CHECK-NOT: arith.extf
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[KLEN]] step %{{.*}} iter_args({{.*}}) -> (f32, tensor<30xf32>)
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<192xf32> into f32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[KLEN]] step %{{.*}} iter_args({{.*}}) -> (f32, vector<128xf32>)
// CHECK: vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<128xf32>
// CHECK-NOT: arith.truncf
// CHECK: vector.transfer_write {{.*}} : vector<128xf32>, tensor<10x16x128xf32>
func.func @mha_f32(%q: tensor<10x16x192xf32>, %k: tensor<30x16x192xf32>, %v: tensor<30x16x128xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.0721687824
      : (tensor<10x16x192xf32>, tensor<30x16x192xf32>, tensor<30x16x128xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>)
  return %o, %l : tensor<10x16x128xf32>, tensor<16x10xf32>
}

// -----

// merge_states: per (head, token) the weights of both sides and the merged
// LSE, written over lse_a; a side whose LSE is +-inf (|lse| < inf fails)
// weighs 0, and a NaN LSE on either side (uno) makes the weights and the LSE
// NaN. Then per element the weighted sum in f32, written over out_a,
// dropping zero-weight sides with a select (0 * NaN would leak; une keeps
// NaN weights).
// CHECK-DAG: #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$NT:.*]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-LABEL: func.func @merge_bf16
// CHECK-SAME: (%[[OA:[a-z0-9]+]]: tensor<4x2x5xbf16>, %[[LA:[a-z0-9]+]]: tensor<2x4xf32>, %[[OB:[a-z0-9]+]]: tensor<4x2x5xbf16>, %[[LB:[a-z0-9]+]]: tensor<2x4xf32>)
// CHECK-NOT: mla.
// CHECK: %[[W:.*]]:3 = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[LB]] : tensor<2x4xf32>) outs(%{{.*}}, %{{.*}}, %[[LA]] : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: math.absf
// CHECK: arith.cmpf olt, %{{.*}}, %[[INF]] : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.cmpf uno
// CHECK: %[[O:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$NT]], #[[$NT]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[OB]], %[[W]]#0, %[[W]]#1 : tensor<4x2x5xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) outs(%[[OA]] : tensor<4x2x5xbf16>)
// CHECK: arith.cmpf une
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.select
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[O]], %[[W]]#2
func.func @merge_bf16(%a: tensor<4x2x5xbf16>, %la: tensor<2x4xf32>, %b: tensor<4x2x5xbf16>, %lb: tensor<2x4xf32>) -> (tensor<4x2x5xbf16>, tensor<2x4xf32>) {
  %o, %l = mla.merge_states %a, %la, %b, %lb : (tensor<4x2x5xbf16>, tensor<2x4xf32>, tensor<4x2x5xbf16>, tensor<2x4xf32>) -> (tensor<4x2x5xbf16>, tensor<2x4xf32>)
  return %o, %l : tensor<4x2x5xbf16>, tensor<2x4xf32>
}
