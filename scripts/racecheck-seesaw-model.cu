// A model of the seesaw decode's shared-memory exchanges (DecodeSM90Seesaw.cpp)
// for compute-sanitizer racecheck (docs/gpu-runs.md, 2026-12-03 17:55). Build
// variants with
//   nvcc -arch=sm_90a -O2 -DFINISH_BAR=1 [-DNO_ARRIVE] [-DNO_OWN]
//   [-DPRODUCER_WAITS] -o race scripts/racecheck-seesaw-model.cu
// and run compute-sanitizer --tool racecheck --error-exitcode 9 ./race on an
// sm_90 GPU.
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ void barSync(int id, int n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void barArrive(int id, int n) {
#ifdef NO_ARRIVE
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#else
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}

__global__ void __launch_bounds__(384) seesaw(float *out, int iters) {
  __shared__ float red[64 * 2];
  int tid = threadIdx.x;
  if (tid < 128) {
#ifdef PRODUCER_WAITS
    // stay resident until the end
    for (int i = 0; i < 100; ++i)
      __nanosleep(100);
#endif
    return;
  }
  int ctid = tid - 128, wg = ctid / 128, wtid = ctid % 128;
  int lane = wtid % 32, warp = wtid / 32;
  int row[2] = {warp * 16 + lane / 4, warp * 16 + 8 + lane / 4};
  float acc = 0.f, l[2] = {1.f * wg + 1, 2.f};
  for (int i = 0; i < iters; ++i) {
    if (wg == 0) {
      for (int h = 0; h < 2; ++h)
        red[row[h] * 2 + 0] = i + h;
#ifndef NO_OWN
      barSync(4, 128);
#endif
      barArrive(2, 256);
      barSync(3, 256);
      for (int h = 0; h < 2; ++h)
        acc += red[row[h] * 2 + 1];
    } else {
      barSync(2, 256);
      for (int h = 0; h < 2; ++h)
        acc += red[row[h] * 2 + 0];
      for (int h = 0; h < 2; ++h)
        red[row[h] * 2 + 1] = i * 2 + h;
#ifndef NO_OWN
      barSync(5, 128);
#endif
      barArrive(3, 256);
    }
  }
  barSync(FINISH_BAR, 256);
  for (int h = 0; h < 2; ++h)
    red[row[h] * 2 + wg] = l[h] + acc;
  barSync(FINISH_BAR, 256);
  float s = 0;
  for (int h = 0; h < 2; ++h)
    s += red[row[h] * 2 + 0] + red[row[h] * 2 + 1];
  out[blockIdx.x * 256 + ctid] = s;
}

int main() {
  float *out;
  cudaMalloc(&out, 4 * 256 * sizeof(float));
  seesaw<<<4, 384>>>(out, 8);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
