/*
 * kernels_neondot.c - the NEON kernels with the quantized blocks' integer
 * dots formed by SDOT (Armv8.2 dot product: Apple M1+, Cortex-A55/A76 and
 * later, Graviton2+): on the packed layout (quant.h) one SDOT sums 4 code
 * bytes of 4 blocks, each into its block's own lane. Same results as
 * kernels_neon.c, bit for bit.
 */
#define QTTS_NEON_DOTPROD 1
#include "kernels_neon.c"
