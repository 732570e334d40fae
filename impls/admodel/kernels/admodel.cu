// The data part of the negative log posterior of the ad-click model and of its gradient
// (../../../../shared/specs/admodel.md), one thread per observation in grid-stride loops:
//
//   log mu_i = th[0] + th[D+d] + th[F+f] + th[M+m] + th[R+r] + th[P+p] + <th[MP+m*N..], th[PM+p*N..]>
//   f       -= w_i (Y_i log mu_i - mu_i - log Y_i!)
//   grad[j] += -w_i (Y_i - mu_i) d log mu_i / d th_j        (the residual times 1 or th)
//
// Observations are a structure of arrays: cov[c * n + i] for the classes d, f, m, r, p
// (int32), y (int8), w (int16): 23 bytes each. The prior part (th / psi, th^2 / (2 psi))
// is added by the caller (impls/admodel/gpu.py), as the thesis's prior kernel does.
//
// Kernels (extern "C", for f32/f64, N = 10 factors, and L1 = ldg (loads cached in L1) or
// ldcg (cached in L2 only: the thesis's "L1 disabled", per load on Hopper)):
//   admodel_objective_*     the thesis's objective: a partial sum per block (no atomics)
//   admodel_grad_atomic_*   the thesis's naive gradient: an atomicAdd per effect index
//                           (5 + 2N per observation), the intercept by a block sum
//   admodel_grad_block_*    the thesis's improved gradient: a block aggregates equal indices
//                           in shared memory (O(B^2) compares) and the first occurrence adds
//   admodel_grad_warp_*     ours: lanes with equal indices (__match_any_sync) combine, one
//                           atomic per distinct index of a warp; the factor rows are read
//                           and added a whole row per N adjacent lanes (through a stage in
//                           shared memory), not an element per lane
//   admodel_fused_*         ours: grad_warp and the objective in one pass over the data
//   admodel_*_skewed_*      grad_warp and fused for data whose popular levels occur in most
//                           warps (gpu.py's hottest_share decides): each block a contiguous
//                           range of observations, the entries a warp adds through a block's
//                           cache in shared memory, a factor row kept per run of its key
//                           (kernels/NOTES.md)
//   admodel_fused_pairs_*   fused on observations bucketed by (material, placement): in place of
//                           the material's and placement's effects and rows, each pair's sum of
//                           residuals S_q (one atomic a pair a warp)
//   admodel_pair_rows_*     then, from the S_q, those effects and rows: warps per material (or
//                           placement) sum S_q and S_q times the other class's row over its pairs

#define FULL_MASK 0xffffffffu

// Registers per thread, per kernel: the caps that ran fastest in profile_kernels.py's scan
// on an H200 (sim, scale 1, float64; fewer registers, more warps to hide the gathers'
// latency). The scan compiles with -DREGISTERS=<cap> to put one cap on every kernel.
#ifdef REGISTERS
#define CAP(registers) __maxnreg__(REGISTERS)
#else
#define CAP(registers) __maxnreg__(registers)
#endif

template <bool L1, typename T> __device__ __forceinline__ T load(const T* p) {
  return L1 ? __ldg(p) : __ldcg(p);
}

template <typename T> __device__ __forceinline__ T log_factorial(int y) {  // y in 0..3
  return y < 2 ? T(0) : (y == 2 ? T(0.69314718055994530942) : T(1.79175946922805500081));
}

__device__ __forceinline__ float exp_of(float x) { return expf(x); }
__device__ __forceinline__ double exp_of(double x) { return exp(x); }

template <typename T> __device__ T warp_sum(T v) {
  for (int offset = 16; offset; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
  return v;
}

// The sum over the block, in thread 0 (every thread of the block must call it).
template <typename T> __device__ T block_sum(T v) {
  __shared__ T warps[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // warps[] may still be read by a previous call
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? warps[threadIdx.x] : T(0);
  return warp == 0 ? warp_sum(v) : T(0);
}

struct Offsets {
  int d, f, m, r, p, mp, pm;
};

// One observation: its covariates and log mu (without the factor rows' product until a
// kernel adds it); a and b point at its two factor rows. Lanes past the end keep the
// defaults: keys -1 and weight 0, so that their residual and loss are 0.
template <typename T, int N, bool L1> struct Observation {
  int d = -1, f = -1, m = -1, r = -1, p = -1, y = 0;
  T w = 0, eta = 0;
  const T *a = nullptr, *b = nullptr;

  __device__ void read(const T* theta, const int* cov, const signed char* y_, const short* w_, long long n,
                       long long i, Offsets o) {
    d = load<L1>(cov + i);
    f = load<L1>(cov + n + i);
    m = load<L1>(cov + 2 * n + i);
    r = load<L1>(cov + 3 * n + i);
    p = load<L1>(cov + 4 * n + i);
    y = load<L1>(y_ + i);
    w = T(load<L1>(w_ + i));
    a = theta + o.mp + (long long)m * N;
    b = theta + o.pm + (long long)p * N;
    eta = load<L1>(theta) + load<L1>(theta + o.d + d) + load<L1>(theta + o.f + f) + load<L1>(theta + o.m + m) +
          load<L1>(theta + o.r + r) + load<L1>(theta + o.p + p);
  }
  // The thesis's way: this thread reads both rows itself, an element at a time.
  __device__ void add_own_rows() {
#pragma unroll
    for (int k = 0; k < N; ++k) eta += load<L1>(a + k) * load<L1>(b + k);
  }
  __device__ T mu() const { return exp_of(eta); }
  __device__ T loss(T mu) const { return -w * (T(y) * eta - mu - log_factorial<T>(y)); }
  __device__ T residual(T mu) const { return -w * (T(y) - mu); }  // d loss / d eta
};

// ---------------------------------------------------------------------------
template <typename T, int N, bool L1>
__device__ void objective(const T* theta, const int* cov, const signed char* y, const short* w, long long n,
                          Offsets o, T* partials) {
  T total = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    Observation<T, N, L1> obs;
    obs.read(theta, cov, y, w, n, i, o);
    obs.add_own_rows();
    total += obs.loss(obs.mu());
  }
  total = block_sum(total);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// ---------------------------------------------------------------------------
template <typename T, int N, bool L1>
__device__ void grad_atomic(const T* theta, const int* cov, const signed char* y, const short* w, long long n,
                            Offsets o, T* grad) {
  T intercept = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    Observation<T, N, L1> obs;
    obs.read(theta, cov, y, w, n, i, o);
    obs.add_own_rows();
    const T res = obs.residual(obs.mu());
    intercept += res;
    atomicAdd(grad + o.d + obs.d, res);
    atomicAdd(grad + o.f + obs.f, res);
    atomicAdd(grad + o.m + obs.m, res);
    atomicAdd(grad + o.r + obs.r, res);
    atomicAdd(grad + o.p + obs.p, res);
    T* ga = grad + (obs.a - theta);
    T* gb = grad + (obs.b - theta);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      atomicAdd(ga + k, res * load<L1>(obs.b + k));
      atomicAdd(gb + k, res * load<L1>(obs.a + k));
    }
  }
  intercept = block_sum(intercept);
  if (threadIdx.x == 0) atomicAdd(grad, intercept);
}

// ---------------------------------------------------------------------------
// The thesis's improved gradient: per tile of blockDim.x observations and per effect,
// the first thread holding an index sums the values of every thread with that index
// and does the one atomicAdd. Dynamic shared memory: blockDim.x ints and N values each.
template <typename T, int V>
__device__ void block_aggregate(int* keys, T* values, int key, const T* mine, T* target, int stride) {
  const int t = threadIdx.x;
  __syncthreads();  // the previous effect's keys and values have been read
  keys[t] = key;
#pragma unroll
  for (int k = 0; k < V; ++k) values[k * blockDim.x + t] = mine[k];
  __syncthreads();
  if (key < 0) return;
  for (int j = 0; j < t; ++j)
    if (keys[j] == key) return;  // not the first occurrence
  T sum[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sum[k] = mine[k];
  for (int j = t + 1; j < blockDim.x; ++j)
    if (keys[j] == key) {
#pragma unroll
      for (int k = 0; k < V; ++k) sum[k] += values[k * blockDim.x + j];
    }
#pragma unroll
  for (int k = 0; k < V; ++k) atomicAdd(target + (long long)key * stride + k, sum[k]);
}

template <typename T, int N, bool L1>
__device__ void grad_block(const T* theta, const int* cov, const signed char* y, const short* w, long long n,
                           Offsets o, T* grad) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* values = reinterpret_cast<T*>(shared);
  int* keys = reinterpret_cast<int*>(values + N * blockDim.x);
  T intercept = 0;
  // Whole tiles per block: every thread of the block takes part in every tile.
  for (long long base = blockIdx.x * (long long)blockDim.x; base < n; base += (long long)gridDim.x * blockDim.x) {
    const long long i = base + threadIdx.x;
    const bool valid = i < n;
    T res = 0, pa[N] = {}, pb[N] = {};
    int idx[5] = {-1, -1, -1, -1, -1};
    if (valid) {
      Observation<T, N, L1> obs;
      obs.read(theta, cov, y, w, n, i, o);
      obs.add_own_rows();
      res = obs.residual(obs.mu());
      idx[0] = obs.d; idx[1] = obs.f; idx[2] = obs.m; idx[3] = obs.r; idx[4] = obs.p;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        pa[k] = res * load<L1>(obs.b + k);  // for th_MP[m, k]
        pb[k] = res * load<L1>(obs.a + k);  // for th_PM[p, k]
      }
    }
    intercept += res;
    const int starts[5] = {o.d, o.f, o.m, o.r, o.p};
#pragma unroll
    for (int c = 0; c < 5; ++c) block_aggregate<T, 1>(keys, values, idx[c], &res, grad + starts[c], 1);
    block_aggregate<T, N>(keys, values, idx[2], pa, grad + o.mp, N);
    block_aggregate<T, N>(keys, values, idx[4], pb, grad + o.pm, N);
  }
  intercept = block_sum(intercept);
  if (threadIdx.x == 0) atomicAdd(grad, intercept);
}

// ---------------------------------------------------------------------------
// Ours: warp-aggregated atomics, and the factor rows moved a whole row per N adjacent lanes
// through a stage in shared memory.
//
// warp_aggregate: the lanes of a warp holding the same key combine their values; the
// lowest lane of each group (the leader, for which it returns true) gets the group's sum.
// Warp-uniform choice of how: by shuffles pulling one peer's value at a time (as many
// steps as the largest group has lanes but one: few in shuffled data), or, where every
// group is a run of adjacent lanes (sorted data) with more than SCAN_FROM lanes, by a
// segmented suffix sum in 5 steps.
#define SCAN_FROM 6
template <typename T>
__device__ bool warp_aggregate(unsigned peers, T mine, T& sum) {
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(peers) - 1, last = 31 - __clz(peers);
  const unsigned largest = __reduce_max_sync(FULL_MASK, __popc(peers));
  sum = mine;
  if (largest > SCAN_FROM && __all_sync(FULL_MASK, (peers >> leader) == (0xffffffffu >> (31 - last + leader)))) {
    for (int offset = 1; offset < 32; offset <<= 1) {
      const T value = __shfl_down_sync(FULL_MASK, sum, offset);
      if (lane + offset <= last) sum += value;  // sum: lanes lane..last of the group
    }
  } else {
    unsigned others = lane == leader ? peers & (peers - 1) : 0u;  // the leader's peers but itself
    for (unsigned step = 1; step < largest; ++step) {
      const T value = __shfl_sync(FULL_MASK, mine, others ? __ffs(others) - 1 : lane);
      if (others) sum += value;
      others &= others - 1;
    }
  }
  return lane == leader;
}

// The skewed path. Zipf-skewed levels (real-like) put a few indices in every warp of the
// grid, and atomics on one address serialise in L2: hundreds of thousands a call on each
// popular entry bound the kernel. Two remedies, neither of which pays on uniform data:
//
// GradientCache: a block's open-addressed table of SLOTS gradient indices and sums in
// shared memory (512 in f64, 1024 in f32: four blocks of 256 still fit an SM). A warp's
// sum for an index goes to its slot (claimed by the first index that hashes there, or the
// next slot), else straight to the gradient; the table reaches the gradient once per block.
#define CACHE_PROBES 2
template <typename T> struct GradientCache {
  static constexpr int BITS = sizeof(T) == 8 ? 9 : 10, SLOTS = 1 << BITS;
  T* sums;
  int* indices;

  __device__ void clear() {
    for (int s = threadIdx.x; s < SLOTS; s += blockDim.x) {
      indices[s] = -1;
      sums[s] = T(0);
    }
    __syncthreads();
  }
  __device__ void add(T* grad, int index, T value) {
    int slot = (unsigned(index) * 2654435761u) >> (32 - BITS);  // Knuth's multiplicative hash
    for (int probe = 0; probe < CACHE_PROBES; ++probe, slot = (slot + 1) & (SLOTS - 1)) {
      // A slot, once claimed, keeps its index: a stale read can only be -1, which the CAS
      // corrects. volatile: a load of this call's own, not one the compiler reuses from an
      // earlier add() inlined beside it (which would cost CASes, not correctness).
      int held = reinterpret_cast<volatile int*>(indices)[slot];
      if (held < 0) held = atomicCAS(indices + slot, -1, index);
      if (held < 0 || held == index) {
        atomicAdd(sums + slot, value);
        return;
      }
    }
    atomicAdd(grad + index, value);
  }
  __device__ void flush(T* grad) {
    __syncthreads();
    for (int s = threadIdx.x; s < SLOTS; s += blockDim.x)
      if (indices[s] >= 0) atomicAdd(grad + indices[s], sums[s]);
  }
};

// RowRun: a warp's factor row being summed (N values of its own in shared memory) while
// the warp's tiles (a block apart in its block's range) end with the same key: sorted
// observations then add a popular material's row once per run of it, not once per tile.
template <typename T, int N> struct RowRun {
  T* sums;
  int key = -1;  // warp-uniform
  __device__ void flush(T* grad, int start) {
    const int lane = threadIdx.x & 31;
    if (key >= 0 && lane < N) atomicAdd(grad + start + (long long)key * N + lane, sums[lane]);
  }
  // Before a tile's rows: the run continues with the key of the tile's last lane, or restarts.
  __device__ void follow(T* grad, int start, int key_of_lane) {
    const int lane = threadIdx.x & 31, last_key = __shfl_sync(FULL_MASK, key_of_lane, 31);
    if (last_key == key) return;
    flush(grad, start);
    __syncwarp();
    if (lane < N) sums[lane] = T(0);
    key = last_key;
    __syncwarp();
  }
};

// Where the warp's sums go: the gradient (uniform data), or the cache and the runs.
template <typename T, int N, bool SKEWED> struct Scatter {
  T* grad;
  GradientCache<T> cache;
  RowRun<T, N> run_a, run_b;  // th_MP's and th_PM's

  __device__ void add(int index, T value) {
    if (SKEWED)
      cache.add(grad, index, value);
    else
      atomicAdd(grad + index, value);
  }
  // Row `key` of a factor class (run: its RowRun), element k.
  __device__ void add_row(const RowRun<T, N>& run, int start, int key, int k, T value) {
    if (SKEWED && key == run.key)
      run.sums[k] += value;  // one group of the warp has the key: no other lane adds to sums[k]
    else
      atomicAdd(grad + start + (long long)key * N + k, value);
  }
};

// A warp's stage: 32 rows of N values and the row's residual (slot N), N + 1 apart so
// that the lanes' rows fall in distinct banks.
template <int N> __device__ __forceinline__ int stage_slot(int row, int k) { return row * (N + 1) + k; }

// Row `lane` of the stage = rows[key * N ..] of the lane's key (0 where key < 0). Element
// s of the warp's 32 x N is read by lane s % 32 in step s / 32, so that N adjacent lanes
// read a whole row: a request per sector of the row, not one per lane and element as a
// thread reading its own row makes.
template <typename T, int N, bool L1>
__device__ void gather_rows(const T* rows, int key, T* stage) {
  const int lane = threadIdx.x & 31;
#pragma unroll 5
  for (int step = 0; step < N; ++step) {
    const int s = step * 32 + lane, owner = s / N, k = s % N;
    const int owner_key = __shfl_sync(FULL_MASK, key, owner);
    stage[stage_slot<N>(owner, k)] = owner_key >= 0 ? load<L1>(rows + (long long)owner_key * N + k) : T(0);
  }
}

// The gradient of a factor class: row key (from `start`) += the sum over the lanes with the
// key of residual * other row[k] (`other`: the stage of the other class's rows, with the
// residuals). Laid out as gather_rows reads: the lane for (row, k) of a group's leader
// sums over the group in shared memory and adds once.
template <typename T, int N, bool SKEWED>
__device__ void add_row_gradient(Scatter<T, N, SKEWED>& scatter, const RowRun<T, N>& run, int start, unsigned peers,
                                 int key, const T* other) {
  const int lane = threadIdx.x & 31;
  const bool leader = (peers & ((1u << lane) - 1)) == 0;
#pragma unroll 1
  for (int step = 0; step < N; ++step) {
    const int s = step * 32 + lane, owner = s / N, k = s % N;
    const int owner_key = __shfl_sync(FULL_MASK, leader ? key : -1, owner);
    const unsigned group = __shfl_sync(FULL_MASK, peers, owner);
    if (owner_key >= 0) {
      T sum = 0;
      for (unsigned rest = group; rest; rest &= rest - 1) {
        const int j = __ffs(rest) - 1;
        sum += other[stage_slot<N>(j, N)] * other[stage_slot<N>(j, k)];
      }
      scatter.add_row(run, start, owner_key, k, sum);
    }
  }
}

// Dynamic shared memory: two stages per warp (none with PAIRS and L1), each 32 rows of N + 1 values; where
// SKEWED, then the cache's SLOTS sums, two runs of N values per warp (not with PAIRS) and the
// cache's SLOTS int indices.
//
// PAIRS (observations bucketed by material, then placement; pair_of[i] the index of
// observation i's (material, placement) pair, non-decreasing): the gradient of the material's
// and placement's effects and rows is that of their pairs, sum_i r_i th_PM[p_i] over a pair's
// observations being S_q th_PM[p_q] with S_q its sum of residuals: the warp adds each S_q once
// (pair_sums, zeroed by the caller) and pair_rows does the rest, where the rows' sums (N
// atomics an observation's group) cost most of the instructions.
template <typename T, int N, bool L1, bool WANT_F, bool SKEWED, bool PAIRS = false>
__device__ void fused(const T* theta, const int* cov, const signed char* y, const short* w, long long n,
                      Offsets o, T* grad, T* partials, const int* pair_of = nullptr, T* pair_sums = nullptr) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  constexpr bool OWN_ROWS = PAIRS && L1;  // each lane reads its two rows itself (below): no stages
  constexpr int STAGES = OWN_ROWS ? 0 : 2;
  T* stage_a = reinterpret_cast<T*>(shared) + warp * STAGES * 32 * (N + 1);  // th_MP rows
  T* stage_b = stage_a + 32 * (N + 1);                                       // th_PM rows
  Scatter<T, N, SKEWED> scatter;
  scatter.grad = grad;
  if (SKEWED) {
    scatter.cache.sums = reinterpret_cast<T*>(shared) + STAGES * blockDim.x * (N + 1);
    scatter.run_a.sums = scatter.cache.sums + GradientCache<T>::SLOTS + warp * 2 * N;
    scatter.run_b.sums = scatter.run_a.sums + N;
    scatter.cache.indices =
        reinterpret_cast<int*>(scatter.cache.sums + GradientCache<T>::SLOTS + (PAIRS ? 0 : warps * 2 * N));
    scatter.cache.clear();
  }
  T intercept = 0, total = 0;
  // The whole block iterates together, the warps' shuffles then in convergent code (a
  // bound that depends on the warp's index makes the compiler guard every shuffle against
  // divergence: twice the instructions). The grid strides over the observations; skewed,
  // each block takes a contiguous range (sorted data: long runs of one row).
  const long long per_block = ((n + blockDim.x - 1) / blockDim.x + gridDim.x - 1) / gridDim.x * blockDim.x;
  const long long first = SKEWED ? blockIdx.x * per_block : blockIdx.x * (long long)blockDim.x;
  const long long end = SKEWED ? min(n, first + per_block) : n;
  const long long step = SKEWED ? blockDim.x : (long long)gridDim.x * blockDim.x;
  for (long long base = first; base < end; base += step) {
    const long long i = base + threadIdx.x;
    Observation<T, N, L1> obs;
    if (i < n) obs.read(theta, cov, y, w, n, i, o);
    const int pair = PAIRS && i < n ? load<L1>(pair_of + i) : -1;
    // Bucketed (PAIRS), a warp's lanes share one or two materials and read nearby placements'
    // rows: each lane reads its rows itself, from L1 (a broadcast a load for th_MP), and the
    // stages' shared memory is left to L1 (H200: real-like 0.57 ms a call against 0.81, sim
    // 2.82 against 3.42 in float64). At L2 only (l1 = ldcg) the loads took longer than the
    // stages (real-like float64: 0.95 against 0.85 ms with th_MP's alone read so).
    if (!OWN_ROWS) {
      __syncwarp();  // the previous observations' stages have been read
      gather_rows<T, N, L1>(theta + o.mp, obs.m, stage_a);
      gather_rows<T, N, L1>(theta + o.pm, obs.p, stage_b);
      __syncwarp();
    }
#pragma unroll
    for (int k = 0; k < N; ++k)
      obs.eta += OWN_ROWS ? (i < n ? load<L1>(obs.a + k) * load<L1>(obs.b + k) : T(0))
                          : stage_a[stage_slot<N>(lane, k)] * stage_b[stage_slot<N>(lane, k)];
    const T mu = obs.mu();
    const T res = obs.residual(mu);
    if (WANT_F) total += obs.loss(mu);
    intercept += res;
    if (!PAIRS) stage_a[stage_slot<N>(lane, N)] = stage_b[stage_slot<N>(lane, N)] = res;  // add_row_gradient's
    const int keys[5] = {obs.d, obs.f, obs.m, obs.r, obs.p};
    const int starts[5] = {o.d, o.f, o.m, o.r, o.p};
    unsigned peers[5];
#pragma unroll
    for (int c = 0; c < 5; ++c) {
      if (PAIRS && (c == 2 || c == 4)) continue;  // the material's and placement's: their pairs'
      T sum;
      peers[c] = __match_any_sync(FULL_MASK, keys[c]);
      if (warp_aggregate(peers[c], res, sum) && keys[c] >= 0) scatter.add(starts[c] + keys[c], sum);
    }
    if (PAIRS) {
      T sum;
      if (warp_aggregate(__match_any_sync(FULL_MASK, pair), res, sum) && pair >= 0) atomicAdd(pair_sums + pair, sum);
      continue;
    }
    if (SKEWED) {
      scatter.run_a.follow(grad, o.mp, obs.m);
      scatter.run_b.follow(grad, o.pm, obs.p);
    }
    __syncwarp();  // the residuals are in the stages
    add_row_gradient<T, N, SKEWED>(scatter, scatter.run_a, o.mp, peers[2], obs.m, stage_b);
    add_row_gradient<T, N, SKEWED>(scatter, scatter.run_b, o.pm, peers[4], obs.p, stage_a);
    if (SKEWED) __syncwarp();  // the runs' sums are written
  }
  if (SKEWED && !PAIRS) {
    scatter.run_a.flush(grad, o.mp);
    scatter.run_b.flush(grad, o.pm);
  }
  if (SKEWED) scatter.cache.flush(grad);
  intercept = block_sum(intercept);
  if (threadIdx.x == 0) atomicAdd(grad, intercept);
  if (WANT_F) {
    total = block_sum(total);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
  }
}

// The effects and rows of a factor class from the pairs' residual sums (after fused with
// PAIRS): for each key g of the class (a material, or a placement) `parts` warps share its pairs
// q, each summing S_q times the other class's row, and S_q for the key's own effect, over its
// share and adding them to the key's entries. Key g's pairs are order[ptr[g] .. ptr[g + 1])
// (order null: those indices themselves); other[j] the other class's key of pair order[j] (in
// the groups' order: read in sequence, where the sums are gathered); rows, other_rows and
// effects the offsets of the key's rows, of the other class's rows and of the key's effects.
// Several warps a key: sim's 5,000 keys of 3,700 pairs each, a warp each, made long chains of
// dependent loads and more warps than an H200 holds at once (a second wave of a few). A lane
// reads a row's N values one after another: through L1 whatever the observations' L1 policy
// (cached at L2 only, each value was a sector of its own: sim took 5.9 ms a call where L1 gave
// 3.6, H200). A block a key, its warps' sums added in shared memory, was slower on sim.
template <typename T, int N>
__device__ void pair_rows(const T* theta, const T* sums, const int* ptr, const int* key, int groups, int parts,
                          const int* order, const int* other, int rows, int other_rows, int effects, T* grad) {
  const int lane = threadIdx.x & 31;
  for (int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < groups * parts; w += (gridDim.x * blockDim.x) >> 5) {
    const int g = w / parts, first = ptr[g] + w % parts * 32, end = ptr[g + 1];
    if (first >= end) continue;  // warp-uniform: a key of fewer pairs than its warps' lanes
    T acc[N + 1] = {};
    for (int j = first + lane; j < end; j += 32 * parts) {
      const T s = sums[order ? order[j] : j];
      const T* row = theta + other_rows + (long long)other[j] * N;
#pragma unroll
      for (int k = 0; k < N; ++k) acc[k] += s * __ldg(row + k);
      acc[N] += s;
    }
    T mine = 0;  // lane k < N: row element k; lane N: the effect
#pragma unroll
    for (int k = 0; k <= N; ++k) {
      const T total = warp_sum(acc[k]);
      if (lane == k) mine = total;
    }
    if (lane <= N) atomicAdd(grad + (lane < N ? rows + (long long)key[g] * N + lane : effects + key[g]), mine);
  }
}

// ---------------------------------------------------------------------------
#define DATA_ARGS(T) \
  const T *theta, const int *cov, const signed char *y, const short *w, long long n, int od, int of, int om, int orr, \
      int op, int omp, int opm
#define OFFSETS Offsets{od, of, om, orr, op, omp, opm}

#define ADMODEL_KERNELS(T, PREC, N, CACHE, L1, PAIRS_CAP)                                                         \
  extern "C" __global__ void CAP(80) admodel_objective_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *partials) {       \
    objective<T, N, L1>(theta, cov, y, w, n, OFFSETS, partials);                                          \
  }                                                                                                       \
  extern "C" __global__ void CAP(80) admodel_grad_atomic_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad) {         \
    grad_atomic<T, N, L1>(theta, cov, y, w, n, OFFSETS, grad);                                            \
  }                                                                                                       \
  extern "C" __global__ void CAP(80) admodel_grad_block_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad) {          \
    grad_block<T, N, L1>(theta, cov, y, w, n, OFFSETS, grad);                                             \
  }                                                                                                       \
  extern "C" __global__ void CAP(64) admodel_grad_warp_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad) {           \
    fused<T, N, L1, false, false>(theta, cov, y, w, n, OFFSETS, grad, nullptr);                           \
  }                                                                                                       \
  extern "C" __global__ void CAP(64) admodel_fused_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad, T *partials) {  \
    fused<T, N, L1, true, false>(theta, cov, y, w, n, OFFSETS, grad, partials);                           \
  }                                                                                                       \
  extern "C" __global__ void CAP(64) admodel_grad_warp_skewed_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad) {    \
    fused<T, N, L1, false, true>(theta, cov, y, w, n, OFFSETS, grad, nullptr);                            \
  }                                                                                                       \
  extern "C" __global__ void CAP(64) admodel_fused_skewed_##PREC##_n##N##_##CACHE(DATA_ARGS(T), T *grad,          \
                                                                                   T *partials) {         \
    fused<T, N, L1, true, true>(theta, cov, y, w, n, OFFSETS, grad, partials);                            \
  }                                                                                                       \
  extern "C" __global__ void CAP(PAIRS_CAP) admodel_fused_pairs_##PREC##_n##N##_##CACHE(                  \
      DATA_ARGS(T), T *grad, T *partials, const int *pair_of, T *pair_sums) {                             \
    fused<T, N, L1, true, false, true>(theta, cov, y, w, n, OFFSETS, grad, partials, pair_of, pair_sums); \
  }                                                                                                       \
  extern "C" __global__ void CAP(PAIRS_CAP) admodel_fused_pairs_skewed_##PREC##_n##N##_##CACHE(           \
      DATA_ARGS(T), T *grad, T *partials, const int *pair_of, T *pair_sums) {                             \
    fused<T, N, L1, true, true, true>(theta, cov, y, w, n, OFFSETS, grad, partials, pair_of, pair_sums);  \
  }
#define PAIR_ROWS_KERNEL(T, PREC, N)                                                                      \
  extern "C" __global__ void admodel_pair_rows_##PREC##_n##N(const T *theta, const T *sums, const int *ptr, \
                                                             const int *key, int groups, int parts,         \
                                                             const int *order, const int *other, int rows,  \
                                                             int other_rows, int effects, T *grad) {        \
    pair_rows<T, N>(theta, sums, ptr, key, groups, parts, order, other, rows, other_rows, effects, grad);  \
  }

// fused_pairs' cap (PAIRS_CAP): through L1 in float32, 32 registers, no spills (H200, scale 1:
// real-like 0.40 ms a call against 0.46 at 64, sim the same); 64 elsewhere (float64: 32 slower).
ADMODEL_KERNELS(float, f32, 10, ldg, true, 32)
ADMODEL_KERNELS(float, f32, 10, ldcg, false, 64)
ADMODEL_KERNELS(double, f64, 10, ldg, true, 64)
ADMODEL_KERNELS(double, f64, 10, ldcg, false, 64)
PAIR_ROWS_KERNEL(float, f32, 10)
PAIR_ROWS_KERNEL(double, f64, 10)
