/*
 * isa_emu.h - scalar stand-ins for the AVX-512 and VNNI intrinsics that
 * src/kernels/kernels_avx512.c and kernels_avxvnni.c use, so that their
 * lane logic (masks, inserts, blends, operand order of VPDPBUSD) can be
 * tested bit for bit on CPUs that only have AVX2 (`make check-isa-emu`).
 *
 * Force-included (-include) before the kernel file, after <immintrin.h>:
 * each intrinsic name is redefined to an emu_ function written from the
 * instruction's definition in Intel's intrinsics guide. The AVX2/FMA/F16C
 * intrinsics the files also use run natively. This checks logic, not
 * speed, and not the hardware itself: it is no substitute for running
 * test_kernels on an AVX-512 or AVX-VNNI machine.
 */
#ifndef QTTS_ISA_EMU_H
#define QTTS_ISA_EMU_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EMU static inline __attribute__((always_inline, unused))

typedef union {
    __m512 ps;
    __m512i si;
    __m512d pd;
    float f[16];
    int32_t i32[16];
    uint32_t u32[16];
    int64_t i64[8];
    uint16_t u16[32];
    int8_t i8[64];
    uint8_t u8[64];
} emu512;

typedef union {
    __m256 ps;
    __m256i si;
    __m256d pd;
    float f[8];
    int32_t i32[8];
    uint16_t u16[16];
    int8_t i8[32];
    uint8_t u8[32];
} emu256;

typedef union {
    __m128i si;
    int8_t i8[16];
} emu128;

EMU __m512 emu_mm512_setzero_ps(void) { emu512 r; memset(&r, 0, sizeof r); return r.ps; }
EMU __m512i emu_mm512_setzero_si512(void) { emu512 r; memset(&r, 0, sizeof r); return r.si; }
EMU __m512 emu_mm512_set1_ps(float v) { emu512 r; for (int i = 0; i < 16; i++) r.f[i] = v; return r.ps; }
EMU __m512i emu_mm512_set1_epi8(char v) { emu512 r; memset(r.u8, (unsigned char)v, 64); return r.si; }
EMU __m512 emu_mm512_loadu_ps(const void *p) { emu512 r; memcpy(&r, p, 64); return r.ps; }
EMU __m512i emu_mm512_loadu_si512(const void *p) { emu512 r; memcpy(&r, p, 64); return r.si; }

/* Masked-off lanes are zero and are not read. */
EMU __m512 emu_mm512_maskz_loadu_ps(__mmask16 k, const void *p) {
    emu512 r;
    for (int i = 0; i < 16; i++) {
        r.f[i] = 0.0f;
        if (k >> i & 1) memcpy(&r.f[i], (const char *)p + 4 * i, 4);
    }
    return r.ps;
}
EMU __m256i emu_mm256_maskz_loadu_epi16(__mmask16 k, const void *p) {
    emu256 r;
    for (int i = 0; i < 16; i++) {
        r.u16[i] = 0;
        if (k >> i & 1) memcpy(&r.u16[i], (const char *)p + 2 * i, 2);
    }
    return r.si;
}

#define EMU_PS2(name, expr)                                                   \
    EMU __m512 name(__m512 a_, __m512 b_) {                                   \
        emu512 a = {.ps = a_}, b = {.ps = b_}, r;                             \
        for (int i = 0; i < 16; i++) r.f[i] = (expr);                         \
        return r.ps;                                                          \
    }
EMU_PS2(emu_mm512_add_ps, a.f[i] + b.f[i])
EMU_PS2(emu_mm512_mul_ps, a.f[i] * b.f[i])
EMU_PS2(emu_mm512_max_ps, a.f[i] > b.f[i] ? a.f[i] : b.f[i])

EMU __m512 emu_mm512_fmadd_ps(__m512 a_, __m512 b_, __m512 c_) {
    emu512 a = {.ps = a_}, b = {.ps = b_}, c = {.ps = c_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = fmaf(a.f[i], b.f[i], c.f[i]);
    return r.ps;
}
EMU __m512 emu_mm512_mask_add_ps(__m512 src_, __mmask16 k, __m512 a_, __m512 b_) {
    emu512 s = {.ps = src_}, a = {.ps = a_}, b = {.ps = b_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = k >> i & 1 ? a.f[i] + b.f[i] : s.f[i];
    return r.ps;
}
/* Lanes whose mask bit is set come from b. */
EMU __m512 emu_mm512_mask_blend_ps(__mmask16 k, __m512 a_, __m512 b_) {
    emu512 a = {.ps = a_}, b = {.ps = b_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = k >> i & 1 ? b.f[i] : a.f[i];
    return r.ps;
}
EMU __m512 emu_mm512_abs_ps(__m512 a_) {
    emu512 a = {.ps = a_};
    for (int i = 0; i < 16; i++) a.u32[i] &= 0x7fffffffu;
    return a.ps;
}
EMU float emu_mm512_reduce_max_ps(__m512 a_) {
    emu512 a = {.ps = a_};
    float m = a.f[0];
    for (int i = 1; i < 16; i++) m = a.f[i] > m ? a.f[i] : m;
    return m;
}

EMU __m256 emu_mm512_castps512_ps256(__m512 a_) {
    emu512 a = {.ps = a_};
    emu256 r;
    memcpy(&r, &a, 32);
    return r.ps;
}
EMU __m512 emu_mm512_castps256_ps512(__m256 a_) {
    emu256 a = {.ps = a_};
    emu512 r;
    memset(&r, 0, sizeof r);   /* upper half undefined in hardware */
    memcpy(&r, &a, 32);
    return r.ps;
}
EMU __m512d emu_mm512_castps_pd(__m512 a_) { emu512 a = {.ps = a_}; return a.pd; }
EMU __m512 emu_mm512_castsi512_ps(__m512i a_) { emu512 a = {.si = a_}; return a.ps; }
EMU __m512i emu_mm512_castsi256_si512(__m256i a_) {
    emu256 a = {.si = a_};
    emu512 r;
    memset(&r, 0, sizeof r);
    memcpy(&r, &a, 32);
    return r.si;
}
EMU __m256d emu_mm512_extractf64x4_pd(__m512d a_, int imm) {
    emu512 a = {.pd = a_};
    emu256 r;
    memcpy(&r, a.u8 + 32 * (imm & 1), 32);
    return r.pd;
}
EMU __m512i emu_mm512_inserti64x4(__m512i a_, __m256i b_, int imm) {
    emu512 a = {.si = a_};
    emu256 b = {.si = b_};
    memcpy(a.u8 + 32 * (imm & 1), &b, 32);
    return a.si;
}

EMU __m512i emu_mm512_slli_epi32(__m512i a_, unsigned imm) {
    emu512 a = {.si = a_};
    for (int i = 0; i < 16; i++) a.u32[i] = imm > 31 ? 0 : a.u32[i] << imm;
    return a.si;
}
EMU __m512i emu_mm512_add_epi32(__m512i a_, __m512i b_) {
    emu512 a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 16; i++) a.u32[i] += b.u32[i];
    return a.si;
}
EMU __m512i emu_mm512_srai_epi32(__m512i a_, unsigned imm) {
    emu512 a = {.si = a_};
    for (int i = 0; i < 16; i++) a.i32[i] = a.i32[i] >> (imm > 31 ? 31 : imm);
    return a.si;
}
EMU __m512i emu_mm512_sub_epi32(__m512i a_, __m512i b_) {
    emu512 a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 16; i++) a.u32[i] -= b.u32[i];
    return a.si;
}
EMU __m512i emu_mm512_cvtepu16_epi32(__m256i a_) {
    emu256 a = {.si = a_};
    emu512 r;
    for (int i = 0; i < 16; i++) r.u32[i] = a.u16[i];
    return r.si;
}
EMU __m512 emu_mm512_cvtepi32_ps(__m512i a_) {
    emu512 a = {.si = a_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = (float)a.i32[i];
    return r.ps;
}
/* Round to nearest even; NaN and out of range give INT32_MIN. */
EMU __m512i emu_mm512_cvtps_epi32(__m512 a_) {
    emu512 a = {.ps = a_}, r;
    for (int i = 0; i < 16; i++) {
        float v = nearbyintf(a.f[i]);
        r.i32[i] = v >= -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN;
    }
    return r.si;
}
EMU __m128i emu_mm512_cvtsepi32_epi8(__m512i a_) {
    emu512 a = {.si = a_};
    emu128 r;
    for (int i = 0; i < 16; i++) r.i8[i] = (int8_t)(a.i32[i] > 127 ? 127 : a.i32[i] < -128 ? -128 : a.i32[i]);
    return r.si;
}

/* Per 32-bit lane: src + sum of 4 products of unsigned bytes of a and
 * signed bytes of b (no saturation). */
EMU __m512i emu_mm512_dpbusd_epi32(__m512i src_, __m512i a_, __m512i b_) {
    emu512 s = {.si = src_}, a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 16; i++) {
        int32_t p = 0;
        for (int k = 0; k < 4; k++) p += (int32_t)a.u8[4 * i + k] * b.i8[4 * i + k];
        s.u32[i] += (uint32_t)p;
    }
    return s.si;
}
EMU __m256i emu_mm256_dpbusd_epi32(__m256i src_, __m256i a_, __m256i b_) {
    emu256 s = {.si = src_}, a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 8; i++) {
        int32_t p = 0;
        for (int k = 0; k < 4; k++) p += (int32_t)a.u8[4 * i + k] * b.i8[4 * i + k];
        s.i32[i] = (int32_t)((uint32_t)s.i32[i] + (uint32_t)p);
    }
    return s.si;
}
EMU __m512i emu_mm512_mask_sub_epi8(__m512i src_, __mmask64 k, __m512i a_, __m512i b_) {
    emu512 s = {.si = src_}, a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 64; i++)
        if (k >> i & 1) s.u8[i] = (uint8_t)(a.u8[i] - b.u8[i]);
    return s.si;
}
EMU __m512i emu_mm512_abs_epi8(__m512i a_) {
    emu512 a = {.si = a_};
    for (int i = 0; i < 64; i++) a.u8[i] = (uint8_t)(a.i8[i] < 0 ? -a.i8[i] : a.i8[i]);
    return a.si;
}
EMU __mmask64 emu_mm512_movepi8_mask(__m512i a_) {
    emu512 a = {.si = a_};
    __mmask64 k = 0;
    for (int i = 0; i < 64; i++) k |= (__mmask64)(a.u8[i] >> 7) << i;
    return k;
}
EMU __m512i emu_mm512_and_si512(__m512i a_, __m512i b_) {
    emu512 a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 8; i++) a.i64[i] &= b.i64[i];
    return a.si;
}
/* Counts over 15 give 0, as the instruction does. */
EMU __m512i emu_mm512_srlv_epi16(__m512i a_, __m512i c_) {
    emu512 a = {.si = a_}, c = {.si = c_};
    for (int i = 0; i < 32; i++) a.u16[i] = c.u16[i] > 15 ? 0 : (uint16_t)(a.u16[i] >> c.u16[i]);
    return a.si;
}
EMU __m512i emu_mm512_srli_epi16(__m512i a_, unsigned imm) {
    emu512 a = {.si = a_};
    for (int i = 0; i < 32; i++) a.u16[i] = imm > 15 ? 0 : (uint16_t)(a.u16[i] >> imm);
    return a.si;
}
/* Arguments from the highest element down, as _mm512_set_*. */
EMU __m512i emu_mm512_set_epi64(long long e7, long long e6, long long e5, long long e4,
                                long long e3, long long e2, long long e1, long long e0) {
    emu512 r;
    const long long e[8] = {e0, e1, e2, e3, e4, e5, e6, e7};
    for (int i = 0; i < 8; i++) r.i64[i] = e[i];
    return r.si;
}
EMU __m512i emu_mm512_set_epi32(int e15, int e14, int e13, int e12, int e11, int e10, int e9, int e8,
                                int e7, int e6, int e5, int e4, int e3, int e2, int e1, int e0) {
    emu512 r;
    const int e[16] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15};
    for (int i = 0; i < 16; i++) r.i32[i] = e[i];
    return r.si;
}
/* r[i] = a[idx[i] & 15] */
EMU __m512 emu_mm512_permutexvar_ps(__m512i idx_, __m512 a_) {
    emu512 idx = {.si = idx_}, a = {.ps = a_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = a.f[idx.u32[i] & 15];
    return r.ps;
}
/* The upper 384 bits are undefined in the instruction; zero here. */
EMU __m512 emu_mm512_castps128_ps512(__m128 a) {
    emu512 r;
    memset(&r, 0, sizeof r);
    memcpy(&r, &a, sizeof a);
    return r.ps;
}

/* 128-bit lanes 0, 1 from a, 2, 3 from b, each picked by two bits of imm */
EMU __m512 emu_mm512_shuffle_f32x4(__m512 a_, __m512 b_, int imm) {
    emu512 a = {.ps = a_}, b = {.ps = b_}, r;
    for (int l = 0; l < 4; l++) {
        const emu512 *src = l < 2 ? &a : &b;
        memcpy(r.f + 4 * l, src->f + 4 * ((imm >> (2 * l)) & 3), 16);
    }
    return r.ps;
}
/* the same move of 128-bit lanes, on integer vectors */
EMU __m512i emu_mm512_shuffle_i64x2(__m512i a_, __m512i b_, int imm) {
    emu512 a = {.si = a_}, b = {.si = b_}, r = {.ps = emu_mm512_shuffle_f32x4(a.ps, b.ps, imm)};
    return r.si;
}
/* r[i] = idx[i] bit 4 ? b[idx[i] & 15] : a[idx[i] & 15] */
EMU __m512i emu_mm512_permutex2var_epi32(__m512i a_, __m512i idx_, __m512i b_) {
    emu512 a = {.si = a_}, idx = {.si = idx_}, b = {.si = b_}, r;
    for (int i = 0; i < 16; i++) r.u32[i] = (idx.u32[i] & 16 ? b : a).u32[idx.u32[i] & 15];
    return r.si;
}
EMU void emu_mm512_storeu_si512(void *p, __m512i a) { memcpy(p, &a, 64); }
EMU void emu_mm512_storeu_ps(void *p, __m512 a) { memcpy(p, &a, 64); }
/* within each 128-bit lane: r[j] = a[(imm >> 2j) & 3] */
EMU __m512 emu_mm512_permute_ps(__m512 a_, int imm) {
    emu512 a = {.ps = a_}, r;
    for (int l = 0; l < 4; l++)
        for (int j = 0; j < 4; j++) r.f[4 * l + j] = a.f[4 * l + ((imm >> (2 * j)) & 3)];
    return r.ps;
}
EMU __m128 emu_mm512_castps512_ps128(__m512 a_) {
    emu512 a = {.ps = a_};
    __m128 r;
    memcpy(&r, a.f, sizeof r);
    return r;
}

/* Zero-masked byte load: only the bytes selected by k are read. */
EMU __m512i emu_mm512_maskz_loadu_epi8(__mmask64 k, const void *p) {
    emu512 r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 64; i++)
        if (k >> i & 1) r.u8[i] = ((const uint8_t *)p)[i];
    return r.si;
}
/* r[i] = a[idx[i] & 31], 16-bit elements */
EMU __m512i emu_mm512_permutexvar_epi16(__m512i idx_, __m512i a_) {
    emu512 idx = {.si = idx_}, a = {.si = a_}, r;
    for (int i = 0; i < 32; i++) r.u16[i] = a.u16[idx.u16[i] & 31];
    return r.si;
}
EMU __m512i emu_mm512_xor_si512(__m512i a_, __m512i b_) {
    emu512 a = {.si = a_}, b = {.si = b_};
    for (int i = 0; i < 8; i++) a.i64[i] ^= b.i64[i];
    return a.si;
}
EMU __m256i emu_mm512_castsi512_si256(__m512i a_) {
    emu512 a = {.si = a_};
    emu256 r;
    memcpy(&r, &a, sizeof r);
    return r.si;
}
/* 16 binary16 values to fp32 (F16C, exact) */
EMU __m512 emu_mm512_cvtph_ps(__m256i a_) {
    emu256 a = {.si = a_};
    emu512 r;
    for (int h = 0; h < 2; h++) {
        const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a.u16 + 8 * h)));
        memcpy(r.f + 8 * h, &v, sizeof v);
    }
    return r.ps;
}
/* k set: a * b + c with one rounding; else c */
EMU __m512 emu_mm512_mask3_fmadd_ps(__m512 a_, __m512 b_, __m512 c_, __mmask16 k) {
    emu512 a = {.ps = a_}, b = {.ps = b_}, c = {.ps = c_};
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) c.f[i] = fmaf(a.f[i], b.f[i], c.f[i]);
    return c.ps;
}

#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4 emu_mm512_shuffle_f32x4
#undef _mm512_permute_ps
#define _mm512_permute_ps emu_mm512_permute_ps
#undef _mm512_castps512_ps128
#define _mm512_castps512_ps128 emu_mm512_castps512_ps128
#undef _mm512_setzero_ps
#define _mm512_setzero_ps emu_mm512_setzero_ps
#undef _mm512_setzero_si512
#define _mm512_setzero_si512 emu_mm512_setzero_si512
#undef _mm512_set1_ps
#define _mm512_set1_ps emu_mm512_set1_ps
#undef _mm512_set1_epi8
#define _mm512_set1_epi8 emu_mm512_set1_epi8
#undef _mm512_loadu_ps
#define _mm512_loadu_ps emu_mm512_loadu_ps
#undef _mm512_loadu_si512
#define _mm512_loadu_si512 emu_mm512_loadu_si512
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps emu_mm512_maskz_loadu_ps
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 emu_mm256_maskz_loadu_epi16
#undef _mm512_add_ps
#define _mm512_add_ps emu_mm512_add_ps
#undef _mm512_mul_ps
#define _mm512_mul_ps emu_mm512_mul_ps
#undef _mm512_max_ps
#define _mm512_max_ps emu_mm512_max_ps
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps emu_mm512_fmadd_ps
#undef _mm512_mask_add_ps
#define _mm512_mask_add_ps emu_mm512_mask_add_ps
#undef _mm512_mask_blend_ps
#define _mm512_mask_blend_ps emu_mm512_mask_blend_ps
#undef _mm512_abs_ps
#define _mm512_abs_ps emu_mm512_abs_ps
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps emu_mm512_reduce_max_ps
#undef _mm512_castps512_ps256
#define _mm512_castps512_ps256 emu_mm512_castps512_ps256
#undef _mm512_castps256_ps512
#define _mm512_castps256_ps512 emu_mm512_castps256_ps512
#undef _mm512_castps_pd
#define _mm512_castps_pd emu_mm512_castps_pd
#undef _mm512_castsi512_ps
#define _mm512_castsi512_ps emu_mm512_castsi512_ps
#undef _mm512_castsi256_si512
#define _mm512_castsi256_si512 emu_mm512_castsi256_si512
#undef _mm512_extractf64x4_pd
#define _mm512_extractf64x4_pd emu_mm512_extractf64x4_pd
#undef _mm512_inserti64x4
#define _mm512_inserti64x4 emu_mm512_inserti64x4
#undef _mm512_srli_epi16
#define _mm512_srli_epi16 emu_mm512_srli_epi16
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 emu_mm512_slli_epi32
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 emu_mm512_sub_epi32
#undef _mm512_add_epi32
#define _mm512_add_epi32 emu_mm512_add_epi32
#undef _mm512_srai_epi32
#define _mm512_srai_epi32 emu_mm512_srai_epi32
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 emu_mm512_cvtepu16_epi32
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps emu_mm512_cvtepi32_ps
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32 emu_mm512_cvtps_epi32
#undef _mm512_cvtsepi32_epi8
#define _mm512_cvtsepi32_epi8 emu_mm512_cvtsepi32_epi8
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32 emu_mm512_dpbusd_epi32
#undef _mm256_dpbusd_epi32
#define _mm256_dpbusd_epi32 emu_mm256_dpbusd_epi32
#undef _mm256_dpbusd_avx_epi32
#define _mm256_dpbusd_avx_epi32 emu_mm256_dpbusd_epi32
#undef _mm512_mask_sub_epi8
#define _mm512_mask_sub_epi8 emu_mm512_mask_sub_epi8
#undef _mm512_abs_epi8
#define _mm512_abs_epi8 emu_mm512_abs_epi8
#undef _mm512_movepi8_mask
#define _mm512_movepi8_mask emu_mm512_movepi8_mask
#undef _mm512_and_si512
#define _mm512_and_si512 emu_mm512_and_si512
#undef _mm512_srlv_epi16
#define _mm512_srlv_epi16 emu_mm512_srlv_epi16
#undef _mm512_set_epi64
#define _mm512_set_epi64 emu_mm512_set_epi64
#undef _mm512_set_epi32
#define _mm512_set_epi32 emu_mm512_set_epi32
#undef _mm512_permutexvar_ps
#define _mm512_permutexvar_ps emu_mm512_permutexvar_ps
#undef _mm512_castps128_ps512
#define _mm512_castps128_ps512 emu_mm512_castps128_ps512

#undef _mm512_maskz_loadu_epi8
#define _mm512_maskz_loadu_epi8 emu_mm512_maskz_loadu_epi8
#undef _mm512_permutexvar_epi16
#define _mm512_permutexvar_epi16 emu_mm512_permutexvar_epi16
#undef _mm512_xor_si512
#define _mm512_xor_si512 emu_mm512_xor_si512
#undef _mm512_castsi512_si256
#define _mm512_castsi512_si256 emu_mm512_castsi512_si256
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps emu_mm512_cvtph_ps
#undef _mm512_mask3_fmadd_ps
#define _mm512_mask3_fmadd_ps emu_mm512_mask3_fmadd_ps
#undef _mm512_shuffle_i64x2
#define _mm512_shuffle_i64x2 emu_mm512_shuffle_i64x2
#undef _mm512_permutex2var_epi32
#define _mm512_permutex2var_epi32 emu_mm512_permutex2var_epi32
#undef _mm512_storeu_si512
#define _mm512_storeu_si512 emu_mm512_storeu_si512
#undef _mm512_storeu_ps
#define _mm512_storeu_ps emu_mm512_storeu_ps

#endif
