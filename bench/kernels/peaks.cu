// The FMA peak a kernel is reported against (bench/peaks.py): CHAINS independent chains
// of x = x * a + b (2 flops each) per thread, enough threads to fill the GPU, nothing else.

constexpr int CHAINS = 8;

template <typename T> __device__ void peak_fma(T* out, int iterations, T a, T b) {
  T x[CHAINS];
#pragma unroll
  for (int k = 0; k < CHAINS; ++k) x[k] = T(threadIdx.x + k);
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = fma(x[k], a, b);
  T sum = 0;
#pragma unroll
  for (int k = 0; k < CHAINS; ++k) sum += x[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the chains alive
}

extern "C" __global__ void peak_fma_f32(float* out, int iterations, float a, float b) {
  peak_fma<float>(out, iterations, a, b);
}

extern "C" __global__ void peak_fma_f64(double* out, int iterations, double a, double b) {
  peak_fma<double>(out, iterations, a, b);
}

// The L2 and DRAM read bandwidths (bench/peaks.py): `passes` sweeps over a buffer (inside
// the L2, or far larger), 16 bytes a load, cached in L2 only (ld.global.cg: L1 would serve
// the later passes), in UNROLL independent sums so that loads, not the adds, set the pace.
constexpr int UNROLL = 4;

extern "C" __global__ void peak_l2_read(const float4* data, long long vectors, int passes, float* out) {
  float sum[UNROLL] = {};
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (int pass = 0; pass < passes; ++pass) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < vectors; i += UNROLL * stride) {
#pragma unroll
      for (int k = 0; k < UNROLL; ++k) {
        const float4 v = __ldcg(data + i + k * stride);
        sum[k] += v.x + v.y + v.z + v.w;
      }
    }
    for (; i < vectors; i += stride) {
      const float4 v = __ldcg(data + i);
      sum[0] += v.x + v.y + v.z + v.w;
    }
  }
  float total = 0;
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) total += sum[k];
  if (total < 0) out[0] = total;  // never true for the zeros it reads: keeps the loads alive
}

// The empty-launch latency: a kernel that does nothing, launched back to back.
extern "C" __global__ void peak_empty() {}
