/*
 * test_audio.c - reference-audio decoding and resampling (src/io/audio.h).
 *
 *  - Hostile WAV files, built in memory at test time, one per rule of
 *    audio.h: each must fail with the expected status and a message naming
 *    the rule (a substring match), never crash.
 *  - Valid WAVs of every accepted encoding (u8, s16, s24, s32, f32,
 *    stereo, EXTENSIBLE, streaming 0xFFFFFFFF sizes, pad bytes, extra
 *    chunks) decode bit-exactly to what libsndfile (the reference's
 *    soundfile) returns for the same bytes, mixed to mono as numpy does.
 *  - The committed fixtures tests/fixtures/audio/<name>.wav decode, also
 *    bit-exactly against libsndfile.
 *  - The libsndfile path: FLAC (lossless: exact), Ogg Vorbis/Opus and MP3
 *    written with libsndfile at test time and read back; hostile
 *    compressed inputs fail cleanly.
 *  - Resampling: length rule, argument checks, a band-limited sine, and
 *    the official goldens: every tests/fixtures/golden/<model>/<case>.json
 *    whose inputs.ref_audio names a fixture WAV and whose .safetensors holds
 *    ref_audio_24k (the reference's librosa-resampled input): max abs error
 *    <= 1e-6 (bit-exact with the same libsoxr build).
 *
 * QTTS_WAV_SEED_DIR=<dir> writes every generated WAV there (the fuzzer's
 * seed corpus tests/fuzz/corpus/wav was made this way).
 */
#include "harness.h"
#include "base/json.h"
#include "io/audio.h"
#include "io/safetensors.h"

#include <ctype.h>
#include <dirent.h>
#include <sndfile.h>
#include <stdint.h>

static bool verbose(void) { return getenv("QTTS_TEST_VERBOSE") != NULL; }

/* ---- byte builder --------------------------------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
    if (o->n + n > o->cap) {
        size_t c = o->cap ? o->cap : 256;
        while (c < o->n + n) c *= 2;
        o->b = realloc(o->b, c);
        if (!o->b) abort();
        o->cap = c;
    }
    if (n) memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_u16(bytes *o, unsigned v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(o, b, 2);
}
static void put_u32(bytes *o, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(o, b, 4);
}
static void set_u16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void set_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* A chunk with a declared size and the payload actually written (pad byte
 * appended when pad and n is odd). */
static void chunk(bytes *o, const char *id, uint32_t declared, const void *payload, size_t n,
                  bool pad) {
    put(o, id, 4);
    put_u32(o, declared);
    put(o, payload, n);
    if (pad && (n & 1)) put(o, "", 1);
}

typedef struct {
    int tag, ch, rate, bits, align;  /* align < 0: ch*bits/8 */
    int fmt_size;                    /* 16, 18 or 40 */
    int ext_tag, ext_valid, ext_cb;  /* EXTENSIBLE: sub-format tag, valid bits, cbSize */
} fmtspec;

static size_t fmt_payload(uint8_t out[40], const fmtspec *f) {
    bytes b = {0};
    const int align = f->align >= 0 ? f->align : f->ch * f->bits / 8;
    put_u16(&b, (unsigned)f->tag);
    put_u16(&b, (unsigned)f->ch);
    put_u32(&b, (uint32_t)f->rate);
    put_u32(&b, (uint32_t)f->rate * (uint32_t)align);
    put_u16(&b, (unsigned)align);
    put_u16(&b, (unsigned)f->bits);
    if (f->fmt_size >= 18) put_u16(&b, f->fmt_size == 40 ? (unsigned)f->ext_cb : 0);
    if (f->fmt_size == 40) {
        static const uint8_t tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                         0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};
        put_u16(&b, (unsigned)f->ext_valid);
        put_u32(&b, f->ch == 2 ? 3 : 4);
        put_u16(&b, (unsigned)f->ext_tag);
        put(&b, tail, sizeof tail);
    }
    const size_t n = b.n;
    memcpy(out, b.b, n);
    free(b.b);
    return n;
}

/* RIFF/WAVE with fmt then data (sizes as written). */
static bytes make_wav(const fmtspec *f, const void *data, size_t n) {
    bytes o = {0};
    uint8_t fp[40];
    const size_t fn = fmt_payload(fp, f);
    put(&o, "RIFF", 4);
    put_u32(&o, 0);
    put(&o, "WAVE", 4);
    chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
    chunk(&o, "data", (uint32_t)n, data, n, true);
    set_u32(o.b + 4, (uint32_t)(o.n - 8));
    return o;
}

static int g_seed_no;
static void dump_seed(const char *name, const uint8_t *b, size_t n) {
    const char *dir = getenv("QTTS_WAV_SEED_DIR");
    if (!dir || n > 65536) return;   /* the fuzzer's -max_len */
    char safe[64], p[512];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof safe; k++)
        safe[k] = (isalnum((unsigned char)name[k]) || name[k] == '-') ? name[k] : '-';
    safe[k] = 0;
    snprintf(p, sizeof p, "%s/%03d-%s", dir, g_seed_no++, safe);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

/* Integer PCM / float payload of frames*ch random samples. */
static bytes random_payload(int tag, int bits, size_t samples) {
    bytes o = {0};
    for (size_t i = 0; i < samples; i++) {
        const uint32_t r = rnd();
        if (tag == 3) {
            const float v = ((float)(r & 0xffffff) / 8388608.0f - 1.0f) * 1.5f;
            put(&o, &v, 4);
        } else {
            const uint8_t b[4] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16), (uint8_t)(r >> 24)};
            put(&o, b, (size_t)bits / 8);
        }
    }
    /* extremes in the first samples */
    if (tag == 1 && samples >= 2) {
        const int bps = bits / 8;
        memset(o.b, 0xff, (size_t)bps);                 /* -1 or 255 */
        memset(o.b + bps, 0x00, (size_t)bps);           /* 0 or -128 */
        o.b[bps * 2 - 1] = bits == 8 ? 0 : 0x80;        /* most negative */
    }
    return o;
}

/* ---- libsndfile on a memory buffer (read and write) ------------------------ */

typedef struct {
    uint8_t *b;
    sf_count_t len, pos, cap;
} vmem;

static sf_count_t vm_len(void *u) { return ((vmem *)u)->len; }
static sf_count_t vm_tell(void *u) { return ((vmem *)u)->pos; }
static sf_count_t vm_seek(sf_count_t off, int wh, void *u) {
    vmem *m = u;
    sf_count_t p = wh == SEEK_SET ? off : wh == SEEK_CUR ? m->pos + off : m->len + off;
    if (p < 0) p = 0;
    m->pos = p;
    return p;
}
static sf_count_t vm_read(void *dst, sf_count_t n, void *u) {
    vmem *m = u;
    sf_count_t k = m->pos < m->len ? m->len - m->pos : 0;
    if (n < k) k = n;
    memcpy(dst, m->b + m->pos, (size_t)k);
    m->pos += k;
    return k;
}
static sf_count_t vm_write(const void *src, sf_count_t n, void *u) {
    vmem *m = u;
    if (m->pos + n > m->cap) {
        sf_count_t c = m->cap ? m->cap : 4096;
        while (c < m->pos + n) c *= 2;
        m->b = realloc(m->b, (size_t)c);
        if (!m->b) abort();
        memset(m->b + m->cap, 0, (size_t)(c - m->cap));
        m->cap = c;
    }
    memcpy(m->b + m->pos, src, (size_t)n);
    m->pos += n;
    if (m->pos > m->len) m->len = m->pos;
    return n;
}

/* What the reference loader returns: sf_readf_float then a float32 mean
 * over channels. NULL when libsndfile refuses. */
static float *sndfile_mono(const uint8_t *b, size_t n, size_t *frames, int *rate) {
    vmem m = {(uint8_t *)b, (sf_count_t)n, 0, 0};
    SF_VIRTUAL_IO vio = {vm_len, vm_seek, vm_read, vm_write, vm_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &m);
    if (!sf) return NULL;
    float *il = malloc(sizeof(float) * (size_t)(info.frames + 1) * (size_t)info.channels);
    float *mono = malloc(sizeof(float) * (size_t)(info.frames + 1));
    sf_count_t got = sf_readf_float(sf, il, info.frames);
    sf_close(sf);
    for (sf_count_t i = 0; i < got; i++)
        mono[i] = info.channels == 2 ? (il[2 * i] + il[2 * i + 1]) * 0.5f : il[i];
    free(il);
    *frames = (size_t)got;
    *rate = info.samplerate;
    return mono;
}

/* Encode interleaved frames with libsndfile into memory: floats, or int16
 * when s16 is non-NULL (libsndfile scales floats by 32767 on write, so
 * only int16 input round-trips exactly through 16-bit FLAC). */
static bool sndfile_write_any(int format, int ch, int rate, const float *il, const int16_t *s16,
                              size_t frames, bytes *out) {
    vmem m = {0};
    SF_VIRTUAL_IO vio = {vm_len, vm_seek, vm_read, vm_write, vm_tell};
    SF_INFO info = {.samplerate = rate, .channels = ch, .format = format};
    if (!sf_format_check(&info)) return false;
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &info, &m);
    if (!sf) {
        free(m.b);
        return false;
    }
    sf_count_t w = s16 ? sf_writef_short(sf, s16, (sf_count_t)frames)
                       : sf_writef_float(sf, il, (sf_count_t)frames);
    sf_close(sf);
    if (w != (sf_count_t)frames) {
        free(m.b);
        return false;
    }
    *out = (bytes){m.b, (size_t)m.len, (size_t)m.cap};
    return true;
}
static bool sndfile_write(int format, int ch, int rate, const float *il, size_t frames, bytes *out) {
    return sndfile_write_any(format, ch, rate, il, NULL, frames, out);
}

/* ---- hostile WAVs ------------------------------------------------------------ */

static void expect_fail(const char *name, const uint8_t *b, size_t n, qtts_status want,
                        const char *substr) {
    dump_seed(name, b, n);
    qtts_audio a;
    qtts_err err = {0};
    qtts_status st = qtts_audio_decode(b, n, NULL, &a, &err);
    CHECK(st == want && strstr(err.msg, substr) != NULL,
          "%s: status %s (want %s), message \"%s\" (want \"%s\")", name, qtts_status_name(st),
          qtts_status_name(want), err.msg, substr);
    CHECK(a.samples == NULL && a.n == 0, "%s: output not cleared", name);
    if (verbose()) fprintf(stderr, "  %-28s -> %s\n", name, err.msg);
    qtts_audio_free(&a);
}

static const fmtspec S16 = {1, 1, 16000, 16, -1, 16, 0, 0, 0};

/* A 0.25 s 16 kHz s16 mono WAV we then patch. Header offsets: 4 RIFF size,
 * 16 fmt size, 20 tag, 22 channels, 24 rate, 32 block_align, 34 bits,
 * 40 data size, 44 data. */
static bytes base_wav(void) {
    bytes d = random_payload(1, 16, 4000);
    bytes w = make_wav(&S16, d.b, d.n);
    free(d.b);
    return w;
}

static void test_hostile_header_fields(void) {
    struct {
        const char *name;
        size_t off;
        int width;       /* 2 or 4 */
        uint32_t value;
        qtts_status want;
        const char *msg;
    } cases[] = {
        {"fmt-size-0", 16, 4, 0, QTTS_ERR_FORMAT, "fmt chunk shorter than 16"},
        {"fmt-size-14", 16, 4, 14, QTTS_ERR_FORMAT, "fmt chunk shorter than 16"},
        {"channels-0", 22, 2, 0, QTTS_ERR_FORMAT, "0 channels"},
        {"channels-3", 22, 2, 3, QTTS_ERR_UNSUPPORTED, "3 channels"},
        {"rate-0", 24, 4, 0, QTTS_ERR_FORMAT, "sample rate 0 Hz"},
        {"rate-7999", 24, 4, 7999, QTTS_ERR_UNSUPPORTED, "outside 8000-48000"},
        {"rate-96000", 24, 4, 96000, QTTS_ERR_UNSUPPORTED, "outside 8000-48000"},
        {"block-align-0", 32, 2, 0, QTTS_ERR_FORMAT, "block_align 0"},
        {"block-align-3", 32, 2, 3, QTTS_ERR_FORMAT, "block_align 3 != channels*bits/8"},
        {"bits-12", 34, 2, 12, QTTS_ERR_UNSUPPORTED, "12-bit PCM"},
        {"bits-0", 34, 2, 0, QTTS_ERR_UNSUPPORTED, "0-bit PCM"},
        {"tag-adpcm", 20, 2, 2, QTTS_ERR_UNSUPPORTED, "format tag 0x0002"},
        {"tag-0", 20, 2, 0, QTTS_ERR_UNSUPPORTED, "format tag 0x0000"},
        {"float-16bit", 20, 2, 3, QTTS_ERR_UNSUPPORTED, "16-bit float"},
        {"data-size-0", 40, 4, 0, QTTS_ERR_FORMAT, "no frames"},
        {"data-size-1", 40, 4, 1, QTTS_ERR_FORMAT, "no frames"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cases); i++) {
        bytes w = base_wav();
        if (cases[i].width == 2) set_u16(w.b + cases[i].off, cases[i].value);
        else set_u32(w.b + cases[i].off, cases[i].value);
        expect_fail(cases[i].name, w.b, w.n, cases[i].want, cases[i].msg);
        free(w.b);
    }
}

static void test_hostile_structure(void) {
    bytes w = base_wav();
    uint8_t fp[40];
    size_t fn = fmt_payload(fp, &S16);
    const uint8_t pcm[64] = {0};

    expect_fail("empty", w.b, 0, QTTS_ERR_UNSUPPORTED, "unrecognised format");
    CHECK(qtts_wav_parse(NULL, 0, 0, &(qtts_audio){0}, NULL) == QTTS_ERR_FORMAT, "NULL buffer");
    expect_fail("riff-11-bytes", w.b, 11, QTTS_ERR_FORMAT, "shorter than the 12-byte");
    expect_fail("riff-header-only", w.b, 12, QTTS_ERR_FORMAT, "no data chunk");
    expect_fail("truncated-in-fmt", w.b, 30, QTTS_ERR_FORMAT, "fmt chunk shorter than 16");
    expect_fail("truncated-before-data", w.b, 40, QTTS_ERR_FORMAT, "no data chunk");
    expect_fail("truncated-data-1-byte", w.b, 45, QTTS_ERR_FORMAT, "no frames");
    memcpy(w.b, "RIFX", 4);
    expect_fail("rifx", w.b, w.n, QTTS_ERR_UNSUPPORTED, "RIFX files are not supported");
    memcpy(w.b, "RF64", 4);
    expect_fail("rf64", w.b, w.n, QTTS_ERR_UNSUPPORTED, "RF64 files are not supported");
    memcpy(w.b, "RIFF", 4);
    memcpy(w.b + 8, "AVI ", 4);
    expect_fail("form-not-wave", w.b, w.n, QTTS_ERR_FORMAT, "not WAVE");
    memcpy(w.b + 8, "WAVE", 4);

    /* fmt declared past EOF: clamped to the 6 bytes that are there */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", 16, fp, 6, false);
        expect_fail("fmt-past-eof", o.b, o.n, QTTS_ERR_FORMAT, "fmt chunk shorter than 16 bytes (6");
        free(o.b);
    }
    /* data before fmt */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        expect_fail("data-before-fmt", o.b, o.n, QTTS_ERR_FORMAT, "data chunk before the fmt");
        free(o.b);
    }
    /* no fmt at all, no data at all, two fmt */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "LIST", 4, "INFO", 4, true);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        expect_fail("no-fmt", o.b, o.n, QTTS_ERR_FORMAT, "data chunk before the fmt");
        free(o.b);
        o = (bytes){0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        expect_fail("no-data", o.b, o.n, QTTS_ERR_FORMAT, "no data chunk");
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        expect_fail("two-fmt", o.b, o.n, QTTS_ERR_FORMAT, "second fmt chunk");
        free(o.b);
    }
    /* 65 chunks before data: the walk stops at the cap */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        for (int i = 0; i < QTTS_WAV_MAX_CHUNKS; i++) chunk(&o, "junk", 2, "ab", 2, true);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        expect_fail("65-chunks", o.b, o.n, QTTS_ERR_FORMAT, "more than 64 chunks");
        free(o.b);
        /* 63 junk chunks + fmt + data = 65 headers, data is the 65th: refused;
         * 62 junk + fmt + data = 64: accepted */
        o = (bytes){0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        for (int i = 0; i < QTTS_WAV_MAX_CHUNKS - 2; i++) chunk(&o, "junk", 2, "ab", 2, true);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        qtts_audio a;
        qtts_err err = {0};
        CHECK(qtts_wav_parse(o.b, o.n, 0, &a, &err) == QTTS_OK && a.n == sizeof pcm / 2,
              "64 chunks must be accepted: %s", err.msg);
        qtts_audio_free(&a);
        free(o.b);
    }
    /* a chunk claiming ~4 GiB: clamped to the buffer, the walk ends */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "junk", 0xFFFFFFF0u, pcm, sizeof pcm, false);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        expect_fail("huge-chunk-size", o.b, o.n, QTTS_ERR_FORMAT, "no data chunk");
        free(o.b);
    }
    /* odd-sized chunk written without its pad byte */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "LIST", 3, "abc", 3, false);
        chunk(&o, "data", sizeof pcm, pcm, sizeof pcm, true);
        expect_fail("odd-chunk-no-pad", o.b, o.n, QTTS_ERR_FORMAT, "not ASCII");
        free(o.b);
    }
    /* non-ASCII chunk id */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "\x01\x02\x03\x04", 4, "abcd", 4, true);
        expect_fail("binary-chunk-id", o.b, o.n, QTTS_ERR_FORMAT, "not ASCII");
        free(o.b);
    }
    free(w.b);
}

static void test_hostile_extensible_and_float(void) {
    const uint8_t pcm[96] = {0};
    struct {
        const char *name;
        fmtspec f;
        qtts_status want;
        const char *msg;
    } cases[] = {
        {"ext-fmt-18-bytes", {0xFFFE, 1, 16000, 16, -1, 18, 1, 16, 22}, QTTS_ERR_FORMAT,
         "EXTENSIBLE fmt chunk shorter than 40"},
        {"ext-cbsize-0", {0xFFFE, 1, 16000, 16, -1, 40, 1, 16, 0}, QTTS_ERR_FORMAT, "cbSize 0 < 22"},
        {"ext-valid-bits", {0xFFFE, 1, 16000, 16, -1, 40, 1, 24, 22}, QTTS_ERR_FORMAT,
         "valid bits 24 > container bits 16"},
        {"ext-guid-adpcm", {0xFFFE, 1, 16000, 16, -1, 40, 2, 16, 22}, QTTS_ERR_UNSUPPORTED,
         "format tag 0x0002"},
        {"ext-float-64", {0xFFFE, 1, 16000, 64, -1, 40, 3, 64, 22}, QTTS_ERR_UNSUPPORTED,
         "64-bit float"},
        {"float-64", {3, 1, 16000, 64, -1, 16, 0, 0, 0}, QTTS_ERR_UNSUPPORTED, "64-bit float"},
        {"ext-3ch", {0xFFFE, 3, 16000, 16, -1, 40, 1, 16, 22}, QTTS_ERR_UNSUPPORTED, "3 channels"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cases); i++) {
        bytes w = make_wav(&cases[i].f, pcm, sizeof pcm);
        if (i == 0) set_u16(w.b + 20 + 16, 22); /* cbSize claims 22 in an 18-byte chunk */
        expect_fail(cases[i].name, w.b, w.n, cases[i].want, cases[i].msg);
        free(w.b);
    }
    /* bad GUID tail */
    {
        fmtspec f = {0xFFFE, 1, 16000, 16, -1, 40, 1, 16, 22};
        bytes w = make_wav(&f, pcm, sizeof pcm);
        w.b[20 + 30] ^= 0x55;
        expect_fail("ext-guid-tail", w.b, w.n, QTTS_ERR_UNSUPPORTED, "GUID");
        free(w.b);
    }
    /* non-finite float samples */
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        float v[48] = {0};
        v[17] = bad[k];
        fmtspec f = {3, 1, 16000, 32, -1, 16, 0, 0, 0};
        bytes w = make_wav(&f, v, sizeof v);
        expect_fail(k == 0 ? "float-nan" : k == 1 ? "float-inf" : "float-neg-inf", w.b, w.n,
                    QTTS_ERR_FORMAT, "non-finite float sample in frame 17");
        free(w.b);
        f.ch = 2;
        w = make_wav(&f, v, sizeof v);
        expect_fail("float-stereo-nan", w.b, w.n, QTTS_ERR_FORMAT, "non-finite float sample in frame 8");
        free(w.b);
    }
}

static void test_size_and_duration_limits(void) {
    /* decoded size: 48 kHz stereo float, 35 s = 13.4 MB > 12 MiB */
    {
        const size_t frames = 48000 * 35;
        bytes o = {0};
        uint8_t fp[40];
        fmtspec f = {3, 2, 48000, 32, -1, 16, 0, 0, 0};
        size_t fn = fmt_payload(fp, &f);
        put(&o, "RIFF\xff\xff\xff\xffWAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        put(&o, "data", 4);
        put_u32(&o, (uint32_t)(frames * 8));
        const size_t hdr = o.n;
        o.b = realloc(o.b, hdr + frames * 8);
        memset(o.b + hdr, 0, frames * 8);
        o.n = hdr + frames * 8;
        qtts_audio a;
        qtts_err err = {0};
        qtts_status st = qtts_audio_decode(o.b, o.n, NULL, &a, &err);
        CHECK(st == QTTS_ERR_LIMIT && strstr(err.msg, "decoded audio over 12582912 bytes"),
              "35 s 48 kHz stereo float: %s", err.msg);
        /* the same data at 12 MiB exactly is fine for the parser */
        qtts_audio_limits lim;
        qtts_audio_limits_init(&lim);
        lim.max_seconds = 0;
        const size_t ok_frames = QTTS_AUDIO_MAX_DECODED / 8;
        st = qtts_audio_decode(o.b, hdr + ok_frames * 8, &lim, &a, &err);
        CHECK(st == QTTS_OK && a.n == ok_frames, "exactly 12 MiB: %s", err.msg);
        qtts_audio_free(&a);
        /* a small cap passed to the parser */
        CHECK(qtts_wav_parse(o.b, o.n, 1000, &a, &err) == QTTS_ERR_LIMIT, "cap 1000: %s", err.msg);
        free(o.b);
    }
    /* duration: 0.1 s and 31 s refused by default, accepted with limits off;
     * a header claiming 2 h over a short buffer is clamped to what is there */
    {
        bytes d = random_payload(1, 8, 800);
        fmtspec f = {1, 1, 8000, 8, -1, 16, 0, 0, 0};
        bytes w = make_wav(&f, d.b, d.n);
        expect_fail("duration-0.1s", w.b, w.n, QTTS_ERR_LIMIT, "0.100 s is shorter than the 1 s minimum");
        qtts_audio_limits lim;
        qtts_audio_limits_init(&lim);
        lim.min_seconds = 0;
        qtts_audio a;
        qtts_err err = {0};
        CHECK(qtts_audio_decode(w.b, w.n, &lim, &a, &err) == QTTS_OK && a.n == 800, "%s", err.msg);
        qtts_audio_free(&a);
        free(w.b);
        free(d.b);
        d = random_payload(1, 8, 8000 * 31);
        w = make_wav(&f, d.b, d.n);
        expect_fail("duration-31s", w.b, w.n, QTTS_ERR_LIMIT, "31.000 s is longer than the 30 s maximum");
        set_u32(w.b + 40, 8000u * 7200u);  /* claims 2 h */
        expect_fail("duration-2h-truncated", w.b, w.n, QTTS_ERR_LIMIT, "31.000 s is longer");
        CHECK(qtts_wav_parse(w.b, 44 + 8000 * 2, 0, &a, &err) == QTTS_OK && a.n == 16000,
              "2 h header over 2 s of data decodes 2 s: %s", err.msg);
        qtts_audio_free(&a);
        free(w.b);
        free(d.b);
    }
}

/* ---- valid WAVs decode exactly -------------------------------------------- */

static void check_exact(const char *name, const uint8_t *b, size_t n, size_t want_frames,
                        int want_rate) {
    dump_seed(name, b, n);
    qtts_audio a;
    qtts_err err = {0};
    qtts_status st = qtts_wav_parse(b, n, 0, &a, &err);
    CHECK(st == QTTS_OK, "%s: %s", name, err.msg);
    if (st) return;
    CHECK(a.n == want_frames && a.sample_rate == want_rate, "%s: %zu frames @ %d Hz", name, a.n,
          a.sample_rate);
    size_t rf = 0;
    int rr = 0;
    float *ref = sndfile_mono(b, n, &rf, &rr);
    CHECK(ref != NULL, "%s: libsndfile cannot read it", name);
    if (ref) {
        CHECK(rf == a.n && rr == a.sample_rate, "%s: libsndfile %zu frames @ %d Hz", name, rf, rr);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < a.n && i < rf; i++)
            if (memcmp(&a.samples[i], &ref[i], 4) != 0 && !bad++) first = i;
        CHECK(bad == 0, "%s: %zu samples differ from libsndfile (first %zu: %.9g vs %.9g)", name,
              bad, first, a.samples[first], ref[first]);
        free(ref);
    }
    qtts_audio_free(&a);
}

static void test_valid_encodings(void) {
    struct {
        const char *name;
        fmtspec f;
    } cases[] = {
        {"u8-mono", {1, 1, 8000, 8, -1, 16, 0, 0, 0}},
        {"s16-mono", {1, 1, 16000, 16, -1, 16, 0, 0, 0}},
        {"s16-mono-fmt18", {1, 1, 22050, 16, -1, 18, 0, 0, 0}},
        {"s24-mono", {1, 1, 24000, 24, -1, 16, 0, 0, 0}},
        {"s32-mono", {1, 1, 32000, 32, -1, 16, 0, 0, 0}},
        {"f32-mono", {3, 1, 44100, 32, -1, 16, 0, 0, 0}},
        {"u8-stereo", {1, 2, 11025, 8, -1, 16, 0, 0, 0}},
        {"s16-stereo", {1, 2, 44100, 16, -1, 16, 0, 0, 0}},
        {"s24-stereo", {1, 2, 48000, 24, -1, 16, 0, 0, 0}},
        {"f32-stereo", {3, 2, 48000, 32, -1, 16, 0, 0, 0}},
        {"ext-s16-stereo", {0xFFFE, 2, 16000, 16, -1, 40, 1, 16, 22}},
        {"ext-s24-mono", {0xFFFE, 1, 24000, 24, -1, 40, 1, 24, 22}},
        {"ext-s32-valid24", {0xFFFE, 1, 48000, 32, -1, 40, 1, 24, 22}},
        {"ext-f32-stereo", {0xFFFE, 2, 32000, 32, -1, 40, 3, 32, 22}},
    };
    const size_t frames = 1001; /* odd: exercises the data pad byte */
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cases); i++) {
        const fmtspec *f = &cases[i].f;
        const int tag = f->tag == 0xFFFE ? f->ext_tag : f->tag;
        bytes d = random_payload(tag, f->bits, frames * (size_t)f->ch);
        bytes w = make_wav(f, d.b, d.n);
        check_exact(cases[i].name, w.b, w.n, frames, f->rate);
        /* independent check of the scaling on mono integer PCM */
        if (f->ch == 1 && tag == 1) {
            qtts_audio a;
            qtts_err err = {0};
            if (qtts_wav_parse(w.b, w.n, 0, &a, &err) == QTTS_OK) {
                for (size_t k = 0; k < 2; k++) {
                    const uint8_t *p = d.b + k * (size_t)(f->bits / 8);
                    double want;
                    if (f->bits == 8) want = (p[0] - 128) / 128.0;
                    else {
                        int64_t v = 0;
                        for (int j = f->bits / 8 - 1; j >= 0; j--) v = (v << 8) | p[j];
                        if (v & ((int64_t)1 << (f->bits - 1))) v -= (int64_t)1 << f->bits;
                        want = (double)v / (double)((int64_t)1 << (f->bits - 1));
                    }
                    CHECK(fabs(a.samples[k] - want) <= 1e-9 * (1 + fabs(want)),
                          "%s sample %zu: %.10g vs %.10g", cases[i].name, k, a.samples[k], want);
                }
                CHECK(a.samples[0] >= -1.0f && a.samples[1] >= -1.0f, "%s extremes", cases[i].name);
                qtts_audio_free(&a);
            }
        }
        free(d.b);
        free(w.b);
    }
}

static void test_valid_structures(void) {
    const size_t frames = 500;
    bytes d = random_payload(1, 16, frames);
    uint8_t fp[40];
    size_t fn = fmt_payload(fp, &S16);
    /* streaming writer: RIFF and data sizes 0xFFFFFFFF */
    {
        bytes o = {0};
        put(&o, "RIFF\xff\xff\xff\xffWAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "data", 0xFFFFFFFFu, d.b, d.n, false);
        check_exact("streaming-ffffffff", o.b, o.n, frames, 16000);
        put(&o, "x", 1); /* a trailing partial frame is ignored */
        qtts_audio a;
        qtts_err err = {0};
        CHECK(qtts_wav_parse(o.b, o.n, 0, &a, &err) == QTTS_OK && a.n == frames, "partial frame: %s",
              err.msg);
        qtts_audio_free(&a);
        free(o.b);
    }
    /* RIFF size 0, odd chunks with pad bytes, chunks before fmt and after data */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "JUNK", 5, "abcde", 5, true);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "LIST", 7, "INFOabc", 7, true);
        chunk(&o, "fact", 4, "\xf4\x01\0\0", 4, true);
        chunk(&o, "data", (uint32_t)d.n, d.b, d.n, true);
        chunk(&o, "LIST", 3, "xyz", 3, false);
        check_exact("odd-chunks-padded", o.b, o.n, frames, 16000);
        free(o.b);
    }
    /* data size larger than the buffer: clamped */
    {
        bytes o = {0};
        put(&o, "RIFF\0\0\0\0WAVE", 12);
        chunk(&o, "fmt ", (uint32_t)fn, fp, fn, true);
        chunk(&o, "data", 1u << 30, d.b, d.n, false);
        check_exact("data-size-past-eof", o.b, o.n, frames, 16000);
        free(o.b);
    }
    free(d.b);
}

static void test_fixture_wavs(void) {
    const struct {
        const char *file;
        int rate, channels;
    } fx[] = {
        {"ref_16k_mono.wav", 16000, 1},
        {"ref_24k_mono.wav", 24000, 1},
        {"ref_44k1_stereo.wav", 44100, 2},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(fx); i++) {
        char path[256];
        snprintf(path, sizeof path, QTTS_FIXTURES "/audio/%s", fx[i].file);
        char *buf = NULL;
        size_t len = 0;
        qtts_err err = {0};
        REQUIRE(qtts_read_file(path, 64u << 20, &buf, &len, &err) == QTTS_OK, "%s", err.msg);
        qtts_audio a;
        CHECK(qtts_audio_decode((uint8_t *)buf, len, NULL, &a, &err) == QTTS_OK, "%s: %s", path,
              err.msg);
        CHECK(a.sample_rate == fx[i].rate && a.channels == fx[i].channels && a.bits == 16,
              "%s: %d Hz %d ch %d bits", path, a.sample_rate, a.channels, a.bits);
        qtts_audio_free(&a);
        check_exact(fx[i].file, (uint8_t *)buf, len, (len - 44) / (2 * (size_t)fx[i].channels),
                    fx[i].rate);
        qtts_free(buf);
    }
}

/* ---- libsndfile formats ------------------------------------------------------ */

static float *sine(size_t frames, int ch, int rate, double hz) {
    float *x = malloc(sizeof(float) * frames * (size_t)ch);
    for (size_t i = 0; i < frames; i++)
        for (int c = 0; c < ch; c++)
            x[i * ch + c] = (float)(0.5 * sin(2 * M_PI * hz * (c + 1) * (double)i / rate));
    return x;
}

static void test_flac_roundtrip(void) {
    /* 16-bit FLAC is lossless for samples on the 1/32768 grid */
    const size_t frames = 24000;
    for (int ch = 1; ch <= 2; ch++) {
        float *x = sine(frames, ch, 16000, 220.0);
        int16_t *s16 = malloc(sizeof(int16_t) * frames * (size_t)ch);
        for (size_t i = 0; i < frames * (size_t)ch; i++) {
            s16[i] = (int16_t)lrintf(x[i] * 32767.0f);
            x[i] = (float)s16[i] / 32768.0f;
        }
        bytes fl = {0};
        const bool wrote = sndfile_write_any(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, ch, 16000, NULL,
                                             s16, frames, &fl);
        free(s16);
        REQUIRE(wrote, "libsndfile cannot write FLAC");
        CHECK(fl.n > 4 && memcmp(fl.b, "fLaC", 4) == 0, "FLAC magic");
        qtts_audio a;
        qtts_err err = {0};
        qtts_status st = qtts_audio_decode(fl.b, fl.n, NULL, &a, &err);
        CHECK(st == QTTS_OK, "FLAC decode: %s", err.msg);
        if (!st) {
            CHECK(a.container == QTTS_AUDIO_FLAC && a.n == frames && a.sample_rate == 16000 &&
                      a.channels == ch && a.bits == 16,
                  "FLAC: %zu frames %d Hz %d ch %d bits", a.n, a.sample_rate, a.channels, a.bits);
            size_t bad = 0;
            for (size_t i = 0; i < a.n && i < frames; i++) {
                const float want = ch == 2 ? (x[2 * i] + x[2 * i + 1]) * 0.5f : x[i];
                bad += a.samples[i] != want;
            }
            CHECK(bad == 0, "FLAC %d ch: %zu samples not exact", ch, bad);
        }
        qtts_audio_free(&a);
        /* only WAV when compressed input is disallowed */
        qtts_audio_limits lim;
        qtts_audio_limits_init(&lim);
        lim.allow_compressed = false;
        CHECK(qtts_audio_decode(fl.b, fl.n, &lim, &a, &err) == QTTS_ERR_UNSUPPORTED,
              "allow_compressed=false: %s", err.msg);
        /* truncated FLAC: decodes a prefix or fails, never crashes */
        st = qtts_audio_decode(fl.b, fl.n / 2, NULL, &a, &err);
        CHECK(st == QTTS_OK || st == QTTS_ERR_FORMAT || st == QTTS_ERR_LIMIT, "truncated FLAC: %s",
              err.msg);
        qtts_audio_free(&a);
        free(fl.b);
        free(x);
    }
    /* FLAC outside our limits */
    const struct { int ch, rate; qtts_status want; const char *msg; } bad[] = {
        {3, 16000, QTTS_ERR_UNSUPPORTED, "3 channels"},
        {1, 96000, QTTS_ERR_UNSUPPORTED, "sample rate 96000 Hz"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(bad); i++) {
        float *x = sine(48000, bad[i].ch, bad[i].rate, 300);
        bytes fl = {0};
        if (sndfile_write(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, bad[i].ch, bad[i].rate, x, 48000, &fl))
            expect_fail(bad[i].msg, fl.b, fl.n, bad[i].want, bad[i].msg);
        free(fl.b);
        free(x);
    }
}

static void test_lossy_formats(void) {
    const struct {
        const char *name;
        int format;
        qtts_audio_container c;
    } fm[] = {
        {"ogg-vorbis", SF_FORMAT_OGG | SF_FORMAT_VORBIS, QTTS_AUDIO_OGG},
        {"ogg-opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, QTTS_AUDIO_OGG},
        {"mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, QTTS_AUDIO_MP3},
    };
    const size_t frames = 48000 * 2;
    float *x = sine(frames, 1, 48000, 440.0);
    for (size_t i = 0; i < QTTS_ARRAY_LEN(fm); i++) {
        bytes e = {0};
        if (!sndfile_write(fm[i].format, 1, 48000, x, frames, &e)) {
            fprintf(stderr, "  note: this libsndfile cannot write %s; skipped\n", fm[i].name);
            continue;
        }
        qtts_audio a;
        qtts_err err = {0};
        qtts_status st = qtts_audio_decode(e.b, e.n, NULL, &a, &err);
        CHECK(st == QTTS_OK, "%s: %s", fm[i].name, err.msg);
        if (!st) {
            /* lossy codecs add priming/padding: allow 10% length slack */
            CHECK(a.container == fm[i].c && a.sample_rate == 48000 && a.channels == 1 &&
                      a.n > frames * 9 / 10 && a.n < frames * 11 / 10,
                  "%s: %zu frames @ %d Hz", fm[i].name, a.n, a.sample_rate);
            double e2 = 0, s2 = 0;
            for (size_t k = 0; k < a.n; k++) e2 += (double)a.samples[k] * a.samples[k];
            for (size_t k = 0; k < frames; k++) s2 += (double)x[k] * x[k];
            CHECK(e2 > 0.5 * s2 && e2 < 2 * s2, "%s: energy %.3g vs %.3g", fm[i].name, e2, s2);
            if (verbose()) fprintf(stderr, "  %s: %zu bytes -> %zu frames\n", fm[i].name, e.n, a.n);
        }
        qtts_audio_free(&a);
        free(e.b);
    }
    free(x);
}

static void test_hostile_compressed(void) {
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rnd();
    const struct { const char *magic; size_t n; } mg[] = {
        {"fLaC", 4}, {"OggS", 4}, {"ID3", 3}, {"\xff\xfb", 2},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(mg); i++) {
        for (size_t len = mg[i].n; len <= sizeof junk; len = len * 4 + 1) {
            uint8_t b[4096];
            memcpy(b, junk, sizeof b);
            memcpy(b, mg[i].magic, mg[i].n);
            qtts_audio a;
            qtts_err err = {0};
            qtts_status st = qtts_audio_decode(b, len, NULL, &a, &err);
            CHECK(st != QTTS_OK || a.n > 0, "magic %zu len %zu", i, len);
            CHECK(st == QTTS_OK || err.msg[0], "no message");
            qtts_audio_free(&a);
        }
    }
    expect_fail("random-bytes", junk + 1, 100, QTTS_ERR_UNSUPPORTED, "unrecognised format");
    expect_fail("aiff", (const uint8_t *)"FORM\0\0\0\x10" "AIFF" "xxxx", 16, QTTS_ERR_UNSUPPORTED,
                "unrecognised format");
}

/* ---- resampling ---------------------------------------------------------------- */

static void test_resample_basics(void) {
    CHECK(qtts_resample_len(38400 * 2 / 3, 16000, 24000) == 38400, "16k->24k length");
    CHECK(qtts_resample_len(52920, 44100, 24000) == 28801, "44.1k->24k rounds up");
    CHECK(qtts_resample_len(1000, 24000, 24000) == 1000, "equal rates");
    CHECK(qtts_resample_len(1, 48000, 24000) == 1, "ceil(0.5)");
    float *y = NULL;
    size_t n = 0;
    qtts_err err = {0};
    const float x[4] = {0.1f, 0.2f, NAN, 0};
    CHECK(qtts_resample(x, 2, 999, 24000, &y, &n, &err) == QTTS_ERR_INVALID, "rate 999");
    CHECK(qtts_resample(x, 0, 16000, 24000, &y, &n, &err) == QTTS_ERR_INVALID, "empty");
    CHECK(qtts_resample(x, 4, 16000, 24000, &y, &n, &err) == QTTS_ERR_INVALID &&
              strstr(err.msg, "non-finite sample 2"), "NaN: %s", err.msg);
    CHECK(qtts_resample(x, 2, 24000, 24000, &y, &n, &err) == QTTS_OK && n == 2 && y[1] == 0.2f,
          "copy at equal rates");
    qtts_free(y);
    /* a 440 Hz sine keeps its shape (away from the edges) */
    const int rates[] = {8000, 16000, 22050, 44100, 48000};
    for (size_t r = 0; r < QTTS_ARRAY_LEN(rates); r++) {
        const int sr = rates[r];
        const size_t len = (size_t)sr;
        float *s = sine(len, 1, sr, 440.0);
        REQUIRE(qtts_resample(s, len, sr, 24000, &y, &n, &err) == QTTS_OK, "%s", err.msg);
        CHECK(n == qtts_resample_len(len, sr, 24000), "length %zu", n);
        double worst = 0;
        for (size_t i = 200; i + 200 < n; i++)
            worst = fmax(worst, fabs(y[i] - 0.5 * sin(2 * M_PI * 440.0 * (double)i / 24000)));
        CHECK(worst < 1e-3, "%d Hz sine: max error %.3g", sr, worst);
        qtts_free(y);
        free(s);
    }
}

/* Goldens: <case>.json inputs.ref_audio (relative to tests/fixtures) and
 * <case>.safetensors ref_audio_24k: load the WAV, resample, compare. */
static void test_resample_goldens(void) {
    DIR *gd = opendir(QTTS_FIXTURES "/golden");
    if (!gd) {
        fprintf(stderr, "  note: no goldens; resampling golden check skipped\n");
        return;
    }
    int checked = 0;
    struct dirent *me;
    while ((me = readdir(gd))) {
        if (me->d_name[0] == '.') continue;
        char mdir[512];
        snprintf(mdir, sizeof mdir, QTTS_FIXTURES "/golden/%.200s", me->d_name);
        DIR *cd = opendir(mdir);
        if (!cd) continue;
        struct dirent *ce;
        while ((ce = readdir(cd))) {
            const size_t L = strlen(ce->d_name);
            if (L < 6 || strcmp(ce->d_name + L - 5, ".json") != 0) continue;
            char jpath[1024], spath[1024];
            snprintf(jpath, sizeof jpath, "%s/%s", mdir, ce->d_name);
            snprintf(spath, sizeof spath, "%s/%.*s.safetensors", mdir, (int)(L - 5), ce->d_name);
            char *jtxt = NULL;
            size_t jlen = 0;
            qtts_err err = {0};
            if (qtts_read_file(jpath, 1 << 20, &jtxt, &jlen, &err)) continue;
            qtts_json *root = qtts_json_parse(jtxt, jlen, NULL, jpath, &err);
            const qtts_json *in = root ? qtts_json_get(root, "inputs") : NULL;
            const char *ra = in ? qtts_json_get_str(in, "ref_audio") : NULL;
            qtts_st_file *g = NULL;
            const qtts_tensor *gold = NULL;
            if (ra && qtts_st_open(spath, &g, &err) == QTTS_OK)
                gold = qtts_st_find(g, "ref_audio_24k");
            if (gold) {
                char wpath[1024];
                snprintf(wpath, sizeof wpath, QTTS_FIXTURES "/%s", ra);
                char *wb = NULL;
                size_t wl = 0;
                float *y = NULL;
                size_t n = 0;
                CHECK(qtts_read_file(wpath, 64u << 20, &wb, &wl, &err) == QTTS_OK &&
                          qtts_audio_load((uint8_t *)wb, wl, NULL, 24000, &y, &n, &err) == QTTS_OK,
                      "%s: %s", wpath, err.msg);
                if (y) {
                    float *ref = malloc(sizeof(float) * gold->numel);
                    qtts_tensor_to_f32(gold, ref);
                    CHECK(n == gold->numel, "%s: %zu samples vs golden %llu", spath, n,
                          (unsigned long long)gold->numel);
                    const double e = test_max_abs_err(y, ref, QTTS_MIN(n, (size_t)gold->numel), NULL);
                    CHECK(e <= 1e-6, "%s: resampled audio max abs error %.3g", spath, e);
                    if (verbose()) fprintf(stderr, "  %s: resample max abs err %.3g\n", spath, e);
                    checked++;
                    free(ref);
                }
                qtts_free(y);
                qtts_free(wb);
            }
            qtts_st_close(g);
            qtts_json_free(root);
            qtts_free(jtxt);
        }
        closedir(cd);
    }
    closedir(gd);
    if (!checked) fprintf(stderr, "  note: no ref_audio_24k goldens found\n");
}

int main(void) {
    TEST_RUN(test_hostile_header_fields);
    TEST_RUN(test_hostile_structure);
    TEST_RUN(test_hostile_extensible_and_float);
    TEST_RUN(test_size_and_duration_limits);
    TEST_RUN(test_valid_encodings);
    TEST_RUN(test_valid_structures);
    TEST_RUN(test_fixture_wavs);
    TEST_RUN(test_flac_roundtrip);
    TEST_RUN(test_lossy_formats);
    TEST_RUN(test_hostile_compressed);
    TEST_RUN(test_resample_basics);
    TEST_RUN(test_resample_goldens);
    TEST_END();
}
