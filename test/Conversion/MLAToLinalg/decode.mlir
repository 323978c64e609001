// RUN: mla-opt %s --convert-mla-to-linalg --split-input-file | FileCheck %s

// decode becomes decode_partial + combine; the partial walks requests,
// splits, the split's pages (dequantising each into an f32 tile), query rows,
// heads and finally only the tile rows the row may see.
// CHECK-LABEL: func.func @decode_bf16_causal
// CHECK-NOT: mla.
// CHECK: scf.for %[[B:[a-z0-9]+]] = {{.*}} -> (tensor<2x2x2x3x64xf32>, tensor<2x2x3x2xf32>)
// Query rows are converted to f32 and pre-scaled once per request.
// CHECK: tensor.generate
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: arith.mulf {{.*}}, %{{.*}} : f32
// CHECK: %[[LEN:[a-z0-9]+]] = arith.index_cast
// CHECK: %[[CHUNK:[a-z0-9]+]] = arith.ceildivui %[[LEN]], %{{.*}} : index
// CHECK: scf.for %[[S:[a-z0-9]+]] = {{.*}} -> (tensor<2x2x2x3x64xf32>, tensor<2x2x3x2xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x3xf32>)
// Pages of the split: [start / page, ceil(end / page)).
// CHECK: %[[FIRST:[a-z0-9]+]] = arith.divui %{{.*}}, %c16
// CHECK: %[[LAST:[a-z0-9]+]] = arith.ceildivui %{{.*}}, %c16
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %[[LAST]]
// CHECK: tensor.extract %{{.*}}[%[[B]], %{{.*}}] : tensor<2x4xi32>
// CHECK: tensor.generate
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: } : tensor<16x80xf32>
// Causal: the row's end is clamped with signed min/max.
// CHECK: arith.minsi
// CHECK: arith.maxsi
// Online softmax over the visible tile rows.
// CHECK: scf.for {{.*}} -> (f32, f32, vector<64xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<16x80xf32>, vector<80xf32>
// CHECK: vector.reduction <add>, %{{.*}} : vector<80xf32> into f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.exp
// CHECK: vector.transfer_read {{.*}} : tensor<16x80xf32>, vector<64xf32>
// CHECK: vector.fma {{.*}} : vector<64xf32>
// Normalise: out = acc / l, lse = m + log(l), or 0 / -inf.
// CHECK: math.log
// CHECK: arith.select {{.*}}, %{{.*}}, %cst{{.*}} : f32
// CHECK: vector.transfer_write %{{.*}}, %{{.*}}[%[[S]], %[[B]],
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%[[S]], %[[B]],
// combine: max over splits, weights, lse, weighted sum, normalise.
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel", "parallel"]
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel", "parallel"]
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: math.log
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel", "parallel", "parallel"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @decode_bf16_causal(%q: tensor<2x2x3x80xbf16>, %cache: tensor<8x16x80xbf16>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x2x3x64xbf16>, tensor<2x3x2xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 16> scale 0.125 causal num_splits 2
      : (tensor<2x2x3x80xbf16>, tensor<8x16x80xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x3x64xbf16>, tensor<2x3x2xf32>)
  return %o, %lse : tensor<2x2x3x64xbf16>, tensor<2x3x2xf32>
}

// -----

// Without num_splits there is one split; non-causal rows see [j0, j1) as is;
// an f32 cache page is a view (extract_slice), not a copy.
// CHECK-LABEL: func.func @decode_f32
// CHECK: %{{.*}} = tensor.empty() : tensor<1x2x1x3x64xf32>
// CHECK-NOT: arith.minsi
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0, 0] [1, 16, 80] [1, 1, 1] : tensor<8x16x80xf32> to tensor<16x80xf32>
// CHECK-NOT: arith.minsi
// CHECK: vector.reduction
func.func @decode_f32(%q: tensor<2x1x3x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x3x64xf32>, tensor<2x3x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<2x1x3x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x3x64xf32>, tensor<2x3x1xf32>)
  return %o, %lse : tensor<2x1x3x64xf32>, tensor<2x3x1xf32>
}

// -----

// fp8 pages are dequantised element-wise from the byte rows: e4m3 bits
// rebiased into f32, times the per-token scale read from the row's tail.
// CHECK-LABEL: func.func @decode_fp8_token
// CHECK: tensor.generate
// CHECK: arith.extui {{.*}} : i8 to i32
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: } : tensor<16x80xf32>
func.func @decode_fp8_token(%q: tensor<1x1x2x80xf32>, %cache: tensor<4x16x88xi8>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) -> (tensor<1x1x2x64xf32>, tensor<1x2x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token> scale 0.125
      : (tensor<1x1x2x80xf32>, tensor<4x16x88xi8>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x2x64xf32>, tensor<1x2x1xf32>)
  return %o, %lse : tensor<1x1x2x64xf32>, tensor<1x2x1xf32>
}

// -----

// A dynamic page dimension takes the planned page size from the layout: the
// cache is viewed with it and tiles stay static.
// CHECK-LABEL: func.func @decode_planned_page
// CHECK: tensor.cast %{{.*}} : tensor<?x?x80xf32> to tensor<?x16x80xf32>
// CHECK: tensor.extract_slice %{{.*}} [1, 16, 80] [1, 1, 1] : tensor<?x16x80xf32> to tensor<16x80xf32>
func.func @decode_planned_page(%q: tensor<2x1x3x80xf32>, %cache: tensor<?x?x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x3x64xf32>, tensor<2x3x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x3x80xf32>, tensor<?x?x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x3x64xf32>, tensor<2x3x1xf32>)
  return %o, %lse : tensor<2x1x3x64xf32>, tensor<2x3x1xf32>
}

// -----

// A dynamic split dimension is num_splits (q has no such dimension); a
// dynamic batch comes from q, in each result's own order ([S, B, N, Sq] for
// the LSE).
// CHECK-LABEL: func.func @decode_partial_dynamic_dims
// CHECK: %[[S0:.*]] = arith.constant 4 : index
// CHECK: %[[B0:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x1x1x80xf32>
// CHECK: %[[S1:.*]] = arith.constant 4 : index
// CHECK: %[[B1:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x1x1x80xf32>
// CHECK: tensor.empty(%[[S0]], %[[B0]]) : tensor<?x?x1x1x64xf32>
// CHECK: tensor.empty(%[[S1]], %[[B1]]) : tensor<?x?x1x1xf32>
func.func @decode_partial_dynamic_dims(%q: tensor<?x1x1x80xf32>, %c: tensor<1x16x80xf32>, %bt: tensor<?x1xi32>, %l: tensor<?xi32>, %b: tensor<?x5xi32>)
    -> (tensor<?x?x1x1x64xf32>, tensor<?x?x1x1xf32>) {
  %o, %s = mla.decode_partial %q, %c[%bt, %l] bounds %b layout #mla.cache_layout<format = f32, page_size = 16> scale 0.1 num_splits 4
      : (tensor<?x1x1x80xf32>, tensor<1x16x80xf32>, tensor<?x1xi32>, tensor<?xi32>, tensor<?x5xi32>) -> (tensor<?x?x1x1x64xf32>, tensor<?x?x1x1xf32>)
  return %o, %s : tensor<?x?x1x1x64xf32>, tensor<?x?x1x1xf32>
}
