/*
 * kernels_neondot.c - the NEON kernels with the int8 partials formed by
 * SDOT (Armv8.2 dot product: Apple M1+, Cortex-A55/A76 and later,
 * Graviton2+). Same results as kernels_neon.c, bit for bit.
 */
#define QTTS_NEON_DOTPROD 1
#include "kernels_neon.c"
