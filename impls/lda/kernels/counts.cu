// Topic counts of an LDA iteration, on the GPU (loaded by impls/lda/model_gpu.py).
// Both kernels only add: the caller zeroes their outputs first (a memset runs
// at copy bandwidth).  Indices are 64-bit: M*K and V*K can pass 2^31 at large K.

// a[i] += 1 for each lane of `active` (the warp's lanes with a token): lanes
// with the same i add together, one atomic for all of them.  Tokens of a warp
// share a document, and often a word (Zipf) and a topic, so at small K many hit
// one address; aggregating made topic_counts 1.2-2x faster on an H200.
__device__ void add_one(int* a, long long i, unsigned active)
{
    const unsigned peers = __match_any_sync(active, i);
    if ((threadIdx.x & 31) == __ffs(peers) - 1)  // the lowest lane of the group adds
        atomicAdd(&a[i], __popc(peers));
}

// One thread per token t (1-D blocks of whole warps): adds one to
// ndk[doc_of_token[t], z[t]] and nwk[words[t], z[t]] (row-major [M, K] and [V, K]).
// These atomics spread over M*K and V*K addresses, so their cost hardly depends
// on K; the per-topic totals, T atomics on only K addresses, would serialize at
// small K: column_sums makes them.
extern "C" __global__ void topic_counts(const long long* __restrict__ doc_of_token,
                                        const int* __restrict__ words,
                                        const int* __restrict__ z,
                                        long long T, int K, int* ndk, int* nwk)
{
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const unsigned active = __ballot_sync(0xffffffffu, t < T);
    if (t >= T)
        return;
    const long long k = z[t];
    add_one(ndk, doc_of_token[t] * K + k, active);
    add_one(nwk, words[t] * (long long)K + k, active);
}

// sums[k] += a[v, k] over the rows v of a row-major [rows, K] array: one thread
// per (slab of `slab` rows, column k), k fastest, so a warp reads neighbouring
// columns of a row (coalesced), and one atomic per thread: rows / slab on each
// address.  (CuPy's a.sum(axis=0) gives few threads to few columns: measured
// 0.4-0.9 ms for the [37286, K] nwk at K = 32-4096 on an H200.)
extern "C" __global__ void column_sums(const int* __restrict__ a, long long rows, int K, int slab, int* sums)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long v0 = i / K * slab;
    if (v0 >= rows)
        return;
    const long long k = i % K, v1 = min(v0 + slab, rows);
    int s = 0;
#pragma unroll 8
    for (long long v = v0; v < v1; ++v)
        s += a[v * K + k];
    atomicAdd(&sums[k], s);
}
