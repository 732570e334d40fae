// Draw z for every token of an LDA model: the butterfly paper's Algorithms 1-10
// (Steele and Tristan, PPoPP 2017) as CUDA kernels, W = 32.
//
// The specification is impls/lda/drawz_cpu.py: every kernel here performs the
// same arithmetic, in the same order and in the same type T, as the CPU
// variant of the same name, so with dyadic weights every kernel returns the
// identical z, and with any weights a kernel returns the z of its own CPU twin.
// Each token t of document m gets the smallest k with
// u[t] * sum < p[k] (p the prefix sums of theta[m, k] * phi[words[t], k]),
// or K-1 when there is none.
//
// Products use __fmul_rn/__dmul_rn: these are never contracted with the
// following addition into an FMA, so products and sums are rounded separately,
// as on the CPU.
//
// Per-lane arrays (theta_local and p, K values each) live in one of two stores:
//   LocalStore  - a fixed array of DRAWZ_KMAX_LOCAL values in local memory.
//                 Every index a warp uses at once here is the same in all
//                 lanes except in the searches, and local memory interleaves
//                 the lanes' words, so such an access is one coalesced
//                 transaction with no bank conflicts to design around.  Shared
//                 memory cannot hold theta_local at large K: 32 lanes x 1024 x
//                 8 bytes is 256 KB, more than an SM has.
//   GlobalStore - the same layout made explicit in a device scratch buffer
//                 (value k of thread i at scratch[k * threads + i]), for any K,
//                 in particular K > DRAWZ_KMAX_LOCAL.
// The register array a[32] of Algorithms 4 and 7 is only indexed with
// compile-time constants (every loop over it is unrolled), so it stays in
// registers: the stack frame of a LocalStore kernel is exactly its stores.
//
// Kernels (extern "C", loaded by impls/lda/drawz_gpu.py):
//   drawz_{alg1,alg1_linear,alg4,alg7}_{f32,f64}[_global]   a thread per document
//   drawz_{warpscan,pairscan}[_vector]_{f32,f64}              a warp per document
//   drawz_segscan_{1,2,4,8,16,32}[_full]_{f32,f64}            two warps per document
// all with the parameters
//   (doc_ptr int64[M+1], words int32[T], theta T[M,K], phi T[V,K], u T[T],
//    z int32[T] (output), M, K, scratch T* (GlobalStore only; else unused)),
// launched with M threads (a thread per document), 32 M (a warp per document) or 32 M
// DRAWZ_SEGSCAN_WARPS;
// alg4/alg7 need M to be a multiple of 32 and whole warps, so blockDim.x must be
// a multiple of 32.

#ifndef DRAWZ_SEGSCAN_WARPS
#define DRAWZ_SEGSCAN_WARPS 2
#endif
#ifndef DRAWZ_KMAX_LOCAL
#define DRAWZ_KMAX_LOCAL 1024
#endif

namespace drawz {

constexpr int W = 32;
constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// ---------------------------------------------------------------- stores

template <typename T>
struct LocalStore {
    T v[DRAWZ_KMAX_LOCAL];
    __device__ LocalStore(T*, int, int) {}
    __device__ __forceinline__ T& operator[](int k) { return v[k]; }
};

template <typename T>
struct GlobalStore {
    T* base;
    long long stride;
    // Array `which` (0 or 1) of this thread: consecutive threads hold
    // consecutive addresses, so a warp's same-index accesses coalesce.
    __device__ GlobalStore(T* scratch, int which, int K) {
        stride = (long long)gridDim.x * blockDim.x;
        base = scratch + (long long)which * K * stride + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    }
    __device__ __forceinline__ T& operator[](int k) { return base[k * stride]; }
};

// ---------------------------------------------------------------- shared pieces

// Algorithm 3 on p[lo..hi]: smallest index with target < p[index], or hi.
template <typename T, class Store>
__device__ int binary_search(Store& p, int lo, int hi, T target) {
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (target < p[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

// ---------------------------------------------------------------- Algorithm 1

// One document per thread: products and the full prefix sum into p, then the
// binary search of Algorithm 3 or, when LINEAR, the linear search of Algorithm 2.
template <typename T, class Store, bool LINEAR>
__device__ void alg1(const long long* doc_ptr, const int* words, const T* theta, const T* phi,
                     const T* u, int* z, int M, int K, T* scratch) {
    const long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;  // no shuffles here, so surplus threads may leave
    Store p(scratch, 0, K);
    const T* theta_m = theta + m * K;
    for (long long t = doc_ptr[m]; t < doc_ptr[m + 1]; ++t) {
        const T* phi_c = phi + (long long)words[t] * K;
        T total = 0;
        for (int k = 0; k < K; ++k) {
            total += mul_rn(theta_m[k], phi_c[k]);
            p[k] = total;
        }
        const T target = total * u[t];
        int j;
        if (LINEAR) {
            j = 0;
            while (j < K - 1 && target >= p[j]) ++j;
        } else {
            j = binary_search(p, 0, K - 1, target);
        }
        z[t] = j;
    }
}

// ---------------------------------------------------------------- Algorithms 4-10

// The state of one lane of a warp that owns documents 32q .. 32q+31.
struct Lane {
    int lane;          // r
    long long warp;    // q
    long long first;   // first token of this lane's document m = 32q + r
    int n;             // its length (0 for a padding document)
    int longest;       // the master index's bound: the warp's longest document
};

// Algorithm 5: the remnant as is, then W x W blocks by transposed access, so
// lane r holds theta[32q + k, j + r] at theta_local[j + k]: in each block the
// 32 lanes read 32 consecutive values of one theta row (coalesced).
template <typename T, class Store>
__device__ void cache_theta(const Lane& L, const T* theta, int K, int R, Store& theta_local) {
    const T* own = theta + (L.warp * W + L.lane) * K;
    for (int j = 0; j < R; ++j) theta_local[j] = own[j];
    const T* rows = theta + L.warp * W * K + L.lane;
    for (int j = R; j < K; j += W) {
#pragma unroll
        for (int k = 0; k < W; ++k) theta_local[j + k] = rows[(long long)k * K + j];
    }
}

// Master-index idiom (Algorithm 4 lines 10-12): on step imaster lane r works
// on token min(imaster, n-1) of its document, repeating its last token once
// the document is done (same word, same uniform: the same z is rewritten).  A
// padding document's lane joins every shuffle with word 0 and writes nothing
// (token -1).
__device__ __forceinline__ long long lane_token(const Lane& L, int imaster) {
    return L.n > 0 ? L.first + min(imaster, L.n - 1) : -1;
}

// Remnant topics 0..R-1 (Algorithm 6 lines 7-9): per lane, not transposed.
template <typename T, class Store>
__device__ T remnant_sums(Store& theta_local, const T* phi_c, int R, Store& p) {
    T s = 0;
    for (int j = 0; j < R; ++j) {
        s += mul_rn(theta_local[j], phi_c[j]);
        p[j] = s;
    }
    return s;
}

// Transposed read of one W x W block of phi: lane r reads phi[c_k, j + r] for
// k = 0..31 (each a coalesced row segment; 32 independent loads in flight)
// and holds in a[k] the product for document k of the warp and topic j + r.
template <typename T, class Store>
__device__ __forceinline__ void block_products(Store& theta_local, const T* phi, const int (&c_warp)[W],
                                               int K, int j, int lane, T (&a)[W]) {
#pragma unroll
    for (int k = 0; k < W; ++k)
        a[k] = mul_rn(theta_local[j + k], phi[(long long)c_warp[k] * K + j + lane]);
}

// Figure 2, round BIT of the register transpose: registers k and k^BIT are
// exchanged between lanes r and r^BIT wherever bit BIT of r and of k differ.
// W/2 shuffles; after the rounds for BIT = 1, 2, ..., 16, lane r holds in a[k]
// the product for its own document and topic j + k.
template <int BIT, typename T>
__device__ __forceinline__ void transpose_round(T (&a)[W], int lane) {
    const bool upper = lane & BIT;
#pragma unroll
    for (int k0 = 0; k0 < W; ++k0) {
        if (k0 & BIT) continue;  // pairs (k0, k0 | BIT) with the bit clear in k0
        const int k1 = k0 | BIT;
        const T recv = __shfl_xor_sync(FULL, upper ? a[k0] : a[k1], BIT);
        if (upper)
            a[k0] = recv;
        else
            a[k1] = recv;
    }
}

template <typename T>
__device__ __forceinline__ void register_transpose(T (&a)[W], int lane) {
    transpose_round<1>(a, lane);
    transpose_round<2>(a, lane);
    transpose_round<4>(a, lane);
    transpose_round<8>(a, lane);
    transpose_round<16>(a, lane);
}

// Algorithm 8 lines 13-23, step BIT: W / (2 BIT) butterflies, one shuffle each.
template <int BIT, typename T, class Store>
__device__ __forceinline__ void butterfly_step(T (&a)[W], int lane, int j, Store& p) {
    const bool upper = lane & BIT;
#pragma unroll
    for (int i = 0; i < W / (2 * BIT); ++i) {
        const int d = 2 * BIT * i + BIT - 1;
        const T v = __shfl_xor_sync(FULL, upper ? a[d] : a[d + BIT], BIT);
        if (upper) a[d] = a[d + BIT];
        a[d + BIT] = a[d] + v;
        p[j + d] = a[d];
    }
}

// The butterfly-patterned table of one block with W - 1 shuffles; a[W-1] ends
// as this lane's block total, which extends the running sum (line 24).
template <typename T, class Store>
__device__ __forceinline__ void butterfly_table(T (&a)[W], int lane, int j, Store& p, T& total) {
    butterfly_step<1>(a, lane, j, p);
    butterfly_step<2>(a, lane, j, p);
    butterfly_step<4>(a, lane, j, p);
    butterfly_step<8>(a, lane, j, p);
    butterfly_step<16>(a, lane, j, p);
    total += a[W - 1];
    p[j + W - 1] = total;
}

// Algorithm 10: search the block starting at block_base.  lowValue/highValue
// are true prefix sums bracketing the lane's range; each midpoint is built
// from a tree node that another lane's table holds, fetched by two shuffles
// (the lane mask of the second varies per lane: the source lane is computed
// per thread, as the paper's code needs).  Every lane of the warp takes part.
template <typename T, class Store>
__device__ int butterfly_search(Store& p, int lane, int block_base, T target) {
    T low = block_base > 0 ? p[block_base - 1] : T(0);
    T high = p[block_base + W - 1];
    int flip = 0;
#pragma unroll
    for (int bit = W / 2; bit >= 1; bit /= 2) {
        const int mask = ((W - 1) * (2 * bit)) & (W - 1);
        T y = 0;
#pragma unroll
        for (int d = bit - 1; d < W; d += 2 * bit) {
            const int him = (d & mask) + (lane & ~mask);
            const int his_base = __shfl_sync(FULL, block_base, him);
            const T fetched = __shfl_xor_sync(FULL, p[his_base + d], flip);
            if (((lane ^ d) & mask) == 0) y = fetched;
        }
        const T compare = (lane & bit) ? high - y : low + y;
        if (target < compare) {
            high = compare;
            flip ^= bit & lane;
        } else {
            low = compare;
            flip ^= bit & ~lane;
        }
    }
    return block_base + (flip ^ lane);
}

// Common set-up of a warp kernel.  Returns false for a warp past the last one
// (the whole warp leaves together, so no shuffle loses a lane).
__device__ __forceinline__ bool warp_setup(const long long* doc_ptr, int M, Lane& L) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    L.lane = threadIdx.x % W;
    L.warp = thread / W;
    if (L.warp >= M / W) return false;
    const long long m = L.warp * W + L.lane;
    L.first = doc_ptr[m];
    L.n = (int)(doc_ptr[m + 1] - L.first);
    L.longest = __reduce_max_sync(FULL, L.n);
    return true;
}

// Algorithm 4 with Algorithms 5 and 6: coalesced W x W block reads, the
// register transpose of Figure 2, a running sum per lane into p, binary search.
template <typename T, class Store>
__device__ void alg4(const long long* doc_ptr, const int* words, const T* theta, const T* phi,
                     const T* u, int* z, int M, int K, T* scratch) {
    Lane L;
    if (!warp_setup(doc_ptr, M, L)) return;
    const int R = K % W;
    Store theta_local(scratch, 0, K);
    Store p(scratch, 1, K);
    cache_theta(L, theta, K, R, theta_local);
    for (int imaster = 0; imaster < L.longest; ++imaster) {
        const long long t = lane_token(L, imaster);
        const int c = t >= 0 ? words[t] : 0;
        int c_warp[W];  // every lane's word (Algorithm 6 lines 2-4), in registers
#pragma unroll
        for (int k = 0; k < W; ++k) c_warp[k] = __shfl_sync(FULL, c, k);
        T total = remnant_sums(theta_local, phi + (long long)c * K, R, p);
        for (int j = R; j < K; j += W) {
            T a[W];
            block_products(theta_local, phi, c_warp, K, j, L.lane, a);
            register_transpose(a, L.lane);
            T s = total;
#pragma unroll
            for (int k = 0; k < W; ++k) {
                s += a[k];
                p[j + k] = s;
            }
            total = s;
        }
        if (t >= 0) z[t] = binary_search(p, 0, K - 1, total * u[t]);
    }
}

// Algorithm 7 with Algorithms 5, 8, 9 and 10: butterfly-patterned partial sums
// built in registers, searched with lowValue/highValue/flip; the remnant (at
// the front) searched linearly.
template <typename T, class Store>
__device__ void alg7(const long long* doc_ptr, const int* words, const T* theta, const T* phi,
                     const T* u, int* z, int M, int K, T* scratch) {
    Lane L;
    if (!warp_setup(doc_ptr, M, L)) return;
    const int R = K % W;
    const int blocks = K / W;
    Store theta_local(scratch, 0, K);
    Store p(scratch, 1, K);
    cache_theta(L, theta, K, R, theta_local);
    for (int imaster = 0; imaster < L.longest; ++imaster) {
        const long long t = lane_token(L, imaster);
        const int c = t >= 0 ? words[t] : 0;
        int c_warp[W];
#pragma unroll
        for (int k = 0; k < W; ++k) c_warp[k] = __shfl_sync(FULL, c, k);
        T total = remnant_sums(theta_local, phi + (long long)c * K, R, p);
        for (int j = R; j < K; j += W) {
            T a[W];
            block_products(theta_local, phi, c_warp, K, j, L.lane, a);
            butterfly_table(a, L.lane, j, p, total);
        }
        // Algorithm 9: binary search over the blocks' last entries (true
        // prefix sums), then the butterfly search inside the chosen block.
        const T target = total * (t >= 0 ? u[t] : T(0));
        int lo = 0, hi = blocks - 1;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (target < p[mid * W + R + W - 1])
                hi = mid;
            else
                lo = mid + 1;
        }
        const int block_base = R + lo * W;
        int result = K - 1;
        if (blocks > 0) result = butterfly_search(p, L.lane, block_base, target);
        if (block_base > 0 && target < p[block_base - 1]) {
            for (int i = 0; i < R; ++i) {  // not in a block after all: the remnant
                if (target < p[i]) {
                    result = i;
                    break;
                }
            }
        }
        if (t >= 0) z[t] = result;
    }
}


// ---------------------------------------------------------------- beyond the paper: warpscan

// Inclusive prefix sum over the 32 lanes (Hillis-Steele, 5 shuffles); the CPU
// twin adds in the same order.
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T x, int lane) {
#pragma unroll
    for (int d = 1; d < W; d <<= 1) {
        const T y = __shfl_up_sync(FULL, x, d);
        if (lane >= d) x += y;
    }
    return x;
}

// Where topic k of a warp's tile sits: one pad word per 32, so that lane l
// reading k = l*C + i (its chunk) and the warp writing k = j*32 + l both hit 32
// different banks when C = 32.
__device__ __forceinline__ int tile_index(int k) { return k + k / W; }

// A lane's 16-byte load: 4 floats or 2 doubles.
template <typename T> struct Vector16;
template <> struct Vector16<float> { using type = float4; };
template <> struct Vector16<double> { using type = double2; };
__device__ __forceinline__ void store_products(float* tile, int k, float4 a, float4 b) {
    tile[tile_index(k)] = mul_rn(a.x, b.x);
    tile[tile_index(k + 1)] = mul_rn(a.y, b.y);
    tile[tile_index(k + 2)] = mul_rn(a.z, b.z);
    tile[tile_index(k + 3)] = mul_rn(a.w, b.w);
}
__device__ __forceinline__ void store_products(double* tile, int k, double2 a, double2 b) {
    tile[tile_index(k)] = mul_rn(a.x, b.x);
    tile[tile_index(k + 1)] = mul_rn(a.y, b.y);
}

// tile[tile_index(k)] = theta_m[k] * phi_c[k] for every k < K, by the warp.
// LOADS = 0: one value a lane at a time, coalesced.  LOADS > 0: 16-byte loads,
// in batches of LOADS per lane and array issued before the first product, where
// the rows' length and bases are multiples of 16 bytes (else one at a time).
// The one-value loop keeps a few loads in flight and waits on memory:
// long-scoreboard stalls were 76% of warpscan f32's cycles per issued
// instruction at K = 1024 (lda-profile); batches of vectors cut the waits, at
// the price of registers, which cost occupancy where rows are short (LOADS_F32,
// LOADS_F64 and impls/lda/drawz_gpu.py's VECTOR_FROM_K: measured on an H200).
template <typename T, int LOADS>
__device__ __forceinline__ void tile_products(T* tile, const T* theta_m, const T* phi_c, int K, int lane) {
    using V = typename Vector16<T>::type;
    constexpr int N = sizeof(V) / sizeof(T);
    if (LOADS > 0 && K % N == 0 && reinterpret_cast<size_t>(theta_m) % sizeof(V) == 0 &&
        reinterpret_cast<size_t>(phi_c) % sizeof(V) == 0) {
        const V* theta_v = reinterpret_cast<const V*>(theta_m);
        const V* phi_v = reinterpret_cast<const V*>(phi_c);
        const int vectors = K / N;
        constexpr int BATCH = LOADS > 0 ? LOADS : 1;
        for (int base = lane; base < vectors; base += BATCH * W) {
            V a[BATCH], b[BATCH];
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                const int v = base + i * W;
                if (v < vectors) { a[i] = theta_v[v]; b[i] = phi_v[v]; }
            }
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                const int v = base + i * W;
                if (v < vectors) store_products(tile, v * N, a[i], b[i]);
            }
        }
    } else {
        for (int k = lane; k < K; k += W) tile[tile_index(k)] = mul_rn(theta_m[k], phi_c[k]);
    }
}

// Topics per lane's chunk (the CPU twin's warpscan_chunk): ceil(K/32), one more
// where that is a multiple of 31.  With the tile's pad word per 32, lanes C = 31
// topics apart read one bank: 31-way conflicts, and K = 961..992 ran 3x slower.
__device__ __forceinline__ int chunk_size(int K) {
    const int C = (K + W - 1) / W;
    return C % 31 == 0 ? C + 1 : C;
}

// One WARP per document, one token at a time.  The warp reads the token's phi
// row (and the document's theta row, from L1) whole and coalesced into a
// shared-memory tile of products (tile_products).  Lane l then sums its chunk of
// C = chunk_size(K) consecutive topics from the tile; a warp scan of the chunk
// sums gives every chunk's end as a true prefix sum, a ballot finds the chunk
// that holds the draw, and the 32 lanes take one topic each of that chunk: a
// second scan and ballot find the topic.  No per-lane arrays, no transpose in
// registers; and a warp per document gives 32x more warps than a thread per
// document.  Dynamic shared memory: (K + K/32 + 1) values per warp.
//
// PAIRS (pairscan): a token whose word is its predecessor's in the document has the same
// distribution, so the warp keeps the tile, the chunk sums and their scan, and only
// searches for the new uniform (the corpora list a document's tokens word by word).
template <typename T, int LOADS, bool PAIRS>
__device__ void warpscan(const long long* doc_ptr, const int* words, const T* theta, const T* phi,
                         const T* u, int* z, int M, int K, T* /* scratch: unused */) {
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    const long long m = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / W;
    const int lane = threadIdx.x % W;
    if (m >= M) return;  // whole warps leave together: blockDim.x is a multiple of 32
    T* tile = reinterpret_cast<T*>(shared_bytes) + (threadIdx.x / W) * (K + K / W + 1);
    const int C = chunk_size(K);
    const int begin = min(lane * C, K), end = min(begin + C, K);
    const T* theta_m = theta + m * K;
    T s = 0, chunk_end = 0;
    int previous = -1;  // the word whose distribution the tile holds (the same in every lane)
    for (long long t = doc_ptr[m]; t < doc_ptr[m + 1]; ++t) {
        const int c = words[t];
        if (!PAIRS || c != previous) {
            tile_products<T, LOADS>(tile, theta_m, phi + (long long)c * K, K, lane);
            __syncwarp();
            s = 0;
            for (int k = begin; k < end; ++k) s += tile[tile_index(k)];
            chunk_end = warp_inclusive_scan(s, lane);
            previous = c;
        }
        const T target = __shfl_sync(FULL, chunk_end, W - 1) * u[t];
        const unsigned above = __ballot_sync(FULL, target < chunk_end);
        int result = K - 1;
        if (above) {
            const int L = __ffs(above) - 1;
            const int L_begin = min(L * C, K), L_end = min(L_begin + C, K);
            T before = __shfl_sync(FULL, chunk_end - s, L);
            result = L_end - 1;  // if rounding hides the crossing, the chunk's last topic
            for (int base = L_begin; base < L_end; base += W) {
                const int k = base + lane;
                const T a = k < L_end ? tile[tile_index(k)] : T(0);
                const T prefix = before + warp_inclusive_scan(a, lane);
                const unsigned hit = __ballot_sync(FULL, k < L_end && target < prefix);
                if (hit) {
                    result = base + __ffs(hit) - 1;
                    break;
                }
                before = __shfl_sync(FULL, prefix, W - 1);
            }
        }
        if (lane == 0) z[t] = result;
        __syncwarp();  // the tile may be rewritten by the next token
    }
}


// ---------------------------------------------------------------- beyond the paper: segscan

// A lane's chunk: N consecutive values, N * sizeof(T) a multiple of 16 bytes
// (one or more 16-byte loads).
template <typename T, int N>
struct Chunk {
    T v[N];
};

__device__ __forceinline__ void unpack(float4 a, float* v) { v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; }
__device__ __forceinline__ void unpack(double2 a, double* v) { v[0] = a.x; v[1] = a.y; }

// The chunk of a row from topic k0 (at: the row + k0, so that the callers' segments
// load at immediate offsets from one address), zeros past K: read-only 16-byte loads where
// VEC (rows 16-byte aligned and K a multiple of N), else one value at a time.
// Predicated loads, no branches: the loads of a row's segments can all be in
// flight before the first product. WHOLE (with VEC): the chunk lies within K, so
// neither a predicate nor zeros (where every segment is whole: a tenth fewer
// instructions a draw at K = 1024, H200).
template <bool VEC, typename T, int N, bool WHOLE = false>
__device__ __forceinline__ Chunk<T, N> load_chunk(const T* at, int k0, int K) {
    using V = typename Vector16<T>::type;
    constexpr int PER_VECTOR = 16 / sizeof(T);
    Chunk<T, N> c;
    if (VEC) {  // K % N == 0: a chunk is whole or wholly past K
#pragma unroll
        for (int i = 0; i < N; i += PER_VECTOR) {
            V v{};
            if (WHOLE || k0 < K) v = __ldg(reinterpret_cast<const V*>(at + i));
            unpack(v, c.v + i);
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) c.v[i] = k0 + i < K ? __ldg(at + i) : T(0);
    }
    return c;
}

// The sum of a chunk's products, left to right.
template <typename T, int N>
__device__ __forceinline__ T chunk_sum(const Chunk<T, N>& a, const Chunk<T, N>& b) {
    T s = mul_rn(a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < N; ++i) s += mul_rn(a.v[i], b.v[i]);
    return s;
}

// c ? a : b on values in registers (selp).  Written as `c ? v[i] : v[j]`, NVVM
// selects an address instead, and the array goes to local memory.
__device__ __forceinline__ float select(bool c, float a, float b) {
    float r;
    asm("{ .reg .pred p; setp.ne.u32 p, %3, 0; selp.f32 %0, %1, %2, p; }" : "=f"(r) : "f"(a), "f"(b), "r"((unsigned)c));
    return r;
}
__device__ __forceinline__ double select(bool c, double a, double b) {
    double r;
    asm("{ .reg .pred p; setp.ne.u32 p, %3, 0; selp.f64 %0, %1, %2, p; }" : "=d"(r) : "d"(a), "d"(b), "r"((unsigned)c));
    return r;
}

__host__ __device__ constexpr int log2_of(int p) { return p <= 1 ? 0 : 1 + log2_of(p / 2); }

// One step of the transposed butterfly over lane bit BIT, with HALF values to
// give away; then the next, until one value is left.
template <int HALF, int BIT, typename T, int P>
__device__ __forceinline__ void fold(T (&v)[P], int lane) {
    const bool upper = lane & BIT;
#pragma unroll
    for (int i = 0; i < HALF; ++i) {
        const T give = select(upper, v[i], v[i + HALF]);
        const T keep = select(upper, v[i + HALF], v[i]);
        v[i] = keep + __shfl_xor_sync(FULL, give, BIT);
    }
    if constexpr (HALF > 1) fold<HALF / 2, BIT / 2>(v, lane);
}

// Every segment's total from the lanes' sums v[s] (s < P, a power of two <= 32):
// a transposed butterfly (fold).  In the step over lane bit b (16, 8, ...) the
// lane with b set keeps the upper half of its values and gives the lower half to
// its partner, which does the opposite, and each adds what it receives: P values
// fold in P - 1 shuffles, where P reductions would take 5 P; the bits left then
// reduce the one value left.  Lane l ends with the total of segment
// l >> (5 - log2 P), summed over the lanes in one tree for every segment (bit 4
// first, then 3, ..., 0; IEEE addition commutes, so both partners agree), which
// the CPU twin repeats.  v is overwritten.
template <typename T, int P>
__device__ __forceinline__ T segment_total(T (&v)[P], int lane) {
    if constexpr (P > 1) fold<P / 2, W / 2>(v, lane);
    T x = v[0];
#pragma unroll
    for (int bit = W / 2 / P; bit >= 1; bit /= 2)  // the lane bits the fold left
        x += __shfl_xor_sync(FULL, x, bit);
    return x;
}

// warp_inclusive_scan's prefix sums of lanes 0 .. P-1 (its later steps add
// nothing there): log2 P steps; the other lanes' values are not prefix sums.
template <int P, typename T>
__device__ __forceinline__ T first_lanes_scan(T x, int lane) {
#pragma unroll
    for (int d = 1; d < P; d <<= 1) {
        const T y = __shfl_up_sync(FULL, x, d);
        if (lane >= d) x += y;
    }
    return x;
}

// w[s] for a run-time s < P, by a tree of P - 1 selects on the bits of s (a
// loop of `if (i == s)` becomes an indexed array in local memory); w is overwritten.
template <int HALF, typename T, int P>
__device__ __forceinline__ T pick(T (&w)[P], int s) {
    if constexpr (HALF == 0) {
        return w[0];
    } else {
#pragma unroll
        for (int i = 0; i < HALF; ++i) w[i] = select(s & HALF, w[i + HALF], w[i]);
        return pick<HALF / 2>(w, s);
    }
}

// A WARP per share of a document's tokens (segscan: DRAWZ_SEGSCAN_WARPS shares), with no
// shared memory: a row is read in segments of G = 32 N topics, lane l holding topics
// l N .. l N + N - 1 of each (N values of 16 bytes: one coalesced load a lane), so
//   - a token's phi row and the document's theta row (from L1) are read once,
//     as 16-byte loads, and the next word's row is loaded while this token is
//     searched; no shared-memory tile, which leaves all of L1 to hot rows;
//   - a token whose word is its predecessor's (the corpora list a document's
//     tokens word by word) keeps the sums, as pairscan does.
// The search: segment totals (segment_total), a scan of them over the first P
// lanes and a ballot find the segment; a scan of that segment's lane sums and a ballot find the
// lane; the lane adds its N products one by one.  Where rounding hides a
// crossing (the three levels sum in different orders), the segment's or lane's
// last topic.  S = ceil(K / G) <= P segments; FULL (with VEC): K = P G, every segment whole.
template <bool VEC, bool FULL, bool CAPPED, typename T, int N, int P>
__device__ void segscan_document(long long begin, long long end, const int* words, const T* theta_m,
                                 const T* phi, const T* u, int* z, int K, int lane) {
    constexpr int G = W * N, SHIFT = 5 - log2_of(P);
    const int S = (K + G - 1) / G;
    T sums[P];  // this lane's sum of each segment (zero past K)
    T segment_end = 0, total = 0;  // lane s < S: the prefix sum to segment s's end
    // Software pipelining: the row of the next token's word is loaded while this
    // token is searched, and the word after it while that row loads (up to 16
    // segments: 32 segments' rows in flight would take 128 registers more and spill).
    constexpr bool PREFETCH = P <= 16;
    int c = begin < end ? words[begin] : 0, next = begin + 1 < end ? words[begin + 1] : 0, previous = -1;
    Chunk<T, N> row[PREFETCH ? P : 1];
    if (PREFETCH && begin < end) {
#pragma unroll
        for (int s = 0; s < P; ++s)
            row[s] = load_chunk<VEC, T, N, FULL>(phi + (long long)c * K + lane * N + s * G,
                                                 s * G + lane * N, K);
    }
    for (long long t = begin; t < end; ++t, c = next, next = t + 1 < end ? words[t + 1] : 0) {
        const T* phi_c = phi + (long long)c * K;
        // Under a register cap, theta's segment addresses are not kept across tokens (16-32
        // registers): the compiler sees a new row each token and loads at immediate offsets.
        if constexpr (CAPPED) asm volatile("" : "+l"(theta_m));
        const T u_t = u[t];
        if (c != previous) {
#pragma unroll
            for (int s = 0; s < P; ++s)
                sums[s] = chunk_sum(
                    load_chunk<VEC, T, N, FULL>(theta_m + lane * N + s * G, s * G + lane * N, K),
                    PREFETCH ? row[s] : load_chunk<VEC, T, N, FULL>(phi_c + lane * N + s * G, s * G + lane * N, K));
            T folded[P];
#pragma unroll
            for (int s = 0; s < P; ++s) folded[s] = sums[s];
            const T mine = segment_total<T, P>(folded, lane);
            const T seg = __shfl_sync(FULL, mine, (lane << SHIFT) & (W - 1));
            segment_end = first_lanes_scan<P>(lane < S ? seg : T(0), lane);
            total = __shfl_sync(FULL, segment_end, S - 1);
            previous = c;
        }
        if (PREFETCH && t + 1 < end && next != c) {
#pragma unroll
            for (int s = 0; s < P; ++s)
                row[s] = load_chunk<VEC, T, N, FULL>(phi + (long long)next * K + lane * N + s * G,
                                                     s * G + lane * N, K);
        }
        const T target = total * u_t;
        const unsigned above = __ballot_sync(FULL, lane < S && target < segment_end);
        int result = K - 1;
        if (above) {
            const int s = __ffs(above) - 1;
            const T end_before = __shfl_sync(FULL, segment_end, max(s - 1, 0));
            const T before = s > 0 ? end_before : T(0);
            T copy[P];
#pragma unroll
            for (int i = 0; i < P; ++i) copy[i] = sums[i];
            const T lane_end = before + warp_inclusive_scan(pick<P / 2>(copy, s), lane);
            const unsigned hit = __ballot_sync(FULL, s * G + lane * N < K && target < lane_end);
            result = min((s + 1) * G, K) - 1;  // if rounding hides the crossing, the segment's last topic
            if (hit) {
                const int L = __ffs(hit) - 1;
                const T lane_end_before = __shfl_sync(FULL, lane_end, max(L - 1, 0));
                const int k0 = s * G + L * N;
                result = min(k0 + N, K) - 1;  // likewise, the lane's last topic
                if (lane == L) {
                    const Chunk<T, N> th = load_chunk<VEC, T, N, FULL>(theta_m + k0, k0, K);
                    const Chunk<T, N> ph = load_chunk<VEC, T, N, FULL>(phi_c + k0, k0, K);
                    T x = L > 0 ? lane_end_before : before;
#pragma unroll
                    for (int i = 0; i < N; ++i) {
                        if (FULL || k0 + i < K) {
                            x += mul_rn(th.v[i], ph.v[i]);
                            if (target < x) {
                                result = k0 + i;
                                break;
                            }
                        }
                    }
                    z[t] = result;
                }
                continue;
            }
        }
        if (lane == 0) z[t] = result;
    }
}

// DRAWZ_SEGSCAN_WARPS warps a document, each drawing an equal share of its tokens (on an
// H200, wiki-synth, K = 1024: two warps 4-5% faster than one, four slower than two).
template <typename T, int N, int P, bool FULL, bool CAPPED>
__device__ void segscan(const long long* doc_ptr, const int* words, const T* theta, const T* phi,
                        const T* u, int* z, int M, int K, T* /* scratch: unused */) {
    constexpr int WARPS = DRAWZ_SEGSCAN_WARPS;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / W;
    const long long m = warp / WARPS;
    const int share = warp % WARPS, lane = threadIdx.x % W;
    if (m >= M) return;  // whole warps leave together: blockDim.x is a multiple of 32
    const long long first = doc_ptr[m], n = doc_ptr[m + 1] - first;
    const long long begin = first + n * share / WARPS, end = first + n * (share + 1) / WARPS;
    const bool vec = K % N == 0 && reinterpret_cast<size_t>(theta) % 16 == 0 &&
                     reinterpret_cast<size_t>(phi) % 16 == 0;
    if (vec)
        segscan_document<true, FULL, CAPPED, T, N, P>(begin, end, words, theta + m * K, phi, u, z, K, lane);
    else
        segscan_document<false, false, CAPPED, T, N, P>(begin, end, words, theta + m * K, phi, u, z, K, lane);
}

}  // namespace drawz

// ---------------------------------------------------------------- entry points

#define DRAWZ_KERNEL_WITH(ATTRIBUTES, NAME, T, BODY)                                                  \
    extern "C" __global__ void ATTRIBUTES NAME(const long long* doc_ptr, const int* words, const T* theta, \
                                               const T* phi, const T* u, int* z, int M, int K, T* scratch) { \
        BODY(doc_ptr, words, theta, phi, u, z, M, K, scratch);                                         \
    }
#define DRAWZ_KERNEL(NAME, T, BODY) DRAWZ_KERNEL_WITH(, NAME, T, BODY)

#define DRAWZ_KERNELS(SUFFIX, STORE, T)                                                               \
    DRAWZ_KERNEL(drawz_alg1_##SUFFIX, T, (drawz::alg1<T, drawz::STORE<T>, false>))                  \
    DRAWZ_KERNEL(drawz_alg1_linear_##SUFFIX, T, (drawz::alg1<T, drawz::STORE<T>, true>))            \
    DRAWZ_KERNEL(drawz_alg4_##SUFFIX, T, (drawz::alg4<T, drawz::STORE<T>>))                         \
    DRAWZ_KERNEL(drawz_alg7_##SUFFIX, T, (drawz::alg7<T, drawz::STORE<T>>))

// warpscan and pairscan keep nothing per lane, so they have no store variants (scratch unused);
// it loads rows one value at a time or in batches of vectors (tile_products).
constexpr int LOADS_F32 = 2, LOADS_F64 = 8;  // the fastest batches at K = 1024 on an H200
DRAWZ_KERNEL(drawz_warpscan_f32, float, (drawz::warpscan<float, 0, false>))
DRAWZ_KERNEL(drawz_warpscan_f64, double, (drawz::warpscan<double, 0, false>))
DRAWZ_KERNEL(drawz_warpscan_vector_f32, float, (drawz::warpscan<float, LOADS_F32, false>))
DRAWZ_KERNEL(drawz_warpscan_vector_f64, double, (drawz::warpscan<double, LOADS_F64, false>))
DRAWZ_KERNEL(drawz_pairscan_f32, float, (drawz::warpscan<float, 0, true>))
DRAWZ_KERNEL(drawz_pairscan_f64, double, (drawz::warpscan<double, 0, true>))
DRAWZ_KERNEL(drawz_pairscan_vector_f32, float, (drawz::warpscan<float, LOADS_F32, true>))
DRAWZ_KERNEL(drawz_pairscan_vector_f64, double, (drawz::warpscan<double, LOADS_F64, true>))
// segscan: one kernel per power of two P >= the segments ceil(K / (32 N)), a lane's chunk
// N = 16 bytes of values, and _full where K = 32 N P (every segment whole: loads without a
// predicate, as CUB's full tiles).  theta is read from L1, not kept in registers: on an H200
// at K = 1024, theta in registers took 7% (f32) and 6% (f64) longer, its registers costing
// more warps than its loads cost.  CAP: registers a thread (0: the compiler's choice), where
// a cap measured faster (H200, wiki-synth, K = 1024: 1.7 -> 1.3 ms in f32 at 96, from 167
// registers; 3.6 -> 2.9 ms in f64 at 160, from 180); other caps spilled or gained nothing.
#define SEGSCAN_CAP_0
#define SEGSCAN_CAP_96 __maxnreg__(96)
#define SEGSCAN_CAP_160 __maxnreg__(160)
#define SEGSCAN_KERNEL(P, SUFFIX, T, CAP)                                                                \
    DRAWZ_KERNEL_WITH(SEGSCAN_CAP_##CAP, drawz_segscan_##P##_##SUFFIX, T,                                \
                      (drawz::segscan<T, 16 / sizeof(T), P, false, (CAP > 0)>))                          \
    DRAWZ_KERNEL_WITH(SEGSCAN_CAP_##CAP, drawz_segscan_##P##_full_##SUFFIX, T,                           \
                      (drawz::segscan<T, 16 / sizeof(T), P, true, (CAP > 0)>))
SEGSCAN_KERNEL(1, f32, float, 0) SEGSCAN_KERNEL(2, f32, float, 0) SEGSCAN_KERNEL(4, f32, float, 0)
SEGSCAN_KERNEL(8, f32, float, 96) SEGSCAN_KERNEL(16, f32, float, 0) SEGSCAN_KERNEL(32, f32, float, 0)
SEGSCAN_KERNEL(1, f64, double, 0) SEGSCAN_KERNEL(2, f64, double, 0) SEGSCAN_KERNEL(4, f64, double, 0)
SEGSCAN_KERNEL(8, f64, double, 0) SEGSCAN_KERNEL(16, f64, double, 160) SEGSCAN_KERNEL(32, f64, double, 0)
DRAWZ_KERNELS(f32, LocalStore, float)
DRAWZ_KERNELS(f64, LocalStore, double)
DRAWZ_KERNELS(f32_global, GlobalStore, float)
DRAWZ_KERNELS(f64_global, GlobalStore, double)
