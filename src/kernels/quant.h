/*
 * quant.h - the quantized weight formats, defined once.
 *
 * Both formats cut each matrix row into blocks of QTTS_QK = 32 consecutive
 * elements with one IEEE binary16 scale per block (ggml's q8_0 / q4_0
 * layouts). A quantized [rows, cols] matrix (cols % 32 == 0) is stored
 * row-major as rows * cols/32 blocks, packed with no padding, so row r
 * starts at byte r * qtts_quant_row_bytes(type, cols). All multi-byte
 * fields are little-endian. Block data must be 2-byte aligned.
 *
 *   Q8_0  34 bytes: d (binary16), qs[32] int8 in [-127, 127];
 *         w[i] = d * qs[i]. (-128 is not a valid code: the SIMD dot
 *         products negate codes.)
 *   Q4_0  18 bytes: d (binary16), qs[16]; element j (0..15) is the low
 *         nibble of qs[j], element j+16 the high nibble;
 *         w[i] = d * (nibble - 8), i.e. codes -8..7.
 *
 * In a safetensors file (written by `qwen3-tts quantize`) a quantized
 * tensor has dtype "Q8_0" or "Q4_0", its logical shape [rows, cols], and
 * its rows in the packed layout below (format version 2; version 1 files
 * hold these plain blocks, rows * cols/32 * block-size bytes). Embeddings,
 * norms, biases and codebooks are never quantized. docs/QUANT.md has the
 * file format and the measured error of each format.
 *
 * The part above the "CPU reference" banner is plain C with fixed-width
 * types only, so GPU backends include this header instead of restating the
 * layout.
 */
#ifndef QTTS_QUANT_H
#define QTTS_QUANT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define QTTS_QK 32   /* elements per block, both formats */

typedef uint16_t qtts_half;   /* IEEE binary16 bits */

typedef struct {
    qtts_half d;              /* scale */
    int8_t qs[QTTS_QK];       /* codes in [-127, 127] */
} qtts_block_q8_0;

typedef struct {
    qtts_half d;              /* scale */
    uint8_t qs[QTTS_QK / 2];  /* element j: low nibble of qs[j]; j + 16: high nibble */
} qtts_block_q4_0;

static_assert(sizeof(qtts_block_q8_0) == sizeof(qtts_half) + QTTS_QK, "q8_0 block is 34 bytes");
static_assert(sizeof(qtts_block_q4_0) == sizeof(qtts_half) + QTTS_QK / 2, "q4_0 block is 18 bytes");
static_assert(offsetof(qtts_block_q8_0, qs) == 2 && offsetof(qtts_block_q4_0, qs) == 2,
              "codes follow the scale");

#define QTTS_Q8_0_NAME "Q8_0"   /* safetensors dtype strings */
#define QTTS_Q4_0_NAME "Q4_0"

/* ==== The CPU's packed rows ============================================
 *
 * The CPU kernels read a quantized matrix in a packed form of the blocks
 * above (qtts_mat.packed, kernels.h; quantized model files store it too),
 * laid out so that one 64-byte load holds the same 4-byte
 * code group of 16 consecutive blocks: with one 32-bit lane per block,
 * an int8 dot instruction (VPDPBUSD, SDOT) sums a whole block's integer
 * dot in one lane, and the per-block fp32 work (scale, convert, add) is
 * done 16 blocks at a time instead of once per block.
 *
 * Each row is cut into ng = ceil(cols/512) groups of 16 blocks; the last
 * group is padded to 16 with blocks whose codes are 0 and scale is +0.
 * Row r starts at byte r * qtts_packed_row_bytes(q4, cols) and holds:
 *
 *   codes   ng groups of K vectors of 64 bytes (K = 8 for Q8_0, 4 for
 *           Q4_0): byte 64*(K*g + k) + 4*i + j is byte 4*k + j of the
 *           codes (qs) of block 16*g + i, i < 16, j < 4. Q8_0 codes are
 *           stored with the sign bit flipped (code + 128, as unsigned
 *           bytes); Q4_0 bytes as in the block (low nibble element
 *           4k + j, high nibble element 16 + 4k + j, each code + 8).
 *   scales  ng * 16 binary16 scales: block 16*g + i at index 16*g + i.
 *
 * The bytes per row are the same as the plain layout's when cols is a
 * multiple of 512 (every matrix of the released models).
 */
#define QTTS_PACK_BLOCKS 16   /* blocks per group */

static inline int qtts_packed_groups(int cols) {
    return (cols / QTTS_QK + QTTS_PACK_BLOCKS - 1) / QTTS_PACK_BLOCKS;
}
/* code vectors of 64 bytes per group */
static inline int qtts_packed_vectors(int q4) { return q4 ? 4 : 8; }
static inline size_t qtts_packed_row_bytes(int q4, int cols) {
    return (size_t)qtts_packed_groups(cols) * (64 * (size_t)qtts_packed_vectors(q4) + 2 * QTTS_PACK_BLOCKS);
}

/* ==== CPU reference (quant.c) ========================================== */

/* IEEE binary16 <-> f32; f32 -> half rounds to nearest even (overflow to
 * infinity). */
qtts_half qtts_f32_to_half(float f);
float qtts_half_to_f32(qtts_half h);

/* One row of cols (a multiple of 32) elements. Quantization: Q8_0 takes
 * d = half(amax / 127) and codes round-half-even(x / d) clamped to
 * [-127, 127]; Q4_0 takes the element m of largest magnitude, d =
 * half(m / -8) and codes floor(x / d + 8.5) clamped to [0, 15] (so m maps
 * to code 0 exactly). An all-zero block gets d = 0. */
void qtts_quantize_row_q8_0(const float *x, void *dst, int cols);
void qtts_quantize_row_q4_0(const float *x, void *dst, int cols);
void qtts_dequantize_row_q8_0(const void *src, float *y, int cols);
void qtts_dequantize_row_q4_0(const void *src, float *y, int cols);

/* One row of cols (a multiple of 32) elements from the plain layout to the
 * packed one (q4: Q4_0, else Q8_0), and back. */
void qtts_pack_row(const void *plain, void *packed, int cols, int q4);
void qtts_unpack_row(const void *packed, void *plain, int cols, int q4);
/* Block b of a packed row of cols elements, as a plain block at blk. */
void qtts_unpack_block(const void *packed, int cols, int q4, int b, void *blk);

#endif
