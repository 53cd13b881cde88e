/*
 * tokenizer_unicode.h - Unicode tables of the text tokenizer (internal to
 * tokenizer.c; see tokenizer_unicode.c for where the data comes from).
 */
#ifndef QTTS_TOKENIZER_UNICODE_H
#define QTTS_TOKENIZER_UNICODE_H

#include "../base/base.h"

/* Classes of the pre-tokenizer regex. \p{L} = LU..LO; the classes are
 * disjoint and everything else is OTHER. */
enum {
    QTTS_UC_OTHER = 0,
    QTTS_UC_WS,  /* \s */
    QTTS_UC_LU,
    QTTS_UC_LL,
    QTTS_UC_LT,
    QTTS_UC_LM,
    QTTS_UC_LO,
    QTTS_UC_M,   /* \p{M}: Mn, Mc, Me */
    QTTS_UC_N,   /* \p{N}: Nd, Nl, No */
};

/* Class of code point cp (0..0x10FFFF) per the reference's regex engine. */
int qtts_uc_class(uint32_t cp);

/* True when cp takes part in NFC under Unicode 9.0 (the reference's
 * normalizer data); all other code points are inert starters to it. */
bool qtts_uc_nfc9_relevant(uint32_t cp);

#endif
