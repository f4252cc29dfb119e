// The forward pass's GPU kernels, each in the operation order of the CPU code it stands for
// (crates/embedding/src/bert/{gemm,ops,mod}.rs, identity.rs's normalize), so that every value is the CPU's bits.
//
// Every rounding is an explicit intrinsic (__fmaf_rn, __fadd_rn, __fmul_rn, __fdiv_rn, __fsqrt_rn); the source is
// compiled with contraction and fast math off (NVRTC: --fmad=false --prec-div=true --prec-sqrt=true --ftz=false;
// host C++: -ffp-contract=off). This file is compiled twice: by NVRTC for the GPU, and as host C++ under a launch
// emulator (emulator/prelude.h), where CI runs it without a GPU and holds it to the CPU path bit for bit.
//
// It includes nothing: the prelude before it defines u32, i64, the kernel markers and the intrinsics. Barriers
// (__syncthreads) are reached by every thread of a block, and no warp intrinsics are used: the emulator runs a
// block's threads as fibers that switch at barriers.

// ---------------------------------------------------------------------------------------------------------------
// Arithmetic, one rounding each.

SCIFACT_DEVICE float add(float a, float b) { return __fadd_rn(a, b); }
SCIFACT_DEVICE float sub(float a, float b) { return __fsub_rn(a, b); }
SCIFACT_DEVICE float mul(float a, float b) { return __fmul_rn(a, b); }
SCIFACT_DEVICE float divide(float a, float b) { return __fdiv_rn(a, b); }
SCIFACT_DEVICE float fused(float a, float b, float c) { return __fmaf_rn(a, b, c); }

// `larger(p, s)` of ops.rs: s when s > p, else p.
SCIFACT_DEVICE float larger(float p, float s) { return s > p ? s : p; }

// The sum of 16 partial sums in ops.rs's fixed tree: lane l plus lane l + 8, then + 4, + 2, + 1.
SCIFACT_DEVICE float tree16(const float* p) {
    float eight[8];
    for (int l = 0; l < 8; ++l) eight[l] = add(p[l], p[l + 8]);
    float four[4];
    for (int l = 0; l < 4; ++l) four[l] = add(eight[l], eight[l + 4]);
    return add(add(four[0], four[2]), add(four[1], four[3]));
}

// The largest of 16 partial maxima, in the same tree as tree16 (ops.rs's fold_halves with larger).
SCIFACT_DEVICE float tree16_max(const float* p) {
    float eight[8];
    for (int l = 0; l < 8; ++l) eight[l] = larger(p[l], p[l + 8]);
    float four[4];
    for (int l = 0; l < 4; ++l) four[l] = larger(eight[l], eight[l + 4]);
    return larger(larger(four[0], four[2]), larger(four[1], four[3]));
}

// ops.rs's exp: Cephes' reduction and degree-6 polynomial, every step explicit.
SCIFACT_DEVICE float exp_cpu(float x) {
    if (x < -87.0f) x = -87.0f;
    if (x > 88.0f) x = 88.0f;
    const float log2e = 1.44269504088896340735992468100189214f;
    const float ln2_hi = 0.6933594f;
    const float ln2_lo = -2.1219444e-4f;
    float n = floorf(add(mul(x, log2e), 0.5f));
    float r = fused(n, -ln2_hi, x);
    r = fused(n, -ln2_lo, r);
    float p = 1.9875691e-4f;
    p = fused(p, r, 1.3981999e-3f);
    p = fused(p, r, 8.333452e-3f);
    p = fused(p, r, 4.1665796e-2f);
    p = fused(p, r, 1.6666665e-1f);
    p = fused(p, r, 0.5f);
    float e = add(fused(mul(p, r), r, r), 1.0f);
    // 2^n from n's bits: adding 1.5 * 2^23 puts the integer n in the low mantissa bits, exactly.
    u32 shifted = __float_as_uint(add(n, 12582912.0f)) - 0x4B400000u;
    float scale = __uint_as_float((shifted + 127u) << 23);
    return mul(e, scale);
}

// ops.rs's erf: Eigen's rational approximation on [-4, 4].
SCIFACT_DEVICE float erf_cpu(float x) {
    if (x < -4.0f) x = -4.0f;
    if (x > 4.0f) x = 4.0f;
    float x2 = mul(x, x);
    float p = -2.7261423e-10f;
    p = fused(p, x2, 2.7706814e-8f);
    p = fused(p, x2, -2.101024e-6f);
    p = fused(p, x2, -5.6925064e-5f);
    p = fused(p, x2, -7.3499063e-4f);
    p = fused(p, x2, -2.9546001e-3f);
    p = fused(p, x2, -1.6096033e-2f);
    float q = -1.4566072e-5f;
    q = fused(q, x2, -2.1337406e-4f);
    q = fused(q, x2, -1.682827e-3f);
    q = fused(q, x2, -7.373329e-3f);
    q = fused(q, x2, -1.426474e-2f);
    return divide(mul(x, p), q);
}

// ops.rs's GELU: x * 0.5 * (1 + erf(x / sqrt 2)), left to right.
SCIFACT_DEVICE float gelu_cpu(float x) {
    const float frac_1_sqrt_2 = 0.707106781186547524400844362104849039f;
    return mul(mul(x, 0.5f), add(1.0f, erf_cpu(mul(x, frac_1_sqrt_2))));
}

// bert/mod.rs's relative_bucket: MPNet's bucket of the relative position key - query (32 buckets, to 128).
SCIFACT_DEVICE int relative_bucket(i64 relative) {
    i64 n = -relative;
    int side = n < 0 ? 16 : 0;
    if (n < 0) n = -n;
    if (n < 8) return side + (int)n;
    int k = 0;
    while (k < 7 && n * n >= ((i64)64 << (k + 1))) ++k;
    return side + 8 + k;
}

// ---------------------------------------------------------------------------------------------------------------
// Embeddings: (word + position) + token type, per element (bert/mod.rs's Bert::pooled).

struct EmbedArgs {
    const u32* ids;
    const u32* positions;
    const float* words;
    const float* position_table;
    const float* token_type;
    float* x;
    i64 elements;
    int hidden;
    int unused;
};

SCIFACT_KERNEL void embed_tokens(EmbedArgs a) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.elements) return;
    i64 token = i / a.hidden;
    int d = (int)(i % a.hidden);
    float word = a.words[(i64)a.ids[token] * a.hidden + d];
    float place = a.position_table[(i64)a.positions[token] * a.hidden + d];
    a.x[i] = add(add(word, place), a.token_type[d]);
}

// ---------------------------------------------------------------------------------------------------------------
// Layer norm of rows, after adding a residual when one is given (ops.rs's layer_norm; mod.rs's
// residual_then_norm). A block is 16 lanes by 8 rows: lane l holds the CPU's partial l (elements l, l + 16, ...
// in increasing order), and the partials meet in shared memory for the tree.

struct NormArgs {
    float* x;
    const float* residual;
    const float* gamma;
    const float* beta;
    i64 rows;
    int width;
    float eps;
};

SCIFACT_KERNEL void layer_norm(NormArgs a) {
    __shared__ float sums[8][16];
    __shared__ float squares[8][16];
    int lane = threadIdx.x, slot = threadIdx.y;
    i64 row = (i64)blockIdx.x * 8 + slot;
    bool live = row < a.rows;
    float* x = a.x + (live ? row : 0) * a.width;
    const float* residual = a.residual ? a.residual + (live ? row : 0) * a.width : 0;
    float partial = 0.0f;
    if (live) {
        for (int i = lane; i < a.width; i += 16) {
            float v = x[i];
            if (residual) {
                v = add(v, residual[i]);
                x[i] = v;
            }
            partial = add(partial, v);
        }
    }
    sums[slot][lane] = partial;
    __syncthreads();
    float n = (float)a.width;
    float mean = divide(tree16(sums[slot]), n);
    partial = 0.0f;
    if (live) {
        for (int i = lane; i < a.width; i += 16) {
            float d = sub(x[i], mean);
            partial = fused(d, d, partial);
        }
    }
    squares[slot][lane] = partial;
    __syncthreads();
    float variance = divide(tree16(squares[slot]), n);
    float inverse = divide(1.0f, __fsqrt_rn(add(variance, a.eps)));
    if (live) {
        for (int i = lane; i < a.width; i += 16) {
            x[i] = fused(mul(sub(x[i], mean), inverse), a.gamma[i], a.beta[i]);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Products: out = bias + a . b^T for a ragged batch of problems (gemm.rs). Every output element is one fused
// multiply-add chain over k in increasing order from its bias (or from +0 without one): tiles of k are taken in
// order and each thread runs its elements' chains through them, so the tiling changes where values wait, never
// the order.
//
// a: m rows of k, `lda` apart. b: with B_KMAJOR, k rows of n, `ldb` apart (a weight stored transposed; an
// attention head's values); else n rows of k (an attention head's keys). c: m rows of n, `ldc` apart.

struct Problem {
    i64 a;
    i64 b;
    i64 c;
    int m;
    int n;
    int k;
    int lda;
    int ldb;
    int ldc;
};

struct GemmArgs {
    const float* a;
    const float* b;
    const float* bias;
    float* c;
    const Problem* problems;
    int gelu;
    int unused;
};

// One tile of BM x BN outputs; each thread holds RM x RN quads of 4 x 4 outputs, rows ty*4 + i*(BM/RM) and columns
// tx*4 + j*(BN/RN): quads spread so that a warp's shared-memory reads fall on few banks. The next tile of k is
// read from global memory into registers while the current one is worked, and the two shared buffers alternate.
template <int BM, int BN, int BK, int RM, int RN, bool B_KMAJOR>
SCIFACT_DEVICE void gemm_tile(const GemmArgs& g) {
    const int TX = BN / (4 * RN);
    const int TY = BM / (4 * RM);
    const int THREADS = TX * TY;
    const int PAD = 4;
    const int A_EACH = BM * BK / THREADS;
    const int B_EACH = BN * BK / THREADS;
    static_assert(BM * BK % THREADS == 0 && BN * BK % THREADS == 0, "whole staging shares");
    __shared__ __align__(16) float as[2][BK][BM + PAD];
    __shared__ __align__(16) float bs[2][BK][BN + PAD];

    const Problem p = g.problems[blockIdx.z];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    if (m0 >= p.m || n0 >= p.n) return;
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const float* a = g.a + p.a;
    const float* b = g.b + p.b;

    float acc[RM * 4][RN * 4];
    for (int j = 0; j < RN * 4; ++j) {
        int n = n0 + tx * 4 + (j / 4) * (BN / RN) + j % 4;
        float start = (g.bias && n < p.n) ? g.bias[n] : 0.0f;
        for (int i = 0; i < RM * 4; ++i) acc[i][j] = start;
    }

    // Staging: a's element e of the tile is row e / BK, k e % BK (a row's k run by neighbouring threads); b's is
    // k e / BN, column e % BN when k-major (a k row's columns by neighbours), else like a's.
    float ra[A_EACH], rb[B_EACH];
    int k0 = 0;
    for (int i = 0; i < A_EACH; ++i) {
        int e = tid + i * THREADS, m = m0 + e / BK, k = k0 + e % BK;
        ra[i] = (m < p.m && k < p.k) ? a[(i64)m * p.lda + k] : 0.0f;
    }
    for (int i = 0; i < B_EACH; ++i) {
        int e = tid + i * THREADS;
        if (B_KMAJOR) {
            int n = n0 + e % BN, k = k0 + e / BN;
            rb[i] = (n < p.n && k < p.k) ? b[(i64)k * p.ldb + n] : 0.0f;
        } else {
            int n = n0 + e / BK, k = k0 + e % BK;
            rb[i] = (n < p.n && k < p.k) ? b[(i64)n * p.ldb + k] : 0.0f;
        }
    }
    int buffer = 0;
    for (int i = 0; i < A_EACH; ++i) {
        int e = tid + i * THREADS;
        as[0][e % BK][e / BK] = ra[i];
    }
    for (int i = 0; i < B_EACH; ++i) {
        int e = tid + i * THREADS;
        if (B_KMAJOR) bs[0][e / BN][e % BN] = rb[i];
        else bs[0][e % BK][e / BK] = rb[i];
    }
    __syncthreads();

    for (; k0 < p.k; k0 += BK) {
        const int next = k0 + BK;
        if (next < p.k) {
            for (int i = 0; i < A_EACH; ++i) {
                int e = tid + i * THREADS, m = m0 + e / BK, k = next + e % BK;
                ra[i] = (m < p.m && k < p.k) ? a[(i64)m * p.lda + k] : 0.0f;
            }
            for (int i = 0; i < B_EACH; ++i) {
                int e = tid + i * THREADS;
                if (B_KMAJOR) {
                    int n = n0 + e % BN, k = next + e / BN;
                    rb[i] = (n < p.n && k < p.k) ? b[(i64)k * p.ldb + n] : 0.0f;
                } else {
                    int n = n0 + e / BK, k = next + e % BK;
                    rb[i] = (n < p.n && k < p.k) ? b[(i64)n * p.ldb + k] : 0.0f;
                }
            }
        }
        // Only the tile's real k: a padded k would add fma(0, 0, acc), which turns an acc of -0 into +0.
        const int steps = p.k - k0 < BK ? p.k - k0 : BK;
        for (int kk = 0; kk < steps; ++kk) {
#ifdef SCIFACT_BREAK_ORDER
            // The deliberately broken build, for the test that shows a reordered kernel fails: k backwards.
            const int at = steps - 1 - kk;
#else
            const int at = kk;
#endif
            float av[RM * 4], bv[RN * 4];
            for (int q = 0; q < RM; ++q) {
                float4 v = *(const float4*)&as[buffer][at][ty * 4 + q * (BM / RM)];
                av[q * 4] = v.x; av[q * 4 + 1] = v.y; av[q * 4 + 2] = v.z; av[q * 4 + 3] = v.w;
            }
            for (int q = 0; q < RN; ++q) {
                float4 v = *(const float4*)&bs[buffer][at][tx * 4 + q * (BN / RN)];
                bv[q * 4] = v.x; bv[q * 4 + 1] = v.y; bv[q * 4 + 2] = v.z; bv[q * 4 + 3] = v.w;
            }
            for (int i = 0; i < RM * 4; ++i)
                for (int j = 0; j < RN * 4; ++j) acc[i][j] = fused(av[i], bv[j], acc[i][j]);
        }
        if (next < p.k) {
            // The other buffer was last read before the previous barrier: free to overwrite.
            for (int i = 0; i < A_EACH; ++i) {
                int e = tid + i * THREADS;
                as[buffer ^ 1][e % BK][e / BK] = ra[i];
            }
            for (int i = 0; i < B_EACH; ++i) {
                int e = tid + i * THREADS;
                if (B_KMAJOR) bs[buffer ^ 1][e / BN][e % BN] = rb[i];
                else bs[buffer ^ 1][e % BK][e / BK] = rb[i];
            }
        }
        __syncthreads();
        buffer ^= 1;
    }

    float* c = g.c + p.c;
    for (int i = 0; i < RM * 4; ++i) {
        int m = m0 + ty * 4 + (i / 4) * (BM / RM) + i % 4;
        if (m >= p.m) continue;
        for (int j = 0; j < RN * 4; ++j) {
            int n = n0 + tx * 4 + (j / 4) * (BN / RN) + j % 4;
            if (n >= p.n) continue;
            c[(i64)m * p.ldc + n] = g.gelu ? gelu_cpu(acc[i][j]) : acc[i][j];
        }
    }
}

// The linear layers (weights stored transposed, k rows of n): 128 x 128 tiles, 256 threads; as many registers
// as the compiler likes (one block per multiprocessor), or at most 128 (two blocks). The same operations in the
// same order: which is faster is measured (`scifact-audit device --check --throughput`), the bits are one.
SCIFACT_KERNEL void SCIFACT_BOUNDS(256, 1) gemm_wide(GemmArgs g) { gemm_tile<128, 128, 8, 2, 2, true>(g); }
SCIFACT_KERNEL void SCIFACT_BOUNDS(256, 2) gemm_wide2(GemmArgs g) { gemm_tile<128, 128, 8, 2, 2, true>(g); }
// Attention scores, q . k^T (keys as rows of k): 64 x 64 tiles, 256 threads.
SCIFACT_KERNEL void SCIFACT_BOUNDS(256, 1) gemm_scores(GemmArgs g) { gemm_tile<64, 64, 8, 1, 1, false>(g); }
// Attention context, probabilities . v (values as k rows of n, n the head's width): 64 x 32 tiles, 128 threads.
SCIFACT_KERNEL void SCIFACT_BOUNDS(128, 1) gemm_context(GemmArgs g) { gemm_tile<64, 32, 8, 1, 1, true>(g); }

// ---------------------------------------------------------------------------------------------------------------
// Softmax of attention score rows (ops.rs's softmax), after MPNet's relative-position bias when one is given
// (mod.rs's attention: one addition per score, before the softmax). A block is 16 lanes by 8 rows of one
// problem; lane l holds the CPU's partial l.

struct Attention {
    i64 scores;
    int len;
    int stride;
    int head;
    int unused;
};

struct SoftmaxArgs {
    float* scores;
    const Attention* problems;
    const float* bias;
    int heads;
    int unused;
};

SCIFACT_KERNEL void softmax_rows(SoftmaxArgs a) {
    __shared__ float maxima[8][16];
    __shared__ float sums[8][16];
    const Attention p = a.problems[blockIdx.y];
    if ((int)blockIdx.x * 8 >= p.len) return;
    int lane = threadIdx.x, slot = threadIdx.y;
    int query = blockIdx.x * 8 + slot;
    bool live = query < p.len;
    float* row = a.scores + p.scores + (i64)(live ? query : 0) * p.stride;
    float partial = __uint_as_float(0xff800000u);
    if (live) {
        for (int key = lane; key < p.len; key += 16) {
            float s = row[key];
            if (a.bias) {
                s = add(s, a.bias[relative_bucket((i64)key - query) * a.heads + p.head]);
                row[key] = s;
            }
            partial = larger(partial, s);
        }
    }
    maxima[slot][lane] = partial;
    __syncthreads();
    float max = tree16_max(maxima[slot]);
    float sum = 0.0f;
    if (live) {
        for (int key = lane; key < p.len; key += 16) {
            float e = exp_cpu(sub(row[key], max));
            row[key] = e;
            sum = add(sum, e);
        }
    }
    sums[slot][lane] = sum;
    __syncthreads();
    float inverse = divide(1.0f, tree16(sums[slot]));
    if (live) {
        for (int key = lane; key < p.len; key += 16) row[key] = mul(row[key], inverse);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pooling of each sequence's kept rows (mod.rs's pool), then the L2 normalisation of identity.rs's normalize.

struct Sequence {
    i64 first;
    int count;
    int unused;
};

struct PoolArgs {
    const float* x;
    float* pooled;
    const Sequence* sequences;
    int count;
    int hidden;
    int mode;
    int unused;
};

// mode: 0 the first kept row (CLS), 1 the mean, 2 the maximum.
SCIFACT_KERNEL void pool(PoolArgs a) {
    int s = blockIdx.x;
    if (s >= a.count) return;
    Sequence q = a.sequences[s];
    for (int d = threadIdx.x; d < a.hidden; d += blockDim.x) {
        const float* x = a.x + q.first * a.hidden + d;
        float value;
        if (a.mode == 0) {
            value = x[0];
        } else if (a.mode == 1) {
            float sum = 0.0f;
            for (int r = 0; r < q.count; ++r) sum = add(sum, x[(i64)r * a.hidden]);
            value = divide(sum, (float)q.count);
        } else {
            value = x[0];
            for (int r = 1; r < q.count; ++r) {
                float v = x[(i64)r * a.hidden];
                // mod.rs's pool: a later value replaces the one held only when larger, or when the one held is
                // NaN (so of +0 and -0 the first is kept).
                value = (v > value || value != value) ? v : value;
            }
        }
        a.pooled[(i64)s * a.hidden + d] = value;
    }
}

struct NormalizeArgs {
    const float* pooled;
    float* normalized;
    int count;
    int dims;
};

// One thread per vector: the sum of squares in f64, in order, as the CPU's iterator sum.
SCIFACT_KERNEL void normalize(NormalizeArgs a) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= a.count) return;
    const float* v = a.pooled + (i64)s * a.dims;
    double sum = -0.0;
    for (int d = 0; d < a.dims; ++d) {
        double x = (double)v[d];
        sum = __dadd_rn(sum, __dmul_rn(x, x));
    }
    float norm = __double2float_rn(__dsqrt_rn(sum));
    norm = (1e-12f > norm || norm != norm) ? 1e-12f : norm;
    for (int d = 0; d < a.dims; ++d) a.normalized[(i64)s * a.dims + d] = divide(v[d], norm);
}

// ---------------------------------------------------------------------------------------------------------------
// The scalar functions above over given inputs: for tests that hold them to the CPU's, value by value.

struct ProbeArgs {
    const float* input;
    float* exp;
    float* erf;
    float* gelu;
    i64 count;
};

SCIFACT_KERNEL void probe_ops(ProbeArgs a) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.count) return;
    float x = a.input[i];
    a.exp[i] = exp_cpu(x);
    a.erf[i] = erf_cpu(x);
    a.gelu[i] = gelu_cpu(x);
}
