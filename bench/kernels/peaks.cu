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
