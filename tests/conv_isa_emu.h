/*
 * conv_isa_emu.h - scalar stand-ins for the AVX-512 intrinsics that
 * src/kernels/conv_avx512.c uses beyond those tests/isa_emu.h already
 * provides, so that its lane logic (tile masks, the snake polynomial's
 * quadrant blend and slow-lane fallback) runs bit for bit against the
 * scalar table on CPUs with only AVX2 (`make check-conv-emu`). Each
 * function is written from the instruction's definition in Intel's
 * intrinsics guide. Force-included before the file, like isa_emu.h; it
 * checks logic, not speed or the hardware.
 */
#ifndef QTTS_CONV_ISA_EMU_H
#define QTTS_CONV_ISA_EMU_H

#include <stdlib.h>

#include "isa_emu.h"

EMU __m512 emu_mm512_load_ps(const void *p) {
    emu512 r;
    memcpy(&r, p, 64);
    return r.ps;
}
EMU void emu_mm512_storeu_ps(void *p, __m512 a_) {
    emu512 a = {.ps = a_};
    memcpy(p, &a, 64);
}
/* Masked-off lanes are not written. */
EMU void emu_mm512_mask_storeu_ps(void *p, __mmask16 k, __m512 a_) {
    emu512 a = {.ps = a_};
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((char *)p + 4 * i, &a.f[i], 4);
}
EMU __m512i emu_mm512_set1_epi32(int v) {
    emu512 r;
    for (int i = 0; i < 16; i++) r.i32[i] = v;
    return r.si;
}
/* -(a*b) + c with one rounding. */
EMU __m512 emu_mm512_fnmadd_ps(__m512 a_, __m512 b_, __m512 c_) {
    emu512 a = {.ps = a_}, b = {.ps = b_}, c = {.ps = c_}, r;
    for (int i = 0; i < 16; i++) r.f[i] = fmaf(-a.f[i], b.f[i], c.f[i]);
    return r.ps;
}
/* Only the form the kernel uses: imm = round to nearest even, 0 fraction
 * bits (exceptions suppressed). */
EMU __m512 emu_mm512_roundscale_ps(__m512 a_, int imm) {
    emu512 a = {.ps = a_}, r;
    if (imm != (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)) abort();
    for (int i = 0; i < 16; i++) r.f[i] = nearbyintf(a.f[i]);
    return r.ps;
}
/* Bit i set when a[i] & b[i] != 0. */
EMU __mmask16 emu_mm512_test_epi32_mask(__m512i a_, __m512i b_) {
    emu512 a = {.si = a_}, b = {.si = b_};
    __mmask16 k = 0;
    for (int i = 0; i < 16; i++)
        if (a.u32[i] & b.u32[i]) k |= (__mmask16)(1u << i);
    return k;
}
/* Only the predicate the kernel uses: _CMP_NLE_UQ, !(a <= b), true for NaN. */
EMU __mmask16 emu_mm512_cmp_ps_mask(__m512 a_, __m512 b_, int pred) {
    emu512 a = {.ps = a_}, b = {.ps = b_};
    __mmask16 k = 0;
    if (pred != _CMP_NLE_UQ) abort();
    for (int i = 0; i < 16; i++)
        if (!(a.f[i] <= b.f[i])) k |= (__mmask16)(1u << i);
    return k;
}

#undef _mm512_load_ps
#define _mm512_load_ps emu_mm512_load_ps
#undef _mm512_store_ps
#define _mm512_store_ps emu_mm512_storeu_ps
#undef _mm512_storeu_ps
#define _mm512_storeu_ps emu_mm512_storeu_ps
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps emu_mm512_mask_storeu_ps
#undef _mm512_set1_epi32
#define _mm512_set1_epi32 emu_mm512_set1_epi32
#undef _mm512_fnmadd_ps
#define _mm512_fnmadd_ps emu_mm512_fnmadd_ps
#undef _mm512_roundscale_ps
#define _mm512_roundscale_ps emu_mm512_roundscale_ps
#undef _mm512_test_epi32_mask
#define _mm512_test_epi32_mask emu_mm512_test_epi32_mask
#undef _mm512_cmp_ps_mask
#define _mm512_cmp_ps_mask emu_mm512_cmp_ps_mask

#endif
