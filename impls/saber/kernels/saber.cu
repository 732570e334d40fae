// SaberLDA's per-word structures and E-step on the GPU, a warp per word or per token, doing
// the float32 operations of the CPU twin (impls/saber/structures.py, model.py, philox.py)
// in the same order, so that with the same counter-based uniforms they draw the same
// topics. Products and sums are written with __fmul_rn/__fadd_rn: the twin rounds each
// product before adding it, which a fused multiply-add would not.
//
//   saber_topic_histogram  n_k += a chunk's topics, a block's histogram in shared memory
//   saber_denominators  Eq. 2's denominators n_k + V beta, n_k zeroed for the next iteration
//   saber_preprocess_*  a warp per word: B^_v from B_v (which it zeroes) and the denominators,
//                       its chunked prefix sums and the word's total; _tree keeps the sums as
//                       the tree's L4 (padded to a multiple of W with the total), L3 every W-th
//                       and L2 every W-th of L3 (each padded likewise: level3_size)
//   saber_build_aliases a thread per word: Vose's alias table, built sequentially as the
//                       paper's G0 does and the twin does (its two stacks share one array)
//   saber_sample_*      the E-step of one chunk (Fig. 5, bugs fixed, its search ours): the sparse
//                       part over the non-zeros of A_d (the lanes' sums, then one lane's
//                       non-zeros), else the word's tree (G2-G4, _tree) or alias table (G0,
//                       G1, _alias); a warp per token in document order (G0), or
//                       (_by_word, G1 on) a block per segment of one word with B^_v in
//                       shared memory (_by_word_global: short segments, B^_v in global memory);
//                       given the denominators of B^, the tree stages' draw leaves each token's
//                       own topic out of A, B and n_k (collapsed Gibbs's conditional; the word
//                       segments' kernels _left_out); blocks of up to 512 threads, three an
//                       SM (_wide: up to 1024); _prefetch: each next token's row of A
//                       prefetched into L2 (where A outgrows it)
//   saber_own_positions  with the own topic left out, each token's own topic's non-zero in A_d,
//                       a thread per token, before the draws (where the rebuild did not
//                       write them: streaming, whose chunks keep no room for them)
//   saber_own_topic_draws  a probe for the tests: the own-topic correction and the tree's draw
//                       of given (word, u2, own topic), a warp each
//   saber_word_counts   B from the new topics, by integer atomics (G0; the word segments'
//                       kernels count them as they draw them)
//   saber_next_iteration  the end of an iteration on the device (a CUDA graph replays it)
//   saber_rank_count    SSC (G3 on): A of a chunk's documents, a warp per document ranking its
//                       topics in a bitmap in shared memory (and, given room, each token's own
//                       topic's non-zero in the new A for the next left-out draw)

#define FULL_MASK 0xffffffffu
#define W 32

// L3's nodes for L4's `padded` (structures.level3_size): a multiple of W, at most W^2.
__device__ __forceinline__ int level3_size(int padded) { return (padded / W + W - 1) / W * W; }

// ---------------------------------------------------------------------------
// Philox4x32-10 (Salmon et al., SC 2011) and the twin's map of a word to (0, 1].
__device__ __forceinline__ uint4 philox4x32(uint4 c, uint2 k) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k.x += 0x9E3779B9u;
      k.y += 0xBB67AE85u;
    }
    const unsigned hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }
  return c;
}

__device__ __forceinline__ float to_uniform(unsigned word) {
  return __fmul_rn(float((word >> 8) + 1u), 5.9604644775390625e-08f);  // 2^-24
}

// ---------------------------------------------------------------------------
// Warp primitives in the twin's order.

__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ int add(int a, int b) { return a + b; }  // counts: exact in any order

// The inclusive Hillis-Steele scan of one chunk of 32 (lane l adds lane l - o).
template <typename T>
__device__ __forceinline__ T warp_scan(T x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < W; offset <<= 1) {
    const T neighbour = __shfl_up_sync(FULL_MASK, x, offset);
    if (lane >= offset) x = add(x, neighbour);
  }
  return x;
}

// *address += the number of lanes holding this lane's key (whose address it is), where
// `valid`; a lane not valid holds a key that no valid lane holds. One integer atomic a
// distinct key, by its first lane.
__device__ __forceinline__ void add_lane_counts(int* address, int key, bool valid) {
  const unsigned same = __match_any_sync(FULL_MASK, key);
  if (valid && __ffs(same) - 1 == (threadIdx.x & 31)) atomicAdd(address, __popc(same));
}

// The first lane whose value is >= x, the last lane where none is.
__device__ __forceinline__ int warp_vote(float value, float x) {
  const unsigned ballot = __ballot_sync(FULL_MASK, value >= x);
  return ballot ? __ffs(ballot) - 1 : W - 1;
}

// ---------------------------------------------------------------------------
// A warp per word: B^_v from the counts B_v (Eq. 2 as the twin rounds it: (float(B_vk) +
// beta) / denominator_k), B_v zeroed for the next iteration's counts, and the chunked prefix
// sums of B^_v, padded to a multiple of W with the last prefix, which is the word's total.
// (Not lane 31's: padded with zeros, the scan groups the last chunk's sums differently and
// can end an ulp above it, where a draw of u = 1 would land past topic K - 1.) Tree: the
// prefix sums are L4, then L3 = every W-th of L4, L2 = every W-th of L3, padded with the total.
// l4: [V, padded], l3: [V, level3_size(padded)], l2: [V, W].
template <bool Tree>
__device__ void preprocess_word(int* b, const float* denominator, float beta, int vocabulary, int topics, int padded,
                                float* bhat, float* l4, float* l3, float* l2, float* totals) {
  const int lane = threadIdx.x & 31;
  const long long v = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  if (v >= vocabulary) return;  // whole warps leave together
  int* b_v = b + v * topics;
  float* bhat_v = bhat + v * topics;
  float* out4 = Tree ? l4 + v * padded : nullptr;
  float carry = 0.0f;
  // GROUP chunks' loads first, then their scans: the stores between one chunk's loads and the
  // next's kept one chunk's loads in flight (the compiler cannot tell the arrays apart), and
  // the kernel ran at a third of the DRAM bandwidth, waiting on its loads (kos, H200).
  constexpr int GROUP = 8;
  for (int group = 0; group < padded; group += GROUP * W) {
    int count[GROUP];
    float denominator_k[GROUP];
#pragma unroll
    for (int i = 0; i < GROUP; ++i) {
      const int k = group + i * W + lane;
      count[i] = k < topics ? b_v[k] : 0;
      denominator_k[i] = k < topics ? denominator[k] : 1.0f;
    }
#pragma unroll
    for (int i = 0; i < GROUP; ++i) {
      const int start = group + i * W, k = start + lane;
      if (start >= padded) break;  // the same for the whole warp
      float weight = 0.0f;
      if (k < topics) {
        weight = __fdiv_rn(__fadd_rn(__int2float_rn(count[i]), beta), denominator_k[i]);
        bhat_v[k] = weight;
        if (count[i]) b_v[k] = 0;  // sectors of zeros not written: B is sparse at large K
      }
      float prefix = __fadd_rn(warp_scan(weight), carry);
      carry = __shfl_sync(FULL_MASK, prefix, start + W < padded ? W - 1 : (topics - 1) & (W - 1));
      if (k >= topics) prefix = carry;
      if (Tree) out4[k] = prefix;
    }
  }
  if (Tree) {
    __syncwarp();  // out4 written before other lanes read it
    const int size3 = level3_size(padded);
    float* out3 = l3 + v * size3;
    for (int i = lane; i < size3; i += W) out3[i] = (i + 1) * W <= padded ? out4[(i + 1) * W - 1] : carry;
    __syncwarp();
    l2[v * W + lane] = (lane + 1) * W <= size3 ? out3[(lane + 1) * W - 1] : carry;
  }
  if (lane == 0) totals[v] = carry;
}

#define PREPROCESS_PARAMS \
  int *b, const float *denominator, float beta, int vocabulary, int topics, int padded, float *bhat
#define PREPROCESS_ARGS b, denominator, beta, vocabulary, topics, padded, bhat

extern "C" __global__ void saber_preprocess_tree(PREPROCESS_PARAMS, float* l4, float* l3, float* l2,
                                                 float* totals) {
  preprocess_word<true>(PREPROCESS_ARGS, l4, l3, l2, totals);
}

extern "C" __global__ void saber_preprocess_totals(PREPROCESS_PARAMS, float* totals) {
  preprocess_word<false>(PREPROCESS_ARGS, nullptr, nullptr, nullptr, totals);
}

// n_k += the chunk's tokens of topic k, for k in [first, first + topics) (exact in any order:
// integers), from its topics z, T ints, where B's column sums read V x K (4 GB an iteration at
// K = 10,000): a block's counts in shared memory (`topics` ints: a launch per range of K where
// a block cannot hold them all), then one 64-bit atomic a topic the block found.
// HISTOGRAM_ITEMS loads a thread in flight before their atomics (one at a time, their latency
// bound it). 100M tokens on an H200: 0.10-0.11 ms at K = 1000 to 32,768, whether the topics
// are spread or a document's few; the column sums took 0.12, 0.96 and 3.1 ms. Counting a
// warp's equal topics first (match-any, as the draw does for B's global atomics) took
// 0.5-0.9 ms.
#define HISTOGRAM_ITEMS 16
extern "C" __global__ void saber_topic_histogram(int tokens, const int* z, int first, int topics,
                                                 unsigned long long* totals) {
  extern __shared__ int histogram[];
  for (int k = threadIdx.x; k < topics; k += blockDim.x) histogram[k] = 0;
  __syncthreads();
  const long long step = (long long)gridDim.x * blockDim.x * HISTOGRAM_ITEMS;
  for (long long base = (long long)blockIdx.x * blockDim.x * HISTOGRAM_ITEMS; base < tokens; base += step) {
    unsigned k[HISTOGRAM_ITEMS];  // past the range (or the tokens): topics or more
#pragma unroll
    for (int i = 0; i < HISTOGRAM_ITEMS; ++i) {
      const long long p = base + i * blockDim.x + threadIdx.x;
      k[i] = p < tokens ? unsigned(z[p] - first) : unsigned(topics);
    }
#pragma unroll
    for (int i = 0; i < HISTOGRAM_ITEMS; ++i)
      if (k[i] < unsigned(topics)) atomicAdd(histogram + k[i], 1);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < topics; k += blockDim.x)
    if (histogram[k]) atomicAdd(totals + first + k, (unsigned long long)histogram[k]);
}

// Eq. 2's denominators as the twin rounds them, float32(n_k) + float32(V) * beta, and n_k
// zeroed: the next iteration's chunks add to it.
extern "C" __global__ void saber_denominators(unsigned long long* totals, int topics, float vocabulary_beta,
                                              float* denominator) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < topics; k += gridDim.x * blockDim.x) {
    denominator[k] = __fadd_rn(__ll2float_rn((long long)totals[k]), vocabulary_beta);
    totals[k] = 0;
  }
}

// A thread per word: column i keeps i with probability[i], else gives alias[i]. The small
// columns' stack grows from the start of the word's row of `stacks`, the large columns'
// from its end: together they never hold more than K columns.
extern "C" __global__ void saber_build_aliases(const float* bhat, const float* totals, int vocabulary, int topics,
                                               float* probability, int* alias, int* stacks) {
  const long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (v >= vocabulary) return;
  const float* weights = bhat + v * topics;
  float* p = probability + v * topics;
  int* a = alias + v * topics;
  int* stack = stacks + v * topics;
  const float scale = __fdiv_rn(float(topics), totals[v]);
  int small = 0, large = 0;  // stack[0, small) and stack[topics - large, topics), top at topics - large
  for (int i = 0; i < topics; ++i) {
    p[i] = __fmul_rn(weights[i], scale);
    a[i] = i;
    if (p[i] < 1.0f) stack[small++] = i;
    else stack[topics - 1 - large++] = i;
  }
  while (small && large) {
    const int s = stack[--small], l = stack[topics - large];
    a[s] = l;
    p[l] = __fsub_rn(__fadd_rn(p[l], p[s]), 1.0f);
    if (p[l] < 1.0f) {
      --large;
      stack[small++] = l;
    }
  }
  for (int i = 0; i < small; ++i) p[stack[i]] = 1.0f;  // rounding leaves columns a hair below 1
  for (int i = 0; i < large; ++i) p[stack[topics - 1 - i]] = 1.0f;
}

// ---------------------------------------------------------------------------
// The token's own topic as a draw leaves it out (model.own_topic_correction): its B^_v,own
// with the token taken out of B_v,own and n_own, (B^ den - 1) / (den - 1), and the word's
// mass with that in place of B^_v,own; `shrink` is what the own topic's interval in the
// tree loses. topic -1: ESCA's draw, the token counted, the mass the word's total. In a
// document's draw also the own topic's non-zero `index` in A_d (-1: none), its product with
// the token left out, (A_d,own - 1) B^'_v,own, and `delta`, that less its counted product.
// In the tree (Tree::place) where its draw searches, `at`, or -1 where it is the own topic.
struct Own {
  int topic;
  float bhat, mass, shrink;
  int index = -1;
  float left = 0.0f, delta = 0.0f, at = 0.0f;
};

__device__ __forceinline__ Own own_topic(const float* denominator, const int* z, int p, const float* bhat_v,
                                         float total) {
  if (!denominator) return Own{-1, 0.0f, total, 0.0f};
  const int k = z[p];
  const float den = denominator[k];
  const float bhat = __fdiv_rn(__fsub_rn(__fmul_rn(bhat_v[k], den), 1.0f), __fsub_rn(den, 1.0f));
  return Own{k, bhat, __fadd_rn(__fsub_rn(total, bhat_v[k]), bhat), __fsub_rn(bhat_v[k], bhat)};
}

// The word's structures, drawn at u2 (scaled by the word's mass).
struct Tree {
  const float *l4, *l3, *l2;
  int padded;
  __device__ int at(int v, float x) const {
    const int lane = threadIdx.x & 31, size3 = level3_size(padded);
    // x above the total by rounding: the last chunk
    const int off3 = min(warp_vote(l2[(long long)v * W + lane], x) * W, size3 - W);
    const int off4 = min((off3 + warp_vote(l3[(long long)v * size3 + off3 + lane], x)) * W, padded - W);
    return off4 + warp_vote(l4[(long long)v * padded + off4 + lane], x);
  }
  // With the own topic left out its interval [P(own - 1), P(own)) is `shrink` shorter: x =
  // u2 mass below it is drawn as is, inside it is the own topic (-1), past it is drawn as
  // x + shrink, no further than the word's total (rounding can carry it past, into the
  // padding, where no topic is). Placed with the token's other inputs, a lane a token: in the
  // draw, the interval's ends were two dependent loads a token.
  __device__ Own place(int v, float u2, Own own) const {
    if (own.topic < 0) return own;
    const float* l4_v = l4 + (long long)v * padded;
    const float x = __fmul_rn(u2, own.mass), below = own.topic > 0 ? l4_v[own.topic - 1] : 0.0f;
    const float above = __fsub_rn(l4_v[own.topic], own.shrink), past = fminf(__fadd_rn(x, own.shrink), l4_v[padded - 1]);
    own.at = x < below ? x : x < above ? -1.0f : past;
    return own;
  }
  __device__ int draw(int v, float u2, const Own& own) const {
    if (own.topic < 0) return at(v, __fmul_rn(u2, own.mass));
    return own.at < 0.0f ? own.topic : at(v, own.at);
  }
};

struct Alias {
  const float* probability;
  const int* alias;
  int topics;
  __device__ Own place(int, float, Own own) const { return own; }  // the own topic counted
  __device__ int draw(int v, float u2, const Own&) const {  // the own topic counted (the host refuses otherwise)
    const float x = __fmul_rn(u2, float(topics));
    const int column = min(int(x), topics - 1);
    const long long at = (long long)v * topics + column;
    return __fsub_rn(x, float(column)) < probability[at] ? column : alias[at];
  }
};

// The probe: for draw i, word v[i] at u2[i] with its own topic own[i] left out: the
// corrected B^, the mass and the topic the tree's draw gives, as the twin's
// own_topic_correction and tree_draw_without_own (z is own, read at position i).
extern "C" __global__ void saber_own_topic_draws(const float* bhat, int topics, const float* denominator,
                                                 const float* totals, const float* l4, const float* l3,
                                                 const float* l2, int padded, int draws, const int* v,
                                                 const float* u2, const int* own, float* own_bhat, float* mass,
                                                 int* topic) {
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (i >= draws) return;  // whole warps leave together
  const Tree tree{l4, l3, l2, padded};
  const Own o = tree.place(v[i], u2[i], own_topic(denominator, own, i, bhat + (long long)v[i] * topics, totals[v[i]]));
  const int k = tree.draw(v[i], u2[i], o);
  if ((threadIdx.x & 31) == 0) {
    own_bhat[i] = o.bhat;
    mass[i] = o.mass;
    topic[i] = k;
  }
}

// One chunk's tokens (positions local to it, int32) and the counts A of its documents:
// document d's non-zeros are a_idx/a_val[a_start[d], a_start[d] + a_count[d]); with the own
// topic left out, own_at[p] is token p's own topic's non-zero (saber_own_positions, or the
// rebuild's saber_rank_count).
struct Chunk {
  long long first_token;  // the corpus's id of position 0: the draws' counter
  const int *doc_of, *words, *a_start, *a_count, *a_idx, *a_val, *own_at;
};

// A_dk B^_vk of the non-zero j of A_d (the own topic counted).
__device__ __forceinline__ float counted(const Chunk& c, int j, const float* bhat_v) {
  return __fmul_rn(float(c.a_val[j]), bhat_v[c.a_idx[j]]);
}

// The same with the own topic's non-zero left out: (A_dk - 1) B^'_vk.
__device__ __forceinline__ float product(const Chunk& c, int j, const float* bhat_v, const Own& own) {
  return j == own.index ? own.left : counted(c, j, bhat_v);
}

// The own topic's non-zero in A_d, where A_d counts the token: its product with the token
// left out, and the change from the counted one.
__device__ __forceinline__ Own in_document(const Chunk& c, int p, const float* bhat_v, Own own) {
  if (own.topic < 0) return own;
  own.index = c.own_at[p];
  if (own.index < 0) return own;
  const int a = c.a_val[own.index];
  own.left = __fmul_rn(float(a - 1), own.bhat);
  own.delta = __fsub_rn(own.left, __fmul_rn(float(a), bhat_v[own.topic]));
  return own;
}

// Each token's own topic's non-zero in its document's A (a_idx increases within a document),
// -1 where A_d does not count the token, before the draws: a thread per token, a binary
// search of the document's keys. (Searched in the draw by the lane that read a token's
// inputs, it was a chain of dependent loads paid per token in a word's short batches: a
// quarter of the left-out kernel's instructions over ESCA's and its hottest stall, kos.)
extern "C" __global__ void saber_own_positions(int tokens, const int* doc_of, const int* a_start,
                                               const int* a_count, const int* a_idx, const int* z, int* own_at) {
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < tokens; p += gridDim.x * blockDim.x) {
    const int d = doc_of[p], k = z[p], start = a_start[d], stop = start + a_count[d];
    int lo = start, hi = stop;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (a_idx[mid] <= k) lo = mid;
      else hi = mid;
    }
    own_at[p] = stop > start && a_idx[lo] == k ? lo : -1;
  }
}

// A warp's lane scan of the products of the document whose non-zeros start at `start` (a
// document with tokens has a start of its own) and word v, the own topic counted. The next
// token of the document and word (a word's tokens of one document lie side by side in PDOW
// order) reuses it, bit for bit; a token whose own topic is left out moves the own topic's
// lane and those after it by its delta (model.sparse_draw), an add, not a scan of its own.
struct SparseSums {
  int start = -1, v = -1;
  float lanes = 0.0f;
};

// What a token's draw needs besides its word: its document's non-zeros of A, its uniforms
// (Philox of its corpus position) and its own topic (left out with `denominator`).
struct Token {
  int start, stop;
  float u1, u2;
  Own own;
};

template <typename Structure>
__device__ __forceinline__ Token token_at(const Chunk& c, int p, int v, const float* bhat_v, float total,
                                          const float* denominator, const Structure& structure, const int* z,
                                          unsigned seed, const unsigned* iteration) {
  const int d = c.doc_of[p], start = c.a_start[d];
  // The iteration from device memory, where a graph's replays advance it (read here: a register
  // held across the kernel would spill).
  const uint4 r = philox4x32(make_uint4(unsigned(c.first_token + p), __ldg(iteration), 0u, 0u),
                             make_uint2(seed, 0u));
  const int stop = start + c.a_count[d];
  const float u2 = to_uniform(r.y);
  return Token{start, stop, to_uniform(r.x), u2,
               structure.place(v, u2, in_document(c, p, bhat_v, own_topic(denominator, z, p, bhat_v, total)))};
}

// A warp's batch of 32 tokens' inputs in the block's shared memory: lane i stores token i's,
// then the whole warp loads each token's with broadcast loads of 16 bytes. (Shuffles of the
// ten registers a token holds took more instructions, and those registers, held across the
// batch, spilled: G4 ran 7-8% and delayed-gibbs up to 13% slower on kos and nips, H200.)
// ESCA's own topic is the word's (topic -1, its mass the word's total), kept out of it; the
// own topic's corrected B^ stays behind (the draw needs only left and delta, made from it).
template <bool LeftOut>
struct Batch {
  int4* inputs;  // start, stop, u1, u2
  float4* own;   // LeftOut: two a token, (topic, index, mass, at) and (left, delta)
  __device__ void put(int i, const Token& t) const {
    inputs[i] = make_int4(t.start, t.stop, __float_as_int(t.u1), __float_as_int(t.u2));
    if (LeftOut) {
      own[2 * i] = make_float4(__int_as_float(t.own.topic), __int_as_float(t.own.index), t.own.mass, t.own.at);
      own[2 * i + 1] = make_float4(t.own.left, t.own.delta, 0.0f, 0.0f);
    }
  }
  __device__ int2 span(int i) const { return reinterpret_cast<const int2*>(inputs)[2 * i]; }  // start, stop
  __device__ Token get(int i, float total) const {
    const int4 in = inputs[i];
    Own o{-1, 0.0f, total, 0.0f};
    if (LeftOut) {
      const float4 a = own[2 * i], b = own[2 * i + 1];
      o = Own{__float_as_int(a.x), 0.0f, a.z, 0.0f, __float_as_int(a.y), b.x, b.y, a.w};
    }
    return Token{in.x, in.y, __int_as_float(in.z), __int_as_float(in.w), o};
  }
};

// Token i's row of A (its document's non-zeros, a_idx and a_val) brought into L2 while the
// token before it is drawn (the _prefetch kernels: where A outgrows L2, gpu.prefetches): a
// word's tokens come from documents all over A, and each draw's first read of its document's
// row waited on DRAM. A lane a line of 32 values (rows of up to about 1000 non-zeros whole).
// A hint only: the draw reads the same values either way.
template <bool LeftOut>
__device__ __forceinline__ void prefetch_row(const Chunk& c, const Batch<LeftOut>& batch, int i) {
  const int2 span = batch.span(i);
  const int line = span.x / W + (threadIdx.x & 31);
  if (line * W < span.y) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(c.a_idx + line * W)));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(c.a_val + line * W)));
  }
}

// Dynamic shared memory of a word-segment block (gpu.by_word_shared): the batches' inputs (16
// bytes a thread, 48 with the own topic left out), then the staged B^_v.
template <bool LeftOut>
__device__ __forceinline__ int batch_bytes() { return LeftOut ? 48 : 16; }

// B^_v's `topics` floats copied to the block's shared memory, by asynchronous copies (sm_80 on)
// that hold no register and wait once: a load and its store at a time waited on DRAM K / 512
// times a segment (20 at K = 10,000).
__device__ __forceinline__ void stage_row(const float* row, int topics, float* staged) {
  for (int k = threadIdx.x; k < topics; k += blockDim.x) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(unsigned(__cvta_generic_to_shared(staged + k))),
                 "l"(__cvta_generic_to_global(row + k))
                 : "memory");
#else
    staged[k] = row[k];
#endif
  }
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// The warp's lane scan of the sparse part for a token of word v whose document's non-zeros of
// A are [start, stop): lane l adds the products l, l + 32, ... in order, then the lanes'
// inclusive scan; kept where `sums` holds it already. Called with the token's span alone,
// before its other inputs are read: a delayed-gibbs token holds ten of them, and held across
// this loop they made its loads wait (delayed-gibbs on nips about 1% faster, NOTES).
__device__ __forceinline__ void update_sums(const Chunk& c, int start, int stop, int v, const float* bhat_v,
                                            SparseSums& sums) {
  if (sums.start == start && sums.v == v) return;
  float partial = 0.0f;
  for (int j = start + (threadIdx.x & 31); j < stop; j += W) partial = __fadd_rn(partial, counted(c, j, bhat_v));
  sums = SparseSums{start, v, warp_scan(partial)};
}

// A token's topic (Fig. 5, bugs fixed, its search ours: model.sparse_draw), the whole warp
// together, with B^_v read from bhat_v (global memory or the block's copy): the sparse part
// over the non-zeros of A_d, else the word's tree (G2-G4) or alias table (G0, G1), the
// token's own topic left out where t.own names it. `sums`: the token's lane scan (update_sums).
template <bool LeftOut, typename Structure>
__device__ int draw(const Chunk& c, const Token& t, int v, const float* bhat_v, float alpha,
                    const Structure& structure, const SparseSums& sums) {
  const int lane = threadIdx.x & 31;
  // S: the lanes' scan, the own topic's delta added from its lane on; S its last.
  float lanes = sums.lanes;
  if (LeftOut && t.own.index >= 0 && lane >= ((t.own.index - t.start) & (W - 1)))
    lanes = __fadd_rn(lanes, t.own.delta);
  const float s = __shfl_sync(FULL_MASK, lanes, W - 1);
  if (!(__fmul_rn(t.u1, __fadd_rn(s, __fmul_rn(alpha, t.own.mass))) < s)) return structure.draw(v, t.u2, t.own);
  // x = u2 S: the first lane whose scan reaches x (the last with non-zeros where none does),
  // then its non-zeros' chunked prefix sum from the lanes before it, the first to reach x
  // (its last where none does): one chunk for up to 1024 non-zeros.
  const float x = __fmul_rn(t.u2, s);
  const int l = min(warp_vote(lanes, x), t.stop - t.start - 1), first = t.start + l,
            count = (t.stop - first + W - 1) / W;
  const float before = __shfl_sync(FULL_MASK, lanes, max(l - 1, 0));
  float carry = l ? before : 0.0f;
  for (int chunk = 0; chunk < count; chunk += W) {
    const int i = chunk + lane;
    const float prefix = __fadd_rn(warp_scan(i < count ? product(c, first + i * W, bhat_v, t.own) : 0.0f), carry);
    const unsigned ballot = __ballot_sync(FULL_MASK, i < count && prefix >= x);
    if (ballot) return c.a_idx[first + (chunk + __ffs(ballot) - 1) * W];
    carry = __shfl_sync(FULL_MASK, prefix, W - 1);
  }
  return c.a_idx[first + (count - 1) * W];
}

// G0: a warp per token in document order, B^_v read from global memory.
template <typename Structure>
__device__ void sample_by_token(const Chunk& c, int tokens, const float* bhat, int topics, float alpha,
                                const float* totals, const float* denominator, const Structure& structure,
                                unsigned seed, const unsigned* iteration, int* z) {
  const int warps = (gridDim.x * blockDim.x) >> 5;
  SparseSums sums;
  for (int p = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; p < tokens; p += warps) {
    const int v = c.words[p];
    const float* bhat_v = bhat + (long long)v * topics;
    const Token t = token_at(c, p, v, bhat_v, totals[v], denominator, structure, z, seed, iteration);
    update_sums(c, t.start, t.stop, v, bhat_v, sums);
    const int k = draw<true>(c, t, v, bhat_v, alpha, structure, sums);
    if ((threadIdx.x & 31) == 0) z[p] = k;
  }
}

// G1 on (PDOW, Sec. 3.4): a block per segment of one word, taken dynamically in `schedule`
// order from schedule[first_segment] to schedule[last - 1] (*next, zero at the launch, counts
// the segments taken), then each warp a contiguous share of the segment's tokens, drawn a token
// at a time (so that a document's tokens of the word share their lane scan) from inputs
// read 32 at a time (Batch, in shared memory). Staged: the block first copies B^_v to shared
// memory (after the batches: topics floats); otherwise (segments too short to pay for the
// copy) its warps read B^_v in global memory. b (not null): the new topics added to B there.
template <typename Structure, bool Staged, bool LeftOut, bool Prefetch>
__device__ void sample_by_word(const Chunk& c, const int* by_word, const int* segment_ptr, const int* schedule,
                               int first_segment, int last, int* next, const float* bhat, int topics, float alpha,
                               const float* totals, const float* denominator, const Structure& structure,
                               unsigned seed, const unsigned* iteration, int* z, int* b) {
  extern __shared__ float4 dynamic[];
  __shared__ int taken;
  if (!LeftOut) denominator = nullptr;  // ESCA's kernels hold no code (nor registers) for the own topic
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const Batch<LeftOut> batch{reinterpret_cast<int4*>(dynamic) + warp * W, dynamic + blockDim.x + 2 * warp * W};
  float* staged_bhat_v = reinterpret_cast<float*>(dynamic + blockDim.x * batch_bytes<LeftOut>() / 16);
  SparseSums sums;
  for (;;) {
    if (threadIdx.x == 0) taken = first_segment + atomicAdd(next, 1);
    __syncthreads();
    if (taken >= last) return;  // the same for the whole block
    const int segment = schedule[taken], first = segment_ptr[segment], stop = segment_ptr[segment + 1];
    const int v = c.words[by_word[first]];
    const float* bhat_v = bhat + (long long)v * topics;
    if (Staged) {
      stage_row(bhat_v, topics, staged_bhat_v);
      bhat_v = staged_bhat_v;
      __syncthreads();
    }
    const float total = totals[v];
    const int share = (stop - first + warps - 1) / warps, mine = first + warp * share, end = min(mine + share, stop);
    for (int base = mine; base < end; base += W) {
      // Lane j reads token base + j's inputs and keeps its topic: the loads and the Philox
      // rounds of 32 tokens at once, not one token's by every lane.
      const int n = min(W, end - base), p = by_word[base + min(lane, n - 1)];  // lanes past n: a copy
      batch.put(lane, token_at(c, p, v, bhat_v, total, denominator, structure, z, seed, iteration));
      __syncwarp();
      int topic = 0;
      if (Prefetch) prefetch_row(c, batch, 0);
      for (int j = 0; j < n; ++j) {
        if (Prefetch && j + 1 < n) prefetch_row(c, batch, j + 1);
        const int2 span = batch.span(j);
        update_sums(c, span.x, span.y, v, bhat_v, sums);
        const int k = draw<LeftOut>(c, batch.get(j, total), v, bhat_v, alpha, structure, sums);
        if (lane == j) topic = k;
      }
      if (lane < n) z[p] = topic;
      // The next B counted here (b, zeroed by the preprocessing), not by saber_word_counts'
      // pass over the chunk: the word's row is in L2 while its segment is drawn, where a pass
      // in token order adds to rows all over B.
      if (b) add_lane_counts(b + (long long)v * topics + topic, lane < n ? topic : -1, lane < n);
      __syncwarp();  // the batch is read before the next one overwrites it
    }
    __syncthreads();  // the staged B^_v and taken are read before the next segment overwrites them
  }
}

#define CHUNK_PARAMS                                                                                   \
  long long first_token, const int *doc_of, const int *words, const int *a_start, const int *a_count, \
      const int *a_idx, const int *a_val, const int *own_at, const float *bhat, int topics, float alpha, \
      const float *totals, const float *denominator
#define CHUNK Chunk{first_token, doc_of, words, a_start, a_count, a_idx, a_val, own_at}
#define TREE_PARAMS const float *l4, const float *l3, const float *l2, int padded
#define ALIAS_PARAMS const float *probability, const int *alias

// The iteration that keys a draw's uniforms is read from device memory, so that an iteration
// captured once as a CUDA graph draws anew at every replay (saber_next_iteration advances it).
extern "C" __global__ void saber_sample_tree(CHUNK_PARAMS, TREE_PARAMS, int tokens, unsigned seed,
                                             const unsigned* iteration, int* z) {
  sample_by_token(CHUNK, tokens, bhat, topics, alpha, totals, denominator, Tree{l4, l3, l2, padded}, seed,
                  iteration, z);
}

extern "C" __global__ void saber_sample_alias(CHUNK_PARAMS, ALIAS_PARAMS, int tokens, unsigned seed,
                                              const unsigned* iteration, int* z) {
  sample_by_token(CHUNK, tokens, bhat, topics, alpha, totals, denominator, Alias{probability, alias, topics}, seed,
                  iteration, z);
}

#define BY_WORD_PARAMS \
  const int *by_word, const int *segment_ptr, const int *schedule, int first_segment, int last, int *next, \
      unsigned seed, const unsigned *iteration, int *z, int *b
#define BY_WORD_ARGS by_word, segment_ptr, schedule, first_segment, last, next, bhat, topics, alpha, totals, denominator

// The word-segment kernels, for blocks of up to `threads`, at least `blocks` of them an SM:
// staged or global, for the tree the own topic counted (ESCA) or, _left_out, left out, and
// each with (_prefetch) and without the next token's row of A prefetched.
#define TREE_BY_WORD_KERNEL(name, staged, left_out, prefetch, threads, blocks)                               \
  extern "C" __global__ void __launch_bounds__(threads, blocks)                                              \
      name(CHUNK_PARAMS, TREE_PARAMS, BY_WORD_PARAMS) {                                                      \
    sample_by_word<Tree, staged, left_out, prefetch>(CHUNK, BY_WORD_ARGS, Tree{l4, l3, l2, padded}, seed,     \
                                                     iteration, z, b);                                       \
  }
#define ALIAS_BY_WORD_KERNEL(name, staged, prefetch, threads, blocks)                                        \
  extern "C" __global__ void __launch_bounds__(threads, blocks)                                              \
      name(CHUNK_PARAMS, ALIAS_PARAMS, BY_WORD_PARAMS) {                                                     \
    sample_by_word<Alias, staged, false, prefetch>(CHUNK, BY_WORD_ARGS, Alias{probability, alias, topics},    \
                                                   seed, iteration, z, b);                                   \
  }
#define BY_WORD_KERNELS_OF(suffix, prefetch, threads, blocks)                                                 \
  TREE_BY_WORD_KERNEL(saber_sample_tree_by_word##suffix, true, false, prefetch, threads, blocks)             \
  TREE_BY_WORD_KERNEL(saber_sample_tree_by_word_global##suffix, false, false, prefetch, threads, blocks)     \
  TREE_BY_WORD_KERNEL(saber_sample_tree_by_word_left_out##suffix, true, true, prefetch, threads, blocks)     \
  TREE_BY_WORD_KERNEL(saber_sample_tree_by_word_global_left_out##suffix, false, true, prefetch, threads,     \
                      blocks)                                                                                \
  ALIAS_BY_WORD_KERNEL(saber_sample_alias_by_word##suffix, true, prefetch, threads, blocks)                  \
  ALIAS_BY_WORD_KERNEL(saber_sample_alias_by_word_global##suffix, false, prefetch, threads, blocks)
#define BY_WORD_KERNELS(suffix, threads, blocks) \
  BY_WORD_KERNELS_OF(suffix, false, threads, blocks) BY_WORD_KERNELS_OF(_prefetch##suffix, true, threads, blocks)

// Blocks of up to 512 threads, three an SM: 40 registers (48 without the bound held two
// blocks, and nips ran 12-17% slower; a register cap without the block size spilled more and
// ran 5-10% slower, H200); _wide for larger blocks, up to 1024 (gpu._by_word_kernel picks
// by the kernel's own limit).
BY_WORD_KERNELS(, 512, 3)
BY_WORD_KERNELS(_wide, 1024, 1)

// B += the chunk's tokens, counted by (word, topic): integer atomics, so in any order.
extern "C" __global__ void saber_word_counts(int tokens, const int* words, const int* z, int topics, int* b) {
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < tokens; p += gridDim.x * blockDim.x)
    atomicAdd(b + (long long)words[p] * topics + z[p], 1);
}

// The end of an iteration, on the device, so that a captured iteration needs nothing from the
// host: its count of A's non-zeros appended to the run's series (and zeroed), the segments'
// schedule counters zeroed, and the iteration advanced. One block.
extern "C" __global__ void saber_next_iteration(unsigned* iteration, unsigned long long* non_zeros,
                                                unsigned long long* series, int* counters, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) counters[i] = 0;
  if (threadIdx.x == 0) {
    series[*iteration] = *non_zeros;
    *non_zeros = 0;
    ++*iteration;
  }
}

// ---------------------------------------------------------------------------
// SSC (Fig. 8, G3 on): A rebuilt by a segmented count per document, a warp per document of
// any length, for any K, with no sort: the topics present are marked in a bitmap of K bits in
// the warp's shared memory, and a scan of its words' popcounts gives each one its rank among
// them, so a token's topic has its non-zero at doc_ptr[d] + rank, in increasing topic order as
// the sort's: O(n / 32 + K / 1024) steps a document (a histogram of K ints took K / 32, a
// sort of the tokens n log^2 n). A document of at most `most` non-zeros is counted in the
// warp's shared memory (plain shared atomics, each rank's topic stored there by its tokens),
// then its keys and counts are written once, coalesced; a larger one by integer atomics in
// global memory (one a distinct topic of 32 tokens, after zeroing its counts), its keys by
// every token. (Global atomics and a key a token for every document held L2 at 79% of its
// peak: nytimes-synth, K = 1000, H200.) Counts are exact in any order. Given own_at (not
// null), each token's non-zero is written there: the next left-out draw's positions (where
// saber_own_positions searches A_d).
extern "C" __global__ void saber_rank_count(const int* doc_ptr, int documents, const int* z, int topics, int most,
                                            int* keys, int* counts, int* n_keys,
                                            unsigned long long* non_zeros, int* own_at) {
  extern __shared__ unsigned shared_words[];
  const int lane = threadIdx.x & 31, words = (topics + W - 1) / W;
  unsigned* present = shared_words + (threadIdx.x >> 5) * (2 * words + 2 * most);  // bit k: topic k is present
  unsigned* before = present + words;  // before[w]: the topics present in words 0 .. w - 1
  int* rank_counts = reinterpret_cast<int*>(before + words);  // a shared document's count of each rank
  int* rank_keys = rank_counts + most;  // ... and its topic
  for (int w = lane; w < words; w += W) present[w] = 0;
  for (int i = lane; i < most; i += W) rank_counts[i] = 0;
  __syncwarp();
  const int warps = (gridDim.x * blockDim.x) >> 5;
  unsigned long long found = 0;
  for (int d = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; d < documents; d += warps) {
    const int first = doc_ptr[d], n = int(doc_ptr[d + 1] - first);
    for (int i = lane; i < n; i += W) {
      const int k = z[first + i];
      atomicOr(&present[k / W], 1u << (k % W));
    }
    __syncwarp();
    int r = 0;  // distinct topics before this chunk of 32 words
    for (int base = 0; base < words; base += W) {
      const int w = base + lane, count = w < words ? __popc(present[w]) : 0, through = warp_scan(count);
      if (w < words) before[w] = r + through - count;
      r += __shfl_sync(FULL_MASK, through, W - 1);
    }
    const bool shared = r <= most;  // the same for the whole warp
    if (!shared)
      for (int i = lane; i < r; i += W) counts[first + i] = 0;
    __syncwarp();  // the ranks' offsets and the zeroed counts, before the tokens use them
    for (int base = 0; base < n; base += W) {
      const int i = base + lane;
      const bool token = i < n;
      const int k = token ? z[first + i] : -1;
      const int rank = token ? before[k / W] + __popc(present[k / W] & ((1u << (k % W)) - 1)) : 0;
      if (token && own_at) own_at[first + i] = first + rank;
      if (shared) {
        if (token) {
          rank_keys[rank] = k;  // by every token of the topic: the same value
          atomicAdd(rank_counts + rank, 1);
        }
      } else {
        if (token) keys[first + rank] = k;
        add_lane_counts(counts + first + rank, k, token);
      }
    }
    __syncwarp();  // every rank read and counted before the bitmap is cleared and the counts written
    if (shared)
      for (int i = lane; i < r; i += W) {
        keys[first + i] = rank_keys[i];
        counts[first + i] = rank_counts[i];
        rank_counts[i] = 0;
      }
    if (words <= n)  // the fewer stores: the bitmap's words, or a word a token
      for (int w = lane; w < words; w += W) present[w] = 0;
    else
      for (int i = lane; i < n; i += W) present[z[first + i] / W] = 0;
    if (lane == 0) n_keys[d] = r;
    found += r;
    __syncwarp();  // the bitmap and the counts are clear before the next document uses them
  }
  if (lane == 0 && found) atomicAdd(non_zeros, found);
}
