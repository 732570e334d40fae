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
//   sumrv_strip_<cfg>_*    ours: a warp computes a strip of outputs, p and q staged
//                          in its shared memory, R outputs per thread in registers
//                          (chunk 0 in cfg: a warp per pair, every strip of it)
//   sumrv_strip_systolic_<cfg>_*_lin  ours: a team of lanes a pair, p's blocks held in
//                          registers, the outputs' accumulators passed from lane to lane
//   sumrv_split_combine_*  sums the strip kernel's partial results over j-splits
//   sumrv_shift_exp_*      strip's log space by a shift per pair where no term can
//   sumrv_shift_log_*      underflow: shifted exponentials, the linear kernel, logs
//   sumrv_fft_pad_*        fftconv (ours, linear space, around cuFFT): p's and q's rows
//   sumrv_fft_multiply_*   zero-padded into one buffer; the spectra's scaled product

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
// strip (ours): every warp works alone (no block barrier: a warp waiting on its loads
// leaves the SM to the others). A warp computes the outputs [I, I + S) of one pair over
// the j of one split of [0, m): its lanes form G groups that share its WARP / G output
// slots, each slot R consecutive outputs, S = WARP / G * R. Chunks of C values of p, and
// the S + C + R values of q they meet, are staged in the warp's own shared memory (zero
// padded: no bounds checks in the inner loop), 16 bytes a lane at a time where the rows
// allow (`vector`: every row 16-byte aligned, m and n whole vectors; chunks start at whole
// vectors of j, and so do splits). Group g takes the g-th of G contiguous runs of a
// chunk's steps. A step takes R values of j (a broadcast from p) and the window of R
// values of q below the previous step's, so that with the previous window it has the 2R
// values of q its outputs meet (two register arrays used in turn), and does R x R
// multiply-adds. The q buffer has a 16-byte pad after every R values: a window (always at
// a multiple of R) stays whole at an address linear in its start, and the windows of a
// group's lanes, R values and a pad apart (48 or 80 bytes), fall on distinct banks (at R = 4
// in f32, 32 bytes apart, two lanes of eight share each).
//
// Log space runs the same loops twice: pass 0 the max-plus product (c_i), pass 1 the sums
// of exp(a + b - c_i). With several splits each writes its partial result (a log value in
// log space) to partial[split][b][i] and sumrv_split_combine adds them in split order;
// with one split, r directly. Results leave through shared memory, coalesced.
template <typename T> __host__ __device__ constexpr int per16() { return 16 / sizeof(T); }
template <typename T, int R> __device__ __forceinline__ int padded(int v) { return v + v / R * per16<T>(); }
// 16 bytes of T, built and taken apart by value (an address taken would put it in local memory).
template <typename T> struct Vec;
template <> struct Vec<float> {
  typedef float4 type;
  static __device__ type splat(float v) { return make_float4(v, v, v, v); }
  static __device__ float get(const type& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }
};
template <> struct Vec<double> {
  typedef double2 type;
  static __device__ type splat(double v) { return make_double2(v, v); }
  static __device__ double get(const type& v, int k) { return k == 0 ? v.x : v.y; }
};

// w = buffer[base .. base + R), base a multiple of R (PADDED: stored through padded()).
template <bool PADDED, typename T, int R>
__device__ __forceinline__ void load_window(T (&w)[R], const T* buffer, int base) {
  typedef typename Vec<T>::type V;
  const T* window = buffer + (PADDED ? padded<T, R>(base) : base);
#pragma unroll
  for (int u = 0; u < R; u += per16<T>()) {
    const V v = *reinterpret_cast<const V*>(window + u);
#pragma unroll
    for (int k = 0; k < per16<T>(); ++k) w[u + k] = Vec<T>::get(v, k);
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

// The steps jb = begin, begin + R, .. < end of a chunk, for slot `slot`: q at
// i0 + k - j is sq[padded(slot R - jb + C + R) + k].
template <typename T, int R, int C, int PASS, bool LOG>
__device__ __forceinline__ void steps(T (&acc)[R], const T (&c)[R], const T* sp, const T* sq, int slot, int begin,
                                      int end) {
  T a[R], b[R], pj[R];
  int jb = begin;
  load_window<true>(a, sq, slot * R - jb + C + R);  // the first step's upper window
  for (; jb + R < end; jb += 2 * R) {
    load_window<true>(b, sq, slot * R - jb + C);
    load_window<false>(pj, sp, jb);
    step<T, R, PASS, LOG>(acc, c, pj, b, a);
    load_window<true>(a, sq, slot * R - jb - R + C);
    load_window<false>(pj, sp, jb + R);
    step<T, R, PASS, LOG>(acc, c, pj, a, b);
  }
  if (jb < end) {
    load_window<true>(b, sq, slot * R - jb + C);
    load_window<false>(pj, sp, jb);
    step<T, R, PASS, LOG>(acc, c, pj, b, a);
  }
}

// sp[v] = p[v] for v < p_end, sq[padded(v)] = q[v] for q_begin <= v < q_end, the identity
// elsewhere, as far as the chunk's steps read: sp below p_end rounded up to whole steps,
// sq from C less that (R more than the steps read). VECTOR: 16 bytes a lane at a time (p and
// q 16-byte aligned; p_end, q_begin and q_end whole vectors, and q_begin <= q_end always).
template <typename T, int R, bool VECTOR, bool LOG>
__device__ __forceinline__ void stage(T* sp, T* sq, const T* p, const T* q, int p_end, int q_begin, int q_end,
                                      int C, int Q, int lane) {
  const T zero = Space<T, LOG>::zero();
  const int p_read = (p_end + R - 1) / R * R, q_read = C - p_read;
  if (VECTOR) {
    typedef typename Vec<T>::type V;
    constexpr int P = per16<T>();
    const V zeros = Vec<T>::splat(zero);
    for (int v = lane * P; v < p_read; v += WARP * P)
      *reinterpret_cast<V*>(sp + v) = v < p_end ? *reinterpret_cast<const V*>(p + v) : zeros;
    for (int v = q_read + lane * P; v < Q; v += WARP * P)
      *reinterpret_cast<V*>(sq + padded<T, R>(v)) =
          (unsigned)(v - q_begin) < (unsigned)(q_end - q_begin) ? *reinterpret_cast<const V*>(q + v) : zeros;
  } else {
    for (int v = lane; v < p_read; v += WARP) sp[v] = v < p_end ? p[v] : zero;
    for (int v = q_read + lane; v < Q; v += WARP)
      sq[padded<T, R>(v)] = (unsigned)(v - q_begin) < (unsigned)(q_end - q_begin) ? q[v] : zero;
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

// A strip's passes over j: log space's first takes maxima (then c, the shift of the second),
// the others sums, each term added by over_j(pass); at each pass's end the lane groups'
// results are combined. acc then holds the sums (in log space of the shifted exponentials).
template <typename T, bool LOG, int R, class OverJ>
__device__ __forceinline__ void passes(T (&acc)[R], T (&c)[R], int lanes, OverJ over_j) {
#pragma unroll
  for (int k = 0; k < R; ++k) c[k] = Math<T>::ninf();
#pragma unroll
  for (int pass = 0; pass < (LOG ? 2 : 1); ++pass) {
#pragma unroll
    for (int k = 0; k < R; ++k) acc[k] = LOG && pass == 0 ? Math<T>::ninf() : T(0);
    over_j(pass);
    if (LOG && pass == 0) {
      reduce_groups<T, LOG, 0>(acc, lanes);
#pragma unroll
      for (int k = 0; k < R; ++k) c[k] = acc[k];
    } else {
      reduce_groups<T, LOG, 1>(acc, lanes);
    }
  }
}

template <typename T, int NT, int R, int C, int G>
struct StripShape {
  static_assert(C % R == 0 && R % per16<T>() == 0, "C must hold whole steps of whole vectors");
  static_assert(WARP % G == 0 && NT % WARP == 0, "whole warps of whole groups");
  static constexpr int WARPS = NT / WARP;
  static constexpr int LANES = WARP / G;  // output slots of a warp: its G groups of lanes share them
  static constexpr int S = LANES * R;  // outputs per warp
  static constexpr int Q = S + C + R;  // q values staged: q[I - jc - C - R + v], v < Q
  static constexpr int Q_PADDED = Q + Q / R * per16<T>() + per16<T>();
};

template <typename T, int NT, int R, int C, int G, bool LOG>
__device__ void strip(const T* p, long long ldp, const T* q, long long ldq, T* r, long long ldr, T* partial,
                      const unsigned char* done, int m, int n, long long batch, int splits, int split_len,
                      bool vector) {
  typedef StripShape<T, NT, R, C, G> Shape;
  constexpr int LANES = Shape::LANES, S = Shape::S, Q = Shape::Q;
  __shared__ __align__(16) T sp_all[Shape::WARPS][C];
  __shared__ __align__(16) T sq_all[Shape::WARPS][Shape::Q_PADDED];
  const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
  T* sp = sp_all[warp];
  T* sq = sq_all[warp];
  const int slot = lane % LANES, group = lane / LANES;
  const long long L = (long long)m + n - 1;
  const int strips = (int)((L + S - 1) / S);
  const long long items = batch * strips * splits;
  for (long long item = (long long)blockIdx.x * Shape::WARPS + warp; item < items;
       item += (long long)gridDim.x * Shape::WARPS) {
    // Item (rank, b, split): the strips of every pair by rank, the middle one (most j) first,
    // then outwards, so that the last blocks to run are the cheapest (a shorter tail).
    const int split = (int)(item % splits);
    const long long b = item / splits % batch;
    if (done && done[b]) continue;  // log space: a pair the shifted path computed
    const int rank = (int)(item / splits / batch), middle = (strips - 1) / 2, step = (rank + 1) / 2;
    const long long I = (long long)(rank % 2 ? middle + step : middle - step) * S;
    const T* pb = p + b * ldp;
    const T* qb = q + b * ldq;
    // j meets this strip where 0 <= i - j < n for some i in [I, I + S), within the split.
    long long j_lo = I - (n - 1) > 0 ? I - (n - 1) : 0, j_hi = I + S - 1 < m - 1 ? I + S - 1 : m - 1;
    const long long s_lo = (long long)split * split_len, s_hi = s_lo + split_len - 1;
    j_lo = j_lo > s_lo ? j_lo : s_lo;
    j_hi = j_hi < s_hi ? j_hi : s_hi;
    // From a whole vector of j: the j added below j_lo meet q beyond n - 1 (zero), as
    // s_lo is a whole vector (gpu.py) and so is 0.
    j_lo -= j_lo % per16<T>();
    T acc[R], c[R];
    passes<T, LOG, R>(acc, c, LANES, [&](int pass) {
      for (long long jc = j_lo; jc <= j_hi; jc += C) {
        __syncwarp();  // the previous chunk (or item's results) is no longer read
        // Rows are contiguous here (gpu.py copies strided views), so staging needs no
        // 64-bit multiply per value: p[jc + v] for v < C, q[k0 + v] for v < Q.
        const int p_end = j_hi - jc + 1 < C ? (int)(j_hi - jc + 1) : C;
        const long long k0 = I - jc - C - R;
        const int q_begin = k0 < 0 ? (int)-k0 : 0, q_end = n - k0 < Q ? (int)(n - k0) : Q;
        if (vector) stage<T, R, true, LOG>(sp, sq, pb + jc, qb + k0, p_end, q_begin, q_end, C, Q, lane);
        else stage<T, R, false, LOG>(sp, sq, pb + jc, qb + k0, p_end, q_begin, q_end, C, Q, lane);
        __syncwarp();
        // The chunk's steps, split among the groups in contiguous runs.
        const int chunk_steps = (p_end + R - 1) / R, run = (chunk_steps + G - 1) / G;
        const int begin = group * run * R, end = min(p_end, (group + 1) * run * R);
        if (begin >= end) continue;  // more groups than steps: this one has none
        if (LOG && pass == 0) steps<T, R, C, 0, LOG>(acc, c, sp, sq, slot, begin, end);
        else steps<T, R, C, 1, LOG>(acc, c, sp, sq, slot, begin, end);
      }
    });
    // Through shared memory (sq: no longer read), so that the stores coalesce.
    __syncwarp();
    if (group == 0) {
#pragma unroll
      for (int k = 0; k < R; ++k) sq[slot * R + k] = LOG ? log_of_sum(c[k], acc[k]) : acc[k];
    }
    __syncwarp();
    T* out = splits > 1 ? partial + ((long long)split * batch + b) * L : r + b * ldr;
    for (int v = lane; v < S && I + v < L; v += WARP) out[I + v] = sq[v];
  }
}

// strip, a warp per pair (chunk 0 in its name; ours): where a pair's p and q fit a warp's
// shared memory, the warp stages them once, whole, and computes every strip of the pair from
// them, so that narrow strips, which waste fewer multiply-adds on the zero padding at the
// ends of the parallelogram of terms (about S / (min(m, n) + S) of them), stage no more
// values than wide ones. Dynamic shared memory, per warp (gpu.whole_pair_values): p rounded
// up to whole steps (cw values), then q from -(cw + R) to strips x S, padded as above. The
// steps are those of strip (template C = 0: the q window's offset is in its base pointer).
template <typename T, int NT, int R, int G, bool LOG>
__device__ void strip_whole(const T* p, long long ldp, const T* q, long long ldq, T* r, long long ldr,
                            const unsigned char* done, int m, int n, long long batch, bool vector) {
  typedef StripShape<T, NT, R, R, G> Shape;
  constexpr int LANES = Shape::LANES, S = Shape::S;
  extern __shared__ __align__(16) unsigned char whole_shared[];
  const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
  const int L = m + n - 1, strips = (L + S - 1) / S, cw = (m + R - 1) / R * R, qw = strips * S + cw + R;
  T* sp = reinterpret_cast<T*>(whole_shared) + warp * (cw + padded<T, R>(qw) + per16<T>());
  T* sq = sp + cw;
  const int slot = lane % LANES, group = lane / LANES;
  for (long long b = (long long)blockIdx.x * Shape::WARPS + warp; b < batch;
       b += (long long)gridDim.x * Shape::WARPS) {
    if (done && done[b]) continue;  // log space: a pair the shifted path computed
    __syncwarp();  // the previous pair is no longer read
    const T* qb = q + b * ldq - (cw + R);  // sq[padded(u)] = q[u - cw - R]
    if (vector) stage<T, R, true, LOG>(sp, sq, p + b * ldp, qb, m, cw + R, n + cw + R, cw, qw, lane);
    else stage<T, R, false, LOG>(sp, sq, p + b * ldp, qb, m, cw + R, n + cw + R, cw, qw, lane);
    __syncwarp();
    for (int I = 0; I < L; I += S) {
      // j meets the strip where 0 <= i - j < n for some i in [I, I + S), from a whole step (the
      // j added below meet q beyond n - 1: zero), split among the groups in contiguous runs.
      int j_lo = I - (n - 1) > 0 ? I - (n - 1) : 0;
      const int j_hi = I + S - 1 < m - 1 ? I + S - 1 : m - 1;
      j_lo -= j_lo % R;
      const int run = ((j_hi - j_lo) / R + G) / G;
      const int begin = j_lo + group * run * R, end = min(j_hi + 1, j_lo + (group + 1) * run * R);
      const T* sq_strip = sq + padded<T, R>(I + cw);
      T acc[R], c[R];
      passes<T, LOG, R>(acc, c, LANES, [&](int pass) {
        if (begin >= end) return;
        if (LOG && pass == 0) steps<T, R, 0, 0, LOG>(acc, c, sp, sq_strip, slot, begin, end);
        else steps<T, R, 0, 1, LOG>(acc, c, sp, sq_strip, slot, begin, end);
      });
      if (group == 0) {
#pragma unroll
        for (int k = 0; k < R; ++k)
          if (I + slot * R + k < L) r[b * ldr + I + slot * R + k] = LOG ? log_of_sum(c[k], acc[k]) : acc[k];
      }
    }
  }
}

// A value (or a 16-byte vector) of a row copied to shared memory, asynchronously where the
// architecture allows (sm_80 on: no register held, every copy of a row in flight at once;
// wait_copies waits).
template <typename T>
__device__ __forceinline__ void copy_async(T* shared, const T* global) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(unsigned(__cvta_generic_to_shared(shared))),
               "l"(__cvta_generic_to_global(global)), "n"(sizeof(T))
               : "memory");
#else
  *shared = *global;
#endif
}
__device__ __forceinline__ void wait_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// buffer[0 .. R) = w (buffer 16-byte aligned).
template <typename T, int R>
__device__ __forceinline__ void store_window(T* buffer, const T (&w)[R]) {
  typedef typename Vec<T>::type V;
#pragma unroll
  for (int u = 0; u < R; u += per16<T>()) {
    V v;
    T* parts = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int k = 0; k < per16<T>(); ++k) parts[k] = w[u + k];
    *reinterpret_cast<V*>(buffer + u) = v;
  }
}

// strip, systolic (ours; linear space, the shorter row as p): lane l of a team of `team`
// lanes (WARP / team pairs a warp) holds p's block l (R values) in registers, and in round d
// = 0 .. d_max adds the R x R tile of terms of that block and q's block offset d (q at R d -
// R + 1 .. R d + R - 1) to its R accumulators, which hold output block l + d. Then every lane
// stores them at that block of the pair's output row in shared memory and takes block l + d
// + 1 from it, which lane l + 1 stored: each output block collects its tiles from the lanes in
// turn (p's blocks in decreasing order), in place, and the team's last lane starts on a block
// no lane has stored (zeros). Lane 0's block d is then whole, and no lane stores it again.
// Every lane does d_max + 1 tiles, all meeting the parallelogram of terms (the zero padding
// only where a tile straddles its edges), and reads the same q window (a broadcast), the last
// round's upper half. Dynamic shared memory, per pair (gpu.systolic_config): q from -R, zeros
// past its ends, then the outputs (padded as in strip: the lanes' blocks meet no bank twice).
// `vector` (q's rows 16-byte aligned): q staged 16 bytes a copy where a vector lies within the row.
template <typename T, int NT, int R>
__device__ void strip_systolic(const T* p, long long ldp, const T* q, long long ldq, T* r, long long ldr, int m,
                               int n, long long batch, int team, bool vector) {
  constexpr int WARPS = NT / WARP, P = per16<T>(), STRIDE = R + P;  // output blocks lie STRIDE apart
  typedef typename Vec<T>::type V;
  extern __shared__ __align__(16) unsigned char systolic_shared[];
  const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, teams = WARP / team;
  const int member = lane % team, mine = lane / team;
  const int L = m + n - 1, d_max = (n + R - 2) / R, q_values = (d_max + 3) * R;
  const int out_values = padded<T, R>((team + d_max + 1) * R);
  T* sq = reinterpret_cast<T*>(systolic_shared) + (warp * teams + mine) * (q_values + out_values);
  T* out = sq + q_values;
  for (long long first = ((long long)blockIdx.x * WARPS + warp) * teams; first < batch;
       first += (long long)gridDim.x * WARPS * teams) {
    const long long b = first + mine;
    const bool pair = b < batch;
    __syncwarp();  // the previous pairs are no longer read
    const T* const qb = q + b * ldq;
    if (pair)
      for (int x = (member - R / P) * P; x < (d_max + 1) * R; x += team * P) {  // sq[x + R] = q at x
        if (vector && x >= 0 && x + P <= n) {
          copy_async(reinterpret_cast<V*>(sq + x + R), reinterpret_cast<const V*>(qb + x));
          continue;
        }
#pragma unroll
        for (int k = 0; k < P; ++k)
          if ((unsigned)(x + k) < (unsigned)n) copy_async(sq + x + k + R, qb + x + k);
          else sq[x + k + R] = T(0);
      }
    for (int v = member * P; v < out_values; v += team * P) *reinterpret_cast<V*>(out + v) = Vec<T>::splat(T(0));
    T pj[R], acc[R], c[R], lo[R], hi[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int j = member * R + k;
      pj[k] = pair && j < m ? p[b * ldp + j] : T(0);
      acc[k] = T(0);
    }
    wait_copies();
    __syncwarp();
    // Round d: the tile, then the lane's block stored and the next lane's taken. A block that
    // a lane takes in round d it stores next in round d + 1, and no other lane touches it
    // between: one barrier a round (the stores before the loads).
    T* const first_block = out + member * STRIDE;
    auto round = [&](int d, const T(&lower)[R], const T(&upper)[R]) {
      step<T, R, 1, false>(acc, c, pj, lower, upper);
      store_window(first_block + d * STRIDE, acc);
      __syncwarp();
      load_window<false>(acc, first_block + (d + 1) * STRIDE, 0);
    };
    // lo / hi hold q at R d - R + s / R d + s: round d + 1's lo is round d's hi.
    load_window<false>(lo, sq, 0);
    load_window<false>(hi, sq, R);
    for (int d = 0; d <= d_max; d += 2) {
      round(d, lo, hi);
      if (d == d_max) break;
      load_window<false>(lo, sq, (d + 2) * R);
      round(d + 1, hi, lo);
      load_window<false>(hi, sq, (d + 3) * R);
    }
    if (pair) {
      T* const rb = r + b * ldr;
      if (team % R == 0)  // padded(v + team) = padded(v) + team / R * STRIDE: a pointer's step
        for (int v = member, s = padded<T, R>(member); v < L; v += team, s += team / R * STRIDE) rb[v] = out[s];
      else
        for (int v = member; v < L; v += team) rb[v] = out[padded<T, R>(v)];
    }
  }
}

template <typename T, bool LOG>
__device__ void split_combine(const T* partial, T* r, long long ldr, long long incr, const unsigned char* done,
                              int m, int n, long long batch, int splits) {
  const long long L = (long long)m + n - 1;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < batch * L;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / L, i = e % L;
    if (done && done[b]) continue;
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
// strip in log space by a shift per pair, where that is safe (ours). With s_a = max_j a_j
// and s_b = max_k b_k every term is exp(a_j - s_a) exp(b_k - s_b) exp(s_a + s_b):
// sumrv_shift_exp writes each row's shifted exponentials (m + n exps a pair, not m n),
// its shift and its spread (largest minus smallest finite value); the linear strip kernel
// sums their products; sumrv_shift_log takes r_i = log(sum) + s_a + s_b and marks the pair
// done. Where a pair's two spreads sum to at most `limit` (gpu.py: 80 in f32, 700 in
// f64), no shifted product is below the smallest normal number (1.2e-38, 2.2e-308): every
// term keeps its relative accuracy, as with the per-output shift. The other pairs are
// left to the per-output kernel (strip's `done` mask).
template <typename T> __device__ T accurate_exp(T x);
template <> __device__ float accurate_exp(float x) { return expf(x); }  // m + n of them: no need of __expf's speed
template <> __device__ double accurate_exp(double x) { return exp(x); }

// One warp per row, grid-stride over the batch rows of p (packed, m each) and then those
// of q (n each): stats[0][b] and stats[1][b] get the shifts of p and q, stats[2][b] and
// stats[3][b] their spreads.
template <typename T>
__device__ void shift_exp(const T* p, const T* q, T* p_out, T* q_out, T* stats, int m, int n, long long batch) {
  const int lane = threadIdx.x % WARP;
  const long long warps = (long long)gridDim.x * blockDim.x / WARP;
  for (long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / WARP; row < 2 * batch; row += warps) {
    const bool of_q = row >= batch;
    const long long b = of_q ? row - batch : row;
    const int len = of_q ? n : m;
    const T* in = (of_q ? q : p) + b * len;
    T* out = (of_q ? q_out : p_out) + b * len;
    T hi = Math<T>::ninf(), lo_negated = Math<T>::ninf();  // max and -min of the finite values
    for (int j = lane; j < len; j += WARP) {
      hi = fmax(hi, in[j]);
      if (in[j] != Math<T>::ninf()) lo_negated = fmax(lo_negated, -in[j]);
    }
    hi = warp_max(hi);
    lo_negated = warp_max(lo_negated);
    const bool empty = hi == Math<T>::ninf();  // every probability 0: exp(-inf - 0) = 0
    const T s = empty ? T(0) : hi;
    for (int j = lane; j < len; j += WARP) out[j] = accurate_exp(in[j] - s);
    if (lane == 0) {
      stats[of_q * batch + b] = s;
      stats[(2 + of_q) * batch + b] = empty ? T(0) : hi + lo_negated;
    }
  }
}

// r (contiguous rows) holds the sums of the shifted products; one thread per output.
template <typename T>
__device__ void shift_log(T* r, const T* stats, unsigned char* done, T limit, int m, int n, long long batch) {
  const long long L = (long long)m + n - 1;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < batch * L;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / L, i = e % L;
    const bool safe = stats[2 * batch + b] + stats[3 * batch + b] <= limit;
    if (i == 0) done[b] = safe;
    if (safe) r[e] = r[e] > 0 ? Math<T>::log(r[e]) + stats[b] + stats[batch + b] : Math<T>::ninf();
  }
}

// ---------------------------------------------------------------------------
// fftconv (ours; gpu.py runs cuFFT's transforms between these): the rows of p, then those of
// q, zero-padded to the transforms' length `size` in one buffer of 2 batch rows, so that one
// forward transform takes both; then p's spectra times q's, scaled by 1 / size (the inverse
// transform's normalisation), in place of p's, the inverse transform's input.
template <typename T>
__device__ void fft_pad(const T* p, long long ldp, long long incp, const T* q, long long ldq, long long incq,
                        T* padded, int m, int n, int size, long long batch) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < 2 * batch * size;
       e += (long long)gridDim.x * blockDim.x) {
    const long long row = e / size;
    const int j = e % size;
    const bool of_q = row >= batch;
    const long long b = of_q ? row - batch : row;
    padded[e] = j >= (of_q ? n : m) ? T(0) : of_q ? q[b * ldq + j * incq] : p[b * ldp + j * incp];
  }
}

// spectra: 2 count complex values (T2: float2 or double2), p's then q's.
template <typename T, typename T2>
__device__ void fft_multiply(T2* spectra, T scale, long long count) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
       e += (long long)gridDim.x * blockDim.x) {
    const T2 a = spectra[e], b = spectra[count + e];
    spectra[e] = T2{(a.x * b.x - a.y * b.y) * scale, (a.x * b.y + a.y * b.x) * scale};
  }
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
                                                               long long incr, const unsigned char *done,   \
                                                               int m, int n, long long batch, int splits) { \
    split_combine<T, LOG>(partial, r, ldr, incr, done, m, n, batch, splits);                                \
  }
// Strip configurations (threads NT, outputs per slot R, chunk C, lane groups G): gpu.py's STRIPS
// and (C = 0, a warp per pair) WHOLE.
#define STRIP(T, PREC, SP, LOG, NT, R, C, G)                                                                 \
  extern "C" __global__ void __launch_bounds__(NT) sumrv_strip_##NT##x##R##x##C##x##G##_##PREC##_##SP(       \
      const T *p, long long ldp, const T *q, long long ldq, T *r, long long ldr, T *partial,                   \
      const unsigned char *done, int m, int n, long long batch, int splits, int split_len, int vector) {     \
    strip<T, NT, R, C, G, LOG>(p, ldp, q, ldq, r, ldr, partial, done, m, n, batch, splits, split_len, vector); \
  }
#define STRIP_WHOLE(T, PREC, SP, LOG, NT, R, G)                                                             \
  extern "C" __global__ void __launch_bounds__(NT) sumrv_strip_##NT##x##R##x0x##G##_##PREC##_##SP(            \
      const T *p, long long ldp, const T *q, long long ldq, T *r, long long ldr, T *partial,                   \
      const unsigned char *done, int m, int n, long long batch, int splits, int split_len, int vector) {     \
    strip_whole<T, NT, R, G, LOG>(p, ldp, q, ldq, r, ldr, done, m, n, batch, vector);                        \
  }
// The systolic strip (gpu.py's SYSTOLIC): blocks of 3 warps (finer waves than 4), and in f32 for
// rows of up to 256 values 4 warps of R = 8. Not capped: at six blocks of 4 warps an SM (80
// registers) the 3-warp kernel ran up to 8% faster in f64 (H200, m = n = 128 and 256) but
// spilled 20-52 bytes.
#define STRIP_SYSTOLIC(T, PREC, NT, R)                                                                       \
  extern "C" __global__ void __launch_bounds__(NT) sumrv_strip_systolic_##NT##x##R##_##PREC##_lin(             \
      const T *p, long long ldp, const T *q, long long ldq, T *r, long long ldr, int m, int n, long long batch, \
      int team, int vector) {                                                                                \
    strip_systolic<T, NT, R>(p, ldp, q, ldq, r, ldr, m, n, batch, team, vector);                             \
  }
#define SHIFTS(T, PREC)                                                                                     \
  extern "C" __global__ void sumrv_shift_exp_##PREC(const T *p, const T *q, T *p_out, T *q_out, T *stats,    \
                                                    int m, int n, long long batch) {                        \
    shift_exp<T>(p, q, p_out, q_out, stats, m, n, batch);                                                   \
  }                                                                                                         \
  extern "C" __global__ void sumrv_shift_log_##PREC(T *r, const T *stats, unsigned char *done, T limit,      \
                                                    int m, int n, long long batch) {                        \
    shift_log<T>(r, stats, done, limit, m, n, batch);                                                       \
  }

#define FFT(T, T2, PREC)                                                                                    \
  extern "C" __global__ void sumrv_fft_pad_##PREC(const T *p, long long ldp, long long incp, const T *q,     \
                                                  long long ldq, long long incq, T *padded, int m, int n,   \
                                                  int size, long long batch) {                              \
    fft_pad<T>(p, ldp, incp, q, ldq, incq, padded, m, n, size, batch);                                      \
  }                                                                                                         \
  extern "C" __global__ void sumrv_fft_multiply_##PREC(T2 *spectra, T scale, long long count) {              \
    fft_multiply<T, T2>(spectra, scale, count);                                                             \
  }

FOR_SPACES(NAIVE, float, f32)
FOR_SPACES(NAIVE, double, f64)
FOR_SPACES(SKEWDIAG, float, f32)
FOR_SPACES(SKEWDIAG, double, f64)
STRIP(float, f32, lin, false, 128, 8, 256, 2) STRIP(float, f32, lin, false, 128, 16, 512, 2)
STRIP(double, f64, lin, false, 128, 8, 256, 2)
STRIP(float, f32, log, true, 128, 4, 128, 4) STRIP(double, f64, log, true, 128, 4, 128, 4)
STRIP_WHOLE(float, f32, lin, false, 128, 16, 4) STRIP_WHOLE(double, f64, lin, false, 128, 8, 4)
STRIP_WHOLE(float, f32, log, true, 128, 4, 4)
STRIP_SYSTOLIC(float, f32, 128, 8) STRIP_SYSTOLIC(float, f32, 96, 16) STRIP_SYSTOLIC(double, f64, 96, 8)
SHIFTS(float, f32)
SHIFTS(double, f64)
FFT(float, float2, f32)
FFT(double, double2, f64)
