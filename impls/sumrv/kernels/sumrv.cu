// The distribution of x + y for discrete x (probabilities p, length m) and y (q,
// length n), over a batch of pairs: r_i = sum_j p_j q_{i-j}, i = 0 .. m+n-2.
// In log space inputs and outputs are log-probabilities and every kernel takes,
// per output, the exact max-shifted log-sum-exp: c_i = max_j (a_j + b_{i-j}), then
// r_i = c_i + log sum_j exp(a_j + b_{i-j} - c_i), so nothing underflows however
// small the probabilities (the largest term is exp(0) = 1).
//
// Layout: element j of pair b of p is p[b * ldp + j * incp] (likewise q and r), so
// strided and batched views need no copy (strip: rows contiguous, j * 1). Every index
// is 64-bit.
//
// Kernels (extern "C", loaded by impls/sumrv/gpu.py), each for f32/f64 and lin/log:
//   sumrv_naive_*          one thread per output element
//   sumrv_skewdiag_*       the blog post's skew-diagonal warp kernel, its bugs fixed
//                          (../../../../shared/specs/sumrv.md), atomics into r
//   sumrv_skewdiag_det_*   the same tiles, each writing its 63 diagonal sums to a
//   sumrv_skewdiag_combine_*  buffer that a second kernel sums in a fixed order
//   sumrv_strip_<cfg>_*    ours: a block computes a strip of outputs, p and q staged
//                          in shared memory, R outputs per thread in registers
//   sumrv_split_combine_*  sums the strip kernel's partial results over j-splits
//   peak_exp_*             the exp-and-add rate the log kernels are reported against

#define WARP 32

template <typename T> struct Math;
template <> struct Math<float> {
  static __device__ float ninf() { return __int_as_float(0xff800000); }
  static __device__ float exp(float x) { return __expf(x); }  // ex2.approx: its error is in the bound of tolerance() in ../suite.py
  static __device__ float log(float x) { return logf(x); }
  static __device__ float log1p(float x) { return log1pf(x); }
};
template <> struct Math<double> {
  static __device__ double ninf() { return __longlong_as_double(0xfff0000000000000ULL); }
  static __device__ double exp(double x) { return ::exp(x); }
  static __device__ double log(double x) { return ::log(x); }
  static __device__ double log1p(double x) { return ::log1p(x); }
};

// Linear space: terms are products, combined by sums. Log space: terms are sums of
// log-probabilities; partial results (log values) are combined by log-sum-exp.
template <typename T, bool LOG> struct Space {
  static __device__ T zero() { return LOG ? Math<T>::ninf() : T(0); }
  static __device__ T term(T a, T b) { return LOG ? a + b : a * b; }
};

// exp(v - c) with exp(-inf - -inf) = 0: a diagonal whose terms are all -inf sums to 0.
template <typename T> __device__ T shifted_exp(T v, T c) {
  return c == Math<T>::ninf() ? T(0) : Math<T>::exp(v - c);
}
template <typename T> __device__ T log_of_sum(T c, T s) {
  return c == Math<T>::ninf() ? c : c + Math<T>::log(s);
}

// ---------------------------------------------------------------------------
// naive: one thread per output element (grid-stride over batch x (m + n - 1)).
template <typename T, bool LOG>
__device__ void naive(const T* p, long long ldp, long long incp, const T* q, long long ldq, long long incq,
                      T* r, long long ldr, long long incr, int m, int n, long long batch) {
  const long long L = (long long)m + n - 1;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < batch * L;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / L, i = e % L;
    const long long lo = i - n + 1 > 0 ? i - n + 1 : 0, hi = i < m - 1 ? i : m - 1;
    const T* pb = p + b * ldp;
    const T* qb = q + b * ldq;
    T acc;
    if (LOG) {
      T c = Math<T>::ninf();
      for (long long j = lo; j <= hi; ++j) c = fmax(c, pb[j * incp] + qb[(i - j) * incq]);
      T s = 0;
      for (long long j = lo; j <= hi; ++j) s += shifted_exp(pb[j * incp] + qb[(i - j) * incq], c);
      acc = log_of_sum(c, s);
    } else {
      acc = 0;
      for (long long j = lo; j <= hi; ++j) acc += pb[j * incp] * qb[(i - j) * incq];
    }
    r[b * ldr + i * incr] = acc;
  }
}

// ---------------------------------------------------------------------------
// skewdiag: 32 x 32 tiles of R = p q^T (log: a_x + b_y), a block of 32 x 32
// threads per tile (grid-stride over batch x tiles). Thread (ty, tx) writes
// R[tx + 32 ty] = term(p[x0 + tx], q[y0 + ty]). Then warp i = ty, lane j = tx
// reads the skewed element x = (i - j) mod 32, y = j, so that lanes 0..i hold
// local diagonal i (x + y = i) and lanes i+1..31 diagonal i + 32: reading
// R[x + 32 y] is free of bank conflicts (bank (i - j) mod 32). Each diagonal is
// reduced by two full-warp butterflies (lo: lanes j <= i, hi: lanes j > i, the
// other lanes giving the identity), lane 0 owning diagonal i and lane 31
// diagonal i + 32.
template <typename T> __device__ T warp_sum(T v) {
  for (int offset = WARP / 2; offset >= 1; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <typename T> __device__ T warp_max(T v) {
  for (int offset = WARP / 2; offset >= 1; offset /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
// The sum of the lanes where `mine` (log space: the log-sum-exp), in every lane.
template <typename T, bool LOG> __device__ T diagonal_sum(T v, bool mine) {
  if (!LOG) return warp_sum(mine ? v : T(0));
  const T c = warp_max(mine ? v : Math<T>::ninf());
  return log_of_sum(c, warp_sum(mine ? shifted_exp(v, c) : T(0)));
}

// r[i] (+)= v as one atomic operation: an add, or a log-add by compare-and-swap.
__device__ void atomic_combine(float* address, float v, bool log_space) {
  if (!log_space) { atomicAdd(address, v); return; }
  if (v == Math<float>::ninf()) return;
  int* word = reinterpret_cast<int*>(address);
  int old = *word, assumed;
  do {
    assumed = old;
    const float o = __int_as_float(assumed);
    const float sum = o == Math<float>::ninf() ? v : fmaxf(o, v) + log1pf(__expf(-fabsf(o - v)));
    old = atomicCAS(word, assumed, __float_as_int(sum));
  } while (assumed != old);
}
__device__ void atomic_combine(double* address, double v, bool log_space) {
  if (!log_space) { atomicAdd(address, v); return; }
  if (v == Math<double>::ninf()) return;
  unsigned long long* word = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *word, assumed;
  do {
    assumed = old;
    const double o = __longlong_as_double(assumed);
    const double sum = o == Math<double>::ninf() ? v : fmax(o, v) + log1p(exp(-fabs(o - v)));
    old = atomicCAS(word, assumed, __double_as_longlong(sum));
  } while (assumed != old);
}

constexpr int DIAGONALS = 2 * WARP - 1;  // per tile

// DETERMINISTIC: tile (b, tx, ty) writes its diagonals to
// partial[((b * tiles_n + ty) * tiles_m + tx) * 63 + d] (d = 0..62) instead of
// adding them into r; sumrv_skewdiag_combine sums them in a fixed order.
template <typename T, bool LOG, bool DETERMINISTIC>
__device__ void skewdiag(const T* p, long long ldp, long long incp, const T* q, long long ldq, long long incq,
                         T* r, long long ldr, long long incr, T* partial, int m, int n, long long batch) {
  __shared__ T R[WARP * WARP];
  const int tiles_m = (m + WARP - 1) / WARP, tiles_n = (n + WARP - 1) / WARP;
  const long long tiles = (long long)tiles_m * tiles_n;
  const int i = threadIdx.y, j = threadIdx.x;  // warp, lane
  for (long long t = blockIdx.x; t < batch * tiles; t += gridDim.x) {
    const long long b = t / tiles;
    const int tile_x = (int)(t % tiles % tiles_m), tile_y = (int)(t % tiles / tiles_m);
    const long long x0 = (long long)tile_x * WARP, y0 = (long long)tile_y * WARP;
    const long long x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    R[threadIdx.x + WARP * threadIdx.y] =
        x < m && y < n ? Space<T, LOG>::term(p[b * ldp + x * incp], q[b * ldq + y * incq]) : Space<T, LOG>::zero();
    __syncthreads();
    const T v = R[((i - j) & (WARP - 1)) + WARP * j];
    const T lo = diagonal_sum<T, LOG>(v, j <= i);  // diagonal i
    const T hi = diagonal_sum<T, LOG>(v, j > i);   // diagonal i + 32 (none for warp 31)
    __syncthreads();  // R is rewritten by the next tile
    const long long last = (long long)m + n - 2;
    if (DETERMINISTIC) {
      T* out = partial + ((b * tiles_n + tile_y) * tiles_m + tile_x) * DIAGONALS;
      if (j == 0) out[i] = lo;
      if (j == WARP - 1 && i < WARP - 1) out[i + WARP] = hi;
    } else {
      if (j == 0 && x0 + y0 + i <= last) atomic_combine(r + b * ldr + (x0 + y0 + i) * incr, lo, LOG);
      if (j == WARP - 1 && i < WARP - 1 && x0 + y0 + i + WARP <= last)
        atomic_combine(r + b * ldr + (x0 + y0 + i + WARP) * incr, hi, LOG);
    }
  }
}

// Output i = 32 s + d0 (d0 < 32) gets diagonal d0 of the tiles with tile_x +
// tile_y = s and diagonal d0 + 32 of those with tile_x + tile_y = s - 1: first the
// latter, then the former, each by increasing tile_y. One thread per output.
template <typename T, bool LOG>
__device__ void skewdiag_combine(const T* partial, T* r, long long ldr, long long incr, int m, int n,
                                 long long batch) {
  const int tiles_m = (m + WARP - 1) / WARP, tiles_n = (n + WARP - 1) / WARP;
  const long long L = (long long)m + n - 1;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < batch * L;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / L, i = e % L;
    const int s = (int)(i / WARP), d0 = (int)(i % WARP);
    T c = Math<T>::ninf(), acc = 0;
    for (int pass = 0; pass < (LOG ? 2 : 1); ++pass) {
      for (int group = 0; group < 2; ++group) {
        const int diagonal = group == 0 ? s - 1 : s, d = group == 0 ? d0 + WARP : d0;
        if (diagonal < 0 || d >= DIAGONALS) continue;
        const int y_lo = diagonal - (tiles_m - 1) > 0 ? diagonal - (tiles_m - 1) : 0;
        const int y_hi = diagonal < tiles_n - 1 ? diagonal : tiles_n - 1;
        for (int ty = y_lo; ty <= y_hi; ++ty) {
          const T v = partial[((b * tiles_n + ty) * tiles_m + (diagonal - ty)) * DIAGONALS + d];
          if (!LOG) acc += v;
          else if (pass == 0) c = fmax(c, v);
          else acc += shifted_exp(v, c);
        }
      }
    }
    r[b * ldr + i * incr] = LOG ? log_of_sum(c, acc) : acc;
  }
}

// ---------------------------------------------------------------------------
// strip (ours): a block of NT threads computes the outputs [I, I + S) of one pair
// over the j of one split of [0, m). A warp's lanes form G groups that share its
// WARP / G output slots, each slot R consecutive outputs i0 .. i0 + R - 1, and split
// its j between them (summed by shuffles at the end): S = NT / G * R. Chunks of C values of p, and the S + C values of q
// they meet, are staged in shared memory (zero padded: no bounds checks in the
// inner loop). A step takes R values of j: with the 2R values of q the thread's
// outputs meet (two register arrays, lo and hi: R / U vector loads each, U values
// per 16 bytes) and R of p (a broadcast), it does R x R multiply-adds.
// The q buffer has one 16-byte pad per 128 bytes, so that the vector loads of a
// warp's lanes (R values apart) spread over the banks.
//
// Log space runs the same loops twice: pass 0 the max-plus product (c_i), pass 1
// the sums of exp(a + b - c_i). With several splits each writes its partial
// result (a log value in log space) to partial[split][b][i] and
// sumrv_split_combine adds them in split order; with one split, r directly.
template <typename T> __host__ __device__ constexpr int per16() { return 16 / sizeof(T); }
template <typename T> __device__ __forceinline__ int padded(int v) {
  return v + v / (8 * per16<T>()) * per16<T>();
}
template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; };
template <> struct Vec<double> { typedef double2 type; };

// w = buffer[base .. base + R) (PADDED: through padded(), as the q buffer is stored).
template <bool PADDED, typename T, int R>
__device__ __forceinline__ void load_window(T (&w)[R], const T* buffer, int base) {
  typedef typename Vec<T>::type V;
#pragma unroll
  for (int u = 0; u < R; u += per16<T>()) {
    const V v = *reinterpret_cast<const V*>(buffer + (PADDED ? padded<T>(base + u) : base + u));
    const T* parts = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int k = 0; k < per16<T>(); ++k) w[u + k] = parts[k];
  }
}

// acc[k] (op)= term(pj[jj], q at i0 + k - (j + jj)), where lo[s] / hi[s] hold q at
// i0 - j - R + s / i0 - j + s.
template <typename T, int R, int PASS, bool LOG>
__device__ __forceinline__ void step(T (&acc)[R], const T (&c)[R], const T (&pj)[R], const T (&lo)[R],
                                     const T (&hi)[R]) {
#pragma unroll
  for (int jj = 0; jj < R; ++jj) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const T qv = k - jj >= 0 ? hi[k - jj] : lo[k - jj + R];
      if (!LOG) acc[k] = fma(pj[jj], qv, acc[k]);
      else if (PASS == 0) acc[k] = fmax(acc[k], pj[jj] + qv);
      else acc[k] += shifted_exp(pj[jj] + qv, c[k]);
    }
  }
}

template <typename T, bool LOG, int PASS, int R>
__device__ __forceinline__ void reduce_groups(T (&acc)[R], int lanes) {
  // Lanes l and l ^ offset (offset a multiple of `lanes`) hold the same outputs.
  for (int offset = lanes; offset < WARP; offset *= 2) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const T other = __shfl_xor_sync(0xffffffffu, acc[k], offset);
      acc[k] = LOG && PASS == 0 ? fmax(acc[k], other) : acc[k] + other;
    }
  }
}

template <typename T, int NT, int R, int C, int G, bool LOG>
__device__ void strip(const T* p, long long ldp, const T* q, long long ldq, T* r, long long ldr, T* partial, int m,
                      int n, long long batch, int splits, int split_len) {
  static_assert(C % R == 0 && R % per16<T>() == 0, "C must hold whole steps of whole vectors");
  static_assert(WARP % G == 0 && NT % WARP == 0, "whole warps of whole groups");
  constexpr int LANES = WARP / G;  // output slots of a warp: its G groups of lanes share them
  constexpr int S = NT / WARP * LANES * R;  // outputs per strip
  constexpr int Q = S + C + R;  // q values staged: q[I - jc - C - R + v], v < Q
  __shared__ __align__(16) T sp[C];
  __shared__ __align__(16) T sq[Q + Q / (8 * per16<T>()) * per16<T>() + per16<T>()];
  const long long L = (long long)m + n - 1;
  const int strips = (int)((L + S - 1) / S);
  const int t = threadIdx.x;
  const int slot = t / WARP * LANES + t % LANES, group = t % WARP / LANES;
  for (long long item = blockIdx.x; item < batch * strips * splits; item += gridDim.x) {
    const int split = (int)(item % splits);
    const long long b = item / splits / strips;
    const long long I = item / splits % strips * S;
    const T* pb = p + b * ldp;
    const T* qb = q + b * ldq;
    // j meets this strip where 0 <= i - j < n for some i in [I, I + S), within the split.
    long long j_lo = I - (n - 1) > 0 ? I - (n - 1) : 0, j_hi = I + S - 1 < m - 1 ? I + S - 1 : m - 1;
    const long long s_lo = (long long)split * split_len, s_hi = s_lo + split_len - 1;
    j_lo = j_lo > s_lo ? j_lo : s_lo;
    j_hi = j_hi < s_hi ? j_hi : s_hi;
    T acc[R], c[R];
#pragma unroll
    for (int k = 0; k < R; ++k) c[k] = Math<T>::ninf();
    for (int pass = 0; pass < (LOG ? 2 : 1); ++pass) {
#pragma unroll
      for (int k = 0; k < R; ++k) acc[k] = LOG && pass == 0 ? Math<T>::ninf() : T(0);
      for (long long jc = j_lo; jc <= j_hi; jc += C) {
        __syncthreads();  // the previous chunk is no longer read
        // Rows are contiguous here (gpu.py copies strided views), so staging needs no
        // 64-bit multiply per value: p[jc + v] for v < C, q[k0 + v] for v < Q.
        const int p_end = j_hi - jc + 1 < C ? (int)(j_hi - jc + 1) : C;
        for (int v = t; v < C; v += NT) sp[v] = v < p_end ? pb[jc + v] : Space<T, LOG>::zero();
        const long long k0 = I - jc - C - R;
        const int q_begin = k0 < 0 ? (int)-k0 : 0, q_end = n - k0 < Q ? (int)(n - k0) : Q;
        const T* qk = qb + k0;
        for (int v = t; v < Q; v += NT)
          sq[padded<T>(v)] = v >= q_begin && v < q_end ? qk[v] : Space<T, LOG>::zero();
        __syncthreads();
        // Slot s, j = jc + jb: q at i0 + k - j is sq[v] with v = s R + k - jb + C + R.
        // A warp takes only the steps its outputs [w0, w0 + LANES R) meet (j in
        // [w0 - n + 1, w0 + LANES R - 1]), group g of its lanes every G-th of them from
        // the g-th: the narrower a warp's outputs, the fewer of its multiply-adds fall on
        // the zero padding outside the parallelogram of terms (its share is about
        // LANES R / n where n is small, and at both ends of every pair).
        const long long w0 = I + (long long)(t / WARP) * LANES * R;
        const long long first = w0 - (n - 1) - jc;
        long long end = w0 + LANES * R - jc < j_hi + 1 - jc ? w0 + LANES * R - jc : j_hi + 1 - jc;
        end = end < C ? end : C;
        const int jb_first = first > 0 ? (int)(first / R * R) : 0, jb_end = (int)end;
        for (int jb = jb_first + group * R; jb < jb_end; jb += G * R) {
          T lo[R], hi[R], pj[R];
          load_window<true>(lo, sq, slot * R - jb + C);
          load_window<true>(hi, sq, slot * R - jb + C + R);
          load_window<false>(pj, sp, jb);
          if (LOG && pass == 0) step<T, R, 0, LOG>(acc, c, pj, lo, hi);
          else step<T, R, 1, LOG>(acc, c, pj, lo, hi);
        }
      }
      if (LOG && pass == 0) {
        reduce_groups<T, LOG, 0>(acc, LANES);
#pragma unroll
        for (int k = 0; k < R; ++k) c[k] = acc[k];
      } else {
        reduce_groups<T, LOG, 1>(acc, LANES);
      }
    }
    T* out = splits > 1 ? partial + ((long long)split * batch + b) * L : r + b * ldr;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const long long i = I + (long long)slot * R + k;
      if (group == 0 && i < L) out[i] = LOG ? log_of_sum(c[k], acc[k]) : acc[k];
    }
  }
}

template <typename T, bool LOG>
__device__ void split_combine(const T* partial, T* r, long long ldr, long long incr, int m, int n, long long batch,
                              int splits) {
  const long long L = (long long)m + n - 1;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < batch * L;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / L, i = e % L;
    T c = Math<T>::ninf(), acc = 0;
    if (LOG)
      for (int s = 0; s < splits; ++s) c = fmax(c, partial[((long long)s * batch + b) * L + i]);
    for (int s = 0; s < splits; ++s) {
      const T v = partial[((long long)s * batch + b) * L + i];
      acc += LOG ? shifted_exp(v, c) : v;
    }
    r[b * ldr + i * incr] = LOG ? log_of_sum(c, acc) : acc;
  }
}

// ---------------------------------------------------------------------------
// The exp peak: CHAINS independent chains per thread, enough threads to fill the GPU, of
// the log kernels' inner term, acc += exp(x - c) (the FMA peak: bench/kernels/peaks.cu).
constexpr int CHAINS = 8;
template <typename T> __device__ void peak_exp(T* out, int iterations, T a, T b) {
  T x[CHAINS], acc[CHAINS];
#pragma unroll
  for (int k = 0; k < CHAINS; ++k) { x[k] = -T(threadIdx.x % 7 + k); acc[k] = 0; }
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) { acc[k] += Math<T>::exp(x[k] + a); x[k] -= b; }
  T sum = 0;
#pragma unroll
  for (int k = 0; k < CHAINS; ++k) sum += acc[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// ---------------------------------------------------------------------------
#define ARGS(T) const T *p, long long ldp, long long incp, const T *q, long long ldq, long long incq, T *r, \
                long long ldr, long long incr
#define FOR_SPACES(MACRO, T, PREC) MACRO(T, PREC, lin, false) MACRO(T, PREC, log, true)

#define NAIVE(T, PREC, SP, LOG)                                                                     \
  extern "C" __global__ void sumrv_naive_##PREC##_##SP(ARGS(T), int m, int n, long long batch) {    \
    naive<T, LOG>(p, ldp, incp, q, ldq, incq, r, ldr, incr, m, n, batch);                            \
  }
#define SKEWDIAG(T, PREC, SP, LOG)                                                                          \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      sumrv_skewdiag_##PREC##_##SP(ARGS(T), int m, int n, long long batch) {                                \
    skewdiag<T, LOG, false>(p, ldp, incp, q, ldq, incq, r, ldr, incr, nullptr, m, n, batch);                \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      sumrv_skewdiag_det_##PREC##_##SP(ARGS(T), T *partial, int m, int n, long long batch) {                \
    skewdiag<T, LOG, true>(p, ldp, incp, q, ldq, incq, r, ldr, incr, partial, m, n, batch);                 \
  }                                                                                                         \
  extern "C" __global__ void sumrv_skewdiag_combine_##PREC##_##SP(const T *partial, T *r, long long ldr,    \
                                                                  long long incr, int m, int n,             \
                                                                  long long batch) {                        \
    skewdiag_combine<T, LOG>(partial, r, ldr, incr, m, n, batch);                                           \
  }                                                                                                         \
  extern "C" __global__ void sumrv_split_combine_##PREC##_##SP(const T *partial, T *r, long long ldr,       \
                                                               long long incr, int m, int n, long long batch, \
                                                               int splits) {                                \
    split_combine<T, LOG>(partial, r, ldr, incr, m, n, batch, splits);                                      \
  }
// Strip configurations (threads NT, outputs per thread R, chunk C): gpu.py picks one by size.
#define STRIP(T, PREC, SP, LOG, NT, R, C, G)                                                                 \
  extern "C" __global__ void __launch_bounds__(NT) sumrv_strip_##NT##x##R##x##C##x##G##_##PREC##_##SP(       \
      const T *p, long long ldp, const T *q, long long ldq, T *r, long long ldr, T *partial, int m, int n,      \
      long long batch, int splits, int split_len) {                                                          \
    strip<T, NT, R, C, G, LOG>(p, ldp, q, ldq, r, ldr, partial, m, n, batch, splits, split_len);             \
  }
#define STRIPS(T, PREC, SP, LOG) \
  STRIP(T, PREC, SP, LOG, 32, 4, 64, 1) STRIP(T, PREC, SP, LOG, 64, 8, 128, 2) STRIP(T, PREC, SP, LOG, 128, 8, 512, 4)
#define PEAKS(T, PREC)                                                                              \
  extern "C" __global__ void peak_exp_##PREC(T *out, int iterations, T a, T b) {                    \
    peak_exp<T>(out, iterations, a, b);                                                             \
  }

FOR_SPACES(NAIVE, float, f32)
FOR_SPACES(NAIVE, double, f64)
FOR_SPACES(SKEWDIAG, float, f32)
FOR_SPACES(SKEWDIAG, double, f64)
FOR_SPACES(STRIPS, float, f32)
FOR_SPACES(STRIPS, double, f64)
STRIP(float, f32, lin, false, 128, 16, 512, 4)  // in f64 and in log space 16 outputs per thread spill
PEAKS(float, f32)
PEAKS(double, f64)
