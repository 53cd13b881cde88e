/*
 * kernels_avxvnni.c - the AVX2 kernels with the int8 dot step done by
 * AVX-VNNI (VEX-encoded VPDPBUSD, 256-bit): Alder Lake and later client
 * cores, which have no AVX-512. Same results as kernels_avx2.c, bit for
 * bit; only the instruction that forms the int32 partials differs.
 */
#define QTTS_AVXVNNI 1
#include "kernels_avx2.c"
