/*
 * layout.h - the CUDA backend's device layouts and accumulation orders,
 * written as plain C (also compiled by the host compiler) so that the CPU
 * test suite checks them without a GPU (tests/unit/test_cuda_layout.c).
 *
 * ==== Matmul weights (F32/BF16) ==========================================
 *
 * The device matmul reproduces the "SIMD order" of kernels_impl.h: output
 * (t, r) is 16 lanes, lane l accumulating w[c]*x[c] for c = 16k + l in
 * increasing k with a fused multiply-add (columns past cols count as
 * w = x = 0 up to the end of the last partial group of 16), then the fold
 * a[l] += a[l+8], a[l+4], a[l+2], a[l+1], then + bias. On the device one
 * thread owns one lane of one output row, so each thread walks its lane's
 * chain. To let it read that chain with 16-byte loads, every weight row is
 * stored permuted: column c = 16k + l with k = 8b + j sits at element
 * b*128 + l*8 + j. A row holds nb8(cols)*128 elements (zero padded), so
 * thread l reads elements b*128 + l*8 .. +7 (8 steps of its chain) and a
 * half-warp reads 256 (BF16) or 512 (F32) contiguous bytes per block b.
 *
 * ==== Matmul weights (Q8_0/Q4_0) =========================================
 *
 * The reference quantized order (kernels_impl.h): activations quantized per
 * block of 32 (codes q, scale dx); the block's exact integer dot P(b) of
 * its 32 weight codes with the 32 activation codes; lane b mod 16 +=
 * (float)P(b) * (dw(b) * dx(b)) for b in increasing order (fmaf, the scale
 * product rounded first); the 16-lane fold; the bias. On the device thread
 * l of a row's 16 owns lane l: it walks the blocks b = l, l + 16, ... and
 * computes P(b) with 8 __dp4a over the block's 4-byte groups. The blocks
 * are split at upload into codes (Q8_0: [rows][cols] int8 in element
 * order, 32 bytes per block; Q4_0: [rows][cols/2] bytes, each block's 16
 * qs bytes as in the file: element j low nibble of byte j, element j + 16
 * its high nibble) and an f32 scale array [rows][cols/32] (the block's
 * binary16 scale, converted exactly), so a thread reads its block's codes
 * with 16-byte loads and the 16 threads of a row read 16 consecutive
 * blocks. The host matrix may be the CPU's packed layout (qtts_mat.packed,
 * read back to plain blocks with qtts_mat_unpack_row) or the file's plain
 * one. Formats as defined in kernels/quant.h.
 *
 * ==== Convolutions ========================================================
 *
 * A qtts_conv1d's packed weights w[g][kk][r] (kk = tap*cin + ci, g = co/8,
 * r = co%8) are stored on the device as Wt[kk][cout] (kk-major), and every
 * output y[co, t] is the same fp32 chain as conv_impl.h: fmaf over kk in
 * increasing order from +0, then + bias (0 when absent), then y = v or
 * y = y + v. Inputs are unpadded [cin][n] rows; a tap that reaches before
 * column 0 reads zero (what the CPU's zero padding columns hold).
 *
 * ==== Attention scores ======================================================
 *
 * qtts_dot_f32's order on 8 threads: thread l sums a[i]*b[i] for i = l mod 8
 * in increasing i (multiply, then add), then shuffles down by 4, 1, 2 leave
 * ((a0+a4)+(a1+a5))+((a2+a6)+(a3+a7)) in thread 0.
 *
 * ==== Top-p on the device =====================================================
 *
 * sampling.c sorts (value, index) pairs like torch and removes the sorted
 * positions whose cumulative probability is <= the threshold, a prefix
 * [0, J). The values in sorted order, hence every sum, do not depend on the
 * order of tied values; so the device sorts the values only and, unless the
 * values at J-1 and J are equal, removes every entry below the value at J.
 * When they are equal the order inside the tied run matters and the device
 * runs sampling.c's sort itself.
 */
#ifndef QTTS_CUDA_LAYOUT_H
#define QTTS_CUDA_LAYOUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __CUDACC__
#define QTTS_HD __host__ __device__ __forceinline__
#else
#define QTTS_HD static inline
#endif

/* Steps of 16 columns (the last one possibly partial). */
QTTS_HD int qtts_cu_k16(int cols) { return (cols + 15) / 16; }
/* Blocks of 8 steps; a permuted row holds qtts_cu_nb8(cols) * 128 elements. */
QTTS_HD int qtts_cu_nb8(int cols) { return (qtts_cu_k16(cols) + 7) / 8; }
QTTS_HD int64_t qtts_cu_row_elems(int cols) { return (int64_t)qtts_cu_nb8(cols) * 128; }
/* Position of column c inside its permuted row. */
QTTS_HD int64_t qtts_cu_perm(int c) {
    const int l = c & 15, k = c >> 4;
    return (int64_t)(k >> 3) * 128 + l * 8 + (k & 7);
}

/* Device element of packed conv weight index (g, kk, r) -> Wt[kk][cout]. */
QTTS_HD int64_t qtts_cu_conv_dst(int kk, int co, int cout) { return (int64_t)kk * cout + co; }
/* Host packed index of (co, kk) in a qtts_conv1d with K = taps * cin (MR = 8). */
QTTS_HD int64_t qtts_cu_conv_src(int co, int kk, int K) {
    return ((int64_t)(co / 8) * K + kk) * 8 + (co % 8);
}

/* Host only: the top-p threshold of sampling.c, (float)(1 - p) with p read
 * back as the shortest decimal (at most 9 digits) that rounds to it. */
static inline float qtts_cu_top_p_threshold(float f) {
    char buf[32];
    double p = (double)f;
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) {
            p = strtod(buf, NULL);
            break;
        }
    }
    return (float)(1.0 - p);
}

#endif
