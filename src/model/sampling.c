/*
 * sampling.c - the logits-processor chain of HF transformers 4.57 as the
 * qwen_tts reference configures it, and the token draw.
 *
 * Exactness. Every stage reproduces the reference's fp32 arithmetic:
 *   - repetition penalty: s < 0 ? s * p : s / p, one fp32 op with the
 *     penalty rounded to fp32 (torch casts a Python scalar to the tensor's
 *     dtype), applied once per distinct id;
 *   - temperature: s / t in fp32 (a true division, not a reciprocal);
 *   - top-k: the k-th largest value (with multiplicity) is the threshold,
 *     entries strictly below it become -inf;
 *   - top-p: torch.sort(ascending) is libstdc++'s std::sort (introsort,
 *     not stable), so tied values come out in an order that depends on the
 *     whole array. We run the same algorithm on (value, index) pairs, which
 *     gives the same permutation and therefore the same choice among ties
 *     at the cut. The threshold is 1 - top_p computed in double and then
 *     rounded to fp32 (the comparison runs in fp32); since our top_p is a
 *     float, it is first read back as the shortest decimal that rounds to
 *     it (0.9f -> 0.9), which is what a user or config file wrote. The
 *     softmax and cumulative sum follow torch's order (max, exp, sum,
 *     multiply by 1/sum; cumulative sum in double rounded to fp32 per
 *     element); torch's vectorised exp may differ from expf by an ulp, so a
 *     cumulative probability within an ulp or two of the threshold can fall
 *     on the other side (not seen on random logits).
 *
 * Cost. Top-k is a size-k min-heap in the caller's scratch, fed only the
 * entries of the blocks of 16 whose maxima could enter it (top_k_). Top-p
 * sorts the whole vocabulary, O(V log V), and runs only when top_p < 1
 * (off by default). The draw is one pass of expf over the surviving
 * entries plus a linear scan. Nothing allocates.
 *
 * Non-finite input. Every entry point first rewrites NaN scores to -inf, so
 * a NaN is never chosen (the engine checks logits for non-finite values on
 * its own). If every score is -inf the result is index 0. A +inf score (only
 * reachable through overflow, e.g. a tiny temperature) is treated as
 * infinitely likely: the draw returns the first +inf entry.
 *
 * The draw: u = qtts_rng_uniform() in [0, 1), weights w_i = exp(s_i - max)
 * in fp32, cumulative sum in double in index order; the first index whose
 * cumulative weight exceeds u * sum is returned (zero weights can never be
 * chosen).
 */
#include "sampling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- RNG: xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void qtts_rng_seed(qtts_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t qtts_rng_next(qtts_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double qtts_rng_uniform(qtts_rng *rng) {
    return (double)(qtts_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* ---- helpers ---- */

static void nan_to_neg_inf(float *s, int n) {
    for (int i = 0; i < n; i++)
        if (isnan(s[i])) s[i] = -INFINITY;
}

static int argmax_first(const float *s, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (s[i] > s[best]) best = i;
    return best;
}

/* The shortest decimal (at most 9 significant digits) that rounds to f, as
 * a double: the value a Python caller would have passed. */
static double float_as_decimal(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

/* ---- talker rules ---- */

/* Largest vocabulary qtts_talker_process handles (bitmap on the stack). */
#define QTTS_TALKER_MAX_VOCAB 65536

void qtts_talker_process(float *scores, int vocab, const int32_t *history, int n_history,
                         const qtts_talker_rules *rules) {
    QTTS_ASSERT(scores && rules && vocab > 0 && vocab <= QTTS_TALKER_MAX_VOCAB);
    QTTS_ASSERT(n_history >= 0 && (n_history == 0 || history));
    nan_to_neg_inf(scores, vocab);

    const float pen = rules->repetition_penalty;
    if (pen != 1.0f && n_history > 0) {
        QTTS_ASSERT(pen > 0.0f);
        uint64_t seen[QTTS_TALKER_MAX_VOCAB / 64];
        size_t words = ((size_t)vocab + 63) / 64;
        for (size_t w = 0; w < words; w++) seen[w] = 0;
        for (int h = 0; h < n_history; h++) {
            int32_t id = history[h];
            QTTS_ASSERT(id >= 0 && id < vocab);
            uint64_t bit = 1ull << (id & 63);
            if (seen[id >> 6] & bit) continue;
            seen[id >> 6] |= bit;
            float s = scores[id];
            scores[id] = s < 0.0f ? s * pen : s / pen;
        }
    }

    const int eos = rules->eos_id;
    if (n_history < rules->min_new_tokens && eos >= 0 && eos < vocab) scores[eos] = -INFINITY;

    int b = QTTS_MAX(rules->suppress_begin, 0);
    int e = QTTS_MIN(rules->suppress_end, vocab);
    for (int i = b; i < e; i++)
        if (i != eos) scores[i] = -INFINITY;
}

/* ---- temperature ---- */

static void temperature_(float *scores, int vocab, float temperature) {
    QTTS_ASSERT(temperature > 0.0f && isfinite(temperature));
    /* 4 lanes at a time (GCC leaves the plain loop scalar): each lane is
     * the same IEEE division */
    typedef float v4f __attribute__((vector_size(16), aligned(4)));
    int i = 0;
    for (; i + 4 <= vocab; i += 4) {
        v4f v;
        memcpy(&v, scores + i, sizeof v);
        v = v / temperature;
        memcpy(scores + i, &v, sizeof v);
    }
    for (; i < vocab; i++) scores[i] = scores[i] / temperature;
}

void qtts_apply_temperature(float *scores, int vocab, float temperature) {
    QTTS_ASSERT(scores && vocab > 0);
    nan_to_neg_inf(scores, vocab);
    temperature_(scores, vocab, temperature);
}

/* ---- top-k ---- */

static void minheap_sift_down(float *h, int n, int i) {
    float v = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (!(h[c] < v)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* Top-k keeps the entries >= the k-th largest value (with multiplicity):
 * a size-k min-heap fed the entries in index order. The feed skips whole
 * blocks of TOPK_BLOCK entries by their maxima: a block whose maximum
 * could not enter the heap has no entry that could. Before the heap is
 * full, the entries below `lo` are skipped too, lo being the k-th largest
 * block maximum: k entries (those maxima) reach it, so it is at most the
 * k-th largest and every entry that ends in the heap is >= lo. The heap
 * therefore ends holding the k largest, as the plain feed would, and for
 * random logits reads ~5% of a 2048-entry row one by one instead of all. */
#define TOPK_BLOCK 16

/* The maximum of x[0, 16) (no NaN: every caller has turned them to -inf,
 * so the order of the comparisons cannot change the value): four
 * independent chains. */
static float max16(const float *x) {
    float m[4] = {x[0], x[1], x[2], x[3]};
    for (int i = 4; i < 16; i += 4)
        for (int l = 0; l < 4; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
    const float a = m[1] > m[0] ? m[1] : m[0], b = m[3] > m[2] ? m[3] : m[2];
    return b > a ? b : a;
}

/* Feeds x[i] (in index order) to the heap of *m (< k: still filling from
 * the entries >= lo, then heapified at k) entries. */
static inline void topk_feed(float *heap, int k, int *m, float lo, float v) {
    if (*m < k) {
        if (v >= lo) {
            heap[(*m)++] = v;
            if (*m == k)
                for (int j = k / 2 - 1; j >= 0; j--) minheap_sift_down(heap, k, j);
        }
    } else if (v > heap[0]) {
        heap[0] = v;
        minheap_sift_down(heap, k, 0);
    }
}

/* The k-th largest of x[0, n) with multiplicity (0 < k <= n), all entries
 * fed: the plain heap, for the blocks' maxima and for short rows. */
static float kth_largest(const float *x, int n, int k, float *heap) {
    int m = 0;
    for (int i = 0; i < n; i++) topk_feed(heap, k, &m, -INFINITY, x[i]);
    return heap[0];
}

static void top_k_(float *scores, int vocab, int k, void *scratch) {
    QTTS_ASSERT(k >= 0);
    if (k == 0 || k >= vocab) return; /* k >= vocab: threshold is the minimum */
    QTTS_ASSERT(scratch);
    float *heap = scratch;
    const int nb = vocab / TOPK_BLOCK;
    if (nb < 2 * k) {   /* few blocks: their maxima would bound little */
        const float kth = kth_largest(scores, vocab, k, heap);
        for (int i = 0; i < vocab; i++)
            if (scores[i] < kth) scores[i] = -INFINITY;
        return;
    }
    float *bmax = heap + k;   /* scratch holds vocab floats, and k + nb < vocab */
    for (int b = 0; b < nb; b++) bmax[b] = max16(scores + (size_t)b * TOPK_BLOCK);
    const float lo = kth_largest(bmax, nb, k, heap);
    int m = 0;
    for (int b = 0; b < nb; b++) {
        if (m < k ? bmax[b] < lo : !(bmax[b] > heap[0])) continue;
        for (int i = b * TOPK_BLOCK; i < (b + 1) * TOPK_BLOCK; i++)
            topk_feed(heap, k, &m, lo, scores[i]);
    }
    for (int i = nb * TOPK_BLOCK; i < vocab; i++) topk_feed(heap, k, &m, lo, scores[i]);
    QTTS_ASSERT(m == k);
    const float kth = heap[0];
    for (int b = 0; b < nb; b++) {   /* a block below the threshold goes whole */
        float *x = scores + (size_t)b * TOPK_BLOCK;
        if (bmax[b] < kth)
            for (int i = 0; i < TOPK_BLOCK; i++) x[i] = -INFINITY;
        else
            for (int i = 0; i < TOPK_BLOCK; i++) x[i] = x[i] < kth ? -INFINITY : x[i];
    }
    for (int i = nb * TOPK_BLOCK; i < vocab; i++)
        if (scores[i] < kth) scores[i] = -INFINITY;
}

void qtts_apply_top_k(float *scores, int vocab, int k, void *scratch) {
    QTTS_ASSERT(scores && vocab > 0);
    nan_to_neg_inf(scores, vocab);
    top_k_(scores, vocab, k, scratch);
}

/* ---- top-p ---- */

/* libstdc++'s std::sort (GCC <= 14, unchanged for years) on parallel arrays
 * v[] (key) and ix[] (payload) with comparator v[a] < v[b]. Reproduced
 * step by step because the order it leaves tied keys in is observable. */

typedef struct {
    float *v;
    int *ix;
} pairs;

static inline bool pless(pairs p, int a, int b) { return p.v[a] < p.v[b]; }
static inline void pswap(pairs p, int a, int b) {
    float tv = p.v[a];
    p.v[a] = p.v[b];
    p.v[b] = tv;
    int ti = p.ix[a];
    p.ix[a] = p.ix[b];
    p.ix[b] = ti;
}
static inline void pmove(pairs p, int dst, int src) {
    p.v[dst] = p.v[src];
    p.ix[dst] = p.ix[src];
}

static void std_push_heap(pairs p, int first, int hole, int top, float val, int vix) {
    int parent = (hole - 1) / 2;
    while (hole > top && p.v[first + parent] < val) {
        pmove(p, first + hole, first + parent);
        hole = parent;
        parent = (hole - 1) / 2;
    }
    p.v[first + hole] = val;
    p.ix[first + hole] = vix;
}

static void std_adjust_heap(pairs p, int first, int hole, int len, float val, int vix) {
    const int top = hole;
    int child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (pless(p, first + child, first + child - 1)) child--;
        pmove(p, first + hole, first + child);
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        pmove(p, first + hole, first + child - 1);
        hole = child - 1;
    }
    std_push_heap(p, first, hole, top, val, vix);
}

/* __partial_sort(first, last, last): make_heap then sort_heap. */
static void std_heap_sort(pairs p, int first, int last) {
    int len = last - first;
    if (len >= 2) {
        for (int parent = (len - 2) / 2;; parent--) {
            std_adjust_heap(p, first, parent, len, p.v[first + parent], p.ix[first + parent]);
            if (parent == 0) break;
        }
    }
    while (last - first > 1) {
        --last;
        float val = p.v[last];
        int vix = p.ix[last];
        pmove(p, last, first);
        std_adjust_heap(p, first, 0, last - first, val, vix);
    }
}

static void std_move_median_to_first(pairs p, int result, int a, int b, int c) {
    if (pless(p, a, b)) {
        if (pless(p, b, c)) pswap(p, result, b);
        else if (pless(p, a, c)) pswap(p, result, c);
        else pswap(p, result, a);
    } else if (pless(p, a, c)) {
        pswap(p, result, a);
    } else if (pless(p, b, c)) {
        pswap(p, result, c);
    } else {
        pswap(p, result, b);
    }
}

static int std_unguarded_partition(pairs p, int first, int last, int pivot) {
    for (;;) {
        while (pless(p, first, pivot)) ++first;
        --last;
        while (pless(p, pivot, last)) --last;
        if (!(first < last)) return first;
        pswap(p, first, last);
        ++first;
    }
}

enum { STD_SORT_THRESHOLD = 16 };

static void std_introsort_loop(pairs p, int first, int last, int depth) {
    while (last - first > STD_SORT_THRESHOLD) {
        if (depth == 0) {
            std_heap_sort(p, first, last);
            return;
        }
        --depth;
        int mid = first + (last - first) / 2;
        std_move_median_to_first(p, first, first + 1, mid, last - 1);
        int cut = std_unguarded_partition(p, first + 1, last, first);
        std_introsort_loop(p, cut, last, depth);
        last = cut;
    }
}

static void std_unguarded_linear_insert(pairs p, int last) {
    float val = p.v[last];
    int vix = p.ix[last];
    int next = last - 1;
    while (val < p.v[next]) {
        pmove(p, last, next);
        last = next;
        --next;
    }
    p.v[last] = val;
    p.ix[last] = vix;
}

static void std_insertion_sort(pairs p, int first, int last) {
    if (first == last) return;
    for (int i = first + 1; i != last; ++i) {
        if (pless(p, i, first)) {
            float val = p.v[i];
            int vix = p.ix[i];
            for (int j = i; j > first; j--) pmove(p, j, j - 1);
            p.v[first] = val;
            p.ix[first] = vix;
        } else {
            std_unguarded_linear_insert(p, i);
        }
    }
}

static int floor_log2(int n) {
    int r = 0;
    while (n >>= 1) r++;
    return r;
}

static void std_sort(pairs p, int n) {
    if (n <= 0) return;
    std_introsort_loop(p, 0, n, 2 * floor_log2(n));
    if (n > STD_SORT_THRESHOLD) {
        std_insertion_sort(p, 0, STD_SORT_THRESHOLD);
        for (int i = STD_SORT_THRESHOLD; i < n; i++) std_unguarded_linear_insert(p, i);
    } else {
        std_insertion_sort(p, 0, n);
    }
}

void qtts_sort_ascending_like_torch(float *values, int *indices, int n) {
    pairs p = {values, indices};
    std_sort(p, n);
}

static void top_p_(float *scores, int vocab, float top_p, void *scratch) {
    QTTS_ASSERT(scratch && top_p >= 0.0f && top_p <= 1.0f);

    float *v = scratch;
    int *ix = (int *)(v + vocab);
    for (int i = 0; i < vocab; i++) {
        v[i] = scores[i];
        ix[i] = i;
    }
    qtts_sort_ascending_like_torch(v, ix, vocab);

    /* softmax of the sorted row; an infinite maximum makes it NaN in torch,
     * and NaN <= threshold removes nothing. */
    const float mx = v[vocab - 1];
    if (!isfinite(mx)) return;
    double sum = 0.0;
    for (int j = 0; j < vocab; j++) {
        v[j] = expf(v[j] - mx);
        sum += (double)v[j];
    }
    const float inv = 1.0f / (float)sum;
    const float thr = (float)(1.0 - float_as_decimal(top_p));
    double cum = 0.0;
    for (int j = 0; j < vocab - 1; j++) { /* the last (largest) is always kept */
        cum += (double)(v[j] * inv);
        if ((float)cum <= thr) scores[ix[j]] = -INFINITY;
    }
}

void qtts_apply_top_p(float *scores, int vocab, float top_p, void *scratch) {
    QTTS_ASSERT(scores && vocab > 0);
    nan_to_neg_inf(scores, vocab);
    top_p_(scores, vocab, top_p, scratch);
}

/* ---- the draw ---- */

/* mx is the largest score (every stage keeps one entry of that value). */
static int draw(const float *s, int vocab, float mx, float *w, qtts_rng *rng) {
    if (!isfinite(mx)) return argmax_first(s, vocab); /* all -inf: 0; else the first +inf */
    double sum = 0.0;   /* +0 plus the weights, >= 0: adding a zero weight changes nothing */
    for (int i = 0; i < vocab; i++) {
        w[i] = 0.0f;
        if (s[i] == -INFINITY) continue;   /* most entries after top-k */
        w[i] = expf(s[i] - mx);
        sum += (double)w[i];
    }
    const double target = qtts_rng_uniform(rng) * sum;
    double acc = 0.0;
    int last_pos = 0;
    for (int i = 0; i < vocab; i++) {
        if (w[i] == 0.0f) continue;
        acc += (double)w[i];
        last_pos = i;
        if (target < acc) return i;
    }
    return last_pos; /* u * sum rounded up to sum */
}

int qtts_sample(float *scores, int vocab, const qtts_sampler_params *p, qtts_rng *rng,
                void *scratch, float *margin) {
    QTTS_ASSERT(scores && vocab > 0 && p);

    /* NaN -> -inf and the maximum t1, in four independent chains (without
     * NaNs the order does not change a maximum); then the first argmax, and
     * for the margin the largest of the others (the runner-up, equal to t1
     * when the maximum is tied) */
    float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int i = 0;
    for (; i + 4 <= vocab; i += 4)
        for (int l = 0; l < 4; l++) {
            float v = scores[i + l];
            if (isnan(v)) scores[i + l] = v = -INFINITY;
            m4[l] = v > m4[l] ? v : m4[l];
        }
    for (; i < vocab; i++) {
        if (isnan(scores[i])) scores[i] = -INFINITY;
        m4[0] = scores[i] > m4[0] ? scores[i] : m4[0];
    }
    const float ta = m4[1] > m4[0] ? m4[1] : m4[0], tb = m4[3] > m4[2] ? m4[3] : m4[2];
    const float t1 = tb > ta ? tb : ta;
    int top = 0;
    while (scores[top] != t1) top++;   /* t1 is one of the scores */
    if (margin) {
        float t2 = -INFINITY;
        for (int j = 0; j < vocab; j++)
            if (j != top && scores[j] > t2) t2 = scores[j];
        *margin = t2 == -INFINITY ? INFINITY : t1 == t2 ? 0.0f : t1 - t2;
    }

    if (!p->do_sample) return top;

    QTTS_ASSERT(rng && scratch);
    if (p->temperature != 1.0f) temperature_(scores, vocab, p->temperature);
    const float mx = scores[top]; /* division by t > 0 is monotonic */
    if (p->top_k != 0) top_k_(scores, vocab, p->top_k, scratch);
    if (p->top_p < 1.0f) top_p_(scores, vocab, p->top_p, scratch);
    return draw(scores, vocab, mx, (float *)scratch, rng);
}
