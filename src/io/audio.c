/*
 * audio.c - reference-audio decoding (strict RIFF/WAVE walker, libsndfile
 * for FLAC/Ogg/MP3) and librosa-compatible resampling with libsoxr.
 *
 * The rules enforced and the exact scaling are listed in audio.h. Design:
 *
 *  - The WAV walker reads only through rd_u16/rd_u32 on offsets it has
 *    already checked against len; a chunk's extent is min(declared, left),
 *    so no size from the file is ever added to a pointer unchecked. It
 *    stops at the first "data" chunk, allocates frames*4 bytes for the mono
 *    output only after the decoded-size rule passed, and converts one frame
 *    at a time (no interleaved copy).
 *  - libsndfile reads from the caller's buffer through a virtual-IO
 *    reader; the format is sniffed from the magic bytes first so that only
 *    the FLAC, Ogg and MPEG parsers ever see client bytes. Frames are pulled
 *    in blocks and the size cap is enforced on what was actually decoded.
 *  - Resampling repeats python-soxr's csoxr_divide_proc<float> call for
 *    call (same chunking, same output capacity), then librosa's fix_length.
 */
#include "audio.h"

#include <math.h>
#include <string.h>

#include <sndfile.h>
#include <soxr.h>

void qtts_audio_limits_init(qtts_audio_limits *l) {
    l->min_seconds = 1.0;
    l->max_seconds = 30.0;
    l->max_decoded_bytes = QTTS_AUDIO_MAX_DECODED;
    l->allow_compressed = true;
}

void qtts_audio_free(qtts_audio *a) {
    if (!a) return;
    qtts_free(a->samples);
    memset(a, 0, sizeof(*a));
}

static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static bool id_is(const uint8_t *p, const char *id) { return memcmp(p, id, 4) == 0; }

static bool id_printable(const uint8_t *p) {
    for (int i = 0; i < 4; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) return false;
    return true;
}

/* Fixed bytes 2..15 of the KSDATAFORMAT_SUBTYPE_* GUIDs (bytes 0..1 hold
 * the format tag). */
static const uint8_t ks_guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                         0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};

typedef struct {
    int tag;           /* 1 PCM, 3 float (after resolving EXTENSIBLE) */
    int channels, rate, bits, block_align;
} wav_fmt;

static qtts_status parse_fmt(const uint8_t *p, size_t size, wav_fmt *f, qtts_err *err) {
    if (size < 16)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "WAV: fmt chunk shorter than 16 bytes (%zu bytes in the buffer)", size);
    int tag = rd_u16(p);
    f->channels = rd_u16(p + 2);
    uint32_t rate = rd_u32(p + 4);
    f->block_align = rd_u16(p + 12);
    f->bits = rd_u16(p + 14);
    if (tag == 0xFFFE) {
        if (size < 40)
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "WAV: EXTENSIBLE fmt chunk shorter than 40 bytes (%zu)", size);
        unsigned cb = rd_u16(p + 16), valid = rd_u16(p + 18);
        if (cb < 22)
            return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: EXTENSIBLE fmt cbSize %u < 22", cb);
        if (valid > (unsigned)f->bits)
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "WAV: EXTENSIBLE valid bits %u > container bits %d", valid, f->bits);
        if (memcmp(p + 26, ks_guid_tail, sizeof ks_guid_tail) != 0)
            return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                             "WAV: EXTENSIBLE sub-format GUID is not PCM or IEEE float");
        tag = rd_u16(p + 24);
    }
    if (tag != 1 && tag != 3)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "WAV: unsupported encoding (format tag 0x%04x); only PCM (1), IEEE "
                         "float (3) and EXTENSIBLE of those", tag);
    f->tag = tag;
    if (f->channels == 0) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: 0 channels");
    if (f->channels > QTTS_AUDIO_MAX_CHANNELS)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "WAV: %d channels; 1 or 2 supported",
                         f->channels);
    if (rate == 0) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: sample rate 0 Hz");
    if (rate < QTTS_AUDIO_MIN_RATE || rate > QTTS_AUDIO_MAX_RATE)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "WAV: sample rate %u Hz outside %d-%d Hz", rate, QTTS_AUDIO_MIN_RATE,
                         QTTS_AUDIO_MAX_RATE);
    f->rate = (int)rate;
    if (tag == 1 && f->bits != 8 && f->bits != 16 && f->bits != 24 && f->bits != 32)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "WAV: %d-bit PCM; 8, 16, 24 or 32-bit supported", f->bits);
    if (tag == 3 && f->bits != 32)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "WAV: %d-bit float; 32-bit supported",
                         f->bits);
    if (f->block_align == 0) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: block_align 0");
    if (f->block_align != f->channels * f->bits / 8)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "WAV: block_align %d != channels*bits/8 = %d", f->block_align,
                         f->channels * f->bits / 8);
    return QTTS_OK;
}

static inline float wav_sample(const uint8_t *p, int tag, int bits) {
    if (tag == 3) {
        union { uint32_t u; float f; } v;
        v.u = rd_u32(p);
        return v.f;
    }
    switch (bits) {
    case 8: return (float)((int)p[0] - 128) * (1.0f / 128.0f);
    case 16: return (float)(int16_t)rd_u16(p) * (1.0f / 32768.0f);
    case 24: {
        int32_t x = (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16));
        if (x & 0x800000) x -= 0x1000000;
        return (float)x * (1.0f / 8388608.0f);
    }
    default: return (float)(int32_t)rd_u32(p) * (1.0f / 2147483648.0f);
    }
}

static qtts_status check_decoded_size(size_t frames, int channels, size_t max_bytes,
                                      const char *what, qtts_err *err) {
    uint64_t bytes;
    if (!qtts_mul_ok(frames, (uint64_t)channels * sizeof(float), &bytes) || bytes > max_bytes)
        return qtts_fail(err, QTTS_ERR_LIMIT,
                         "%s: decoded audio over %zu bytes (%zu frames x %d channels x 4 bytes)",
                         what, max_bytes, frames, channels);
    return QTTS_OK;
}

qtts_status qtts_wav_parse(const uint8_t *buf, size_t len, size_t max_decoded_bytes,
                           qtts_audio *out, qtts_err *err) {
    memset(out, 0, sizeof(*out));
    if (!max_decoded_bytes) max_decoded_bytes = QTTS_AUDIO_MAX_DECODED;
    if (!buf || len < 12)
        return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: shorter than the 12-byte RIFF header");
    if (id_is(buf, "RIFX") || id_is(buf, "RF64"))
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "WAV: %.4s files are not supported (RIFF only)",
                         (const char *)buf);
    if (!id_is(buf, "RIFF")) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: no RIFF header");
    if (!id_is(buf + 8, "WAVE"))
        return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: RIFF form type is not WAVE");

    wav_fmt fmt = {0};
    bool have_fmt = false;
    size_t pos = 12;
    for (int nchunk = 0;; nchunk++) {
        if (len - pos < 8)
            return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: no data chunk before the end of the buffer");
        if (nchunk == QTTS_WAV_MAX_CHUNKS)
            return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: more than %d chunks before the data chunk",
                             QTTS_WAV_MAX_CHUNKS);
        const uint8_t *id = buf + pos;
        if (!id_printable(id))
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "WAV: chunk id at offset %zu is not ASCII (odd-sized chunk without "
                             "its pad byte, or a wrong chunk size)", pos);
        const uint32_t declared = rd_u32(buf + pos + 4);
        pos += 8;
        const size_t left = len - pos;
        if (id_is(id, "data")) {
            if (!have_fmt)
                return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: data chunk before the fmt chunk");
            size_t dsize = (declared == 0xFFFFFFFFu || declared > left) ? left : declared;
            size_t frames = dsize / (size_t)fmt.block_align;
            if (frames == 0) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: data chunk holds no frames");
            qtts_status st = check_decoded_size(frames, fmt.channels, max_decoded_bytes, "WAV", err);
            if (st) return st;
            float *s = qtts_malloc(frames * sizeof(float));
            if (!s) return qtts_fail(err, QTTS_ERR_NOMEM, "WAV: out of memory for %zu frames", frames);
            const uint8_t *p = buf + pos;
            const int bps = fmt.bits / 8;
            for (size_t i = 0; i < frames; i++, p += fmt.block_align) {
                float a = wav_sample(p, fmt.tag, fmt.bits);
                float b = fmt.channels == 2 ? wav_sample(p + bps, fmt.tag, fmt.bits) : 0.0f;
                if (!isfinite(a) || !isfinite(b)) {
                    qtts_free(s);
                    return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: non-finite float sample in frame %zu",
                                     i);
                }
                s[i] = fmt.channels == 2 ? (a + b) * 0.5f : a;
            }
            out->samples = s;
            out->n = frames;
            out->sample_rate = fmt.rate;
            out->channels = fmt.channels;
            out->bits = fmt.bits;
            out->container = fmt.tag == 3 ? QTTS_AUDIO_WAV_FLOAT : QTTS_AUDIO_WAV_PCM;
            return QTTS_OK;
        }
        const size_t csize = declared < left ? declared : left;
        if (id_is(id, "fmt ")) {
            if (have_fmt) return qtts_fail(err, QTTS_ERR_FORMAT, "WAV: second fmt chunk");
            qtts_status st = parse_fmt(buf + pos, csize, &fmt, err);
            if (st) return st;
            have_fmt = true;
        }
        pos += csize;
        if ((declared & 1u) && pos < len) pos++;   /* pad byte */
    }
}

/* ---- libsndfile: FLAC / Ogg / MP3 from memory ---------------------------- */

typedef struct {
    const uint8_t *buf;
    sf_count_t len, pos;
} memio;

static sf_count_t mio_len(void *u) { return ((memio *)u)->len; }
static sf_count_t mio_tell(void *u) { return ((memio *)u)->pos; }
static sf_count_t mio_seek(sf_count_t off, int whence, void *u) {
    memio *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
    sf_count_t np;
    if (__builtin_add_overflow(base, off, &np)) return -1;
    if (np < 0) np = 0;
    if (np > m->len) np = m->len;
    m->pos = np;
    return np;
}
static sf_count_t mio_read(void *dst, sf_count_t count, void *u) {
    memio *m = u;
    if (count <= 0) return 0;
    sf_count_t n = m->len - m->pos;
    if (count < n) n = count;
    memcpy(dst, m->buf + m->pos, (size_t)n);
    m->pos += n;
    return n;
}
static sf_count_t mio_write(const void *src, sf_count_t count, void *u) { return 0; }

static int sniff_compressed(const uint8_t *b, size_t len) {
    if (len >= 4 && id_is(b, "fLaC")) return SF_FORMAT_FLAC;
    if (len >= 4 && id_is(b, "OggS")) return SF_FORMAT_OGG;
    if (len >= 3 && memcmp(b, "ID3", 3) == 0) return SF_FORMAT_MPEG;
    if (len >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0) return SF_FORMAT_MPEG;
    return 0;
}

static qtts_status sndfile_decode(const uint8_t *buf, size_t len, int major, size_t max_bytes,
                                  qtts_audio *out, qtts_err *err) {
    const char *name = major == SF_FORMAT_FLAC ? "FLAC" : major == SF_FORMAT_OGG ? "Ogg" : "MP3";
    memio m = {buf, (sf_count_t)len, 0};
    SF_VIRTUAL_IO vio = {mio_len, mio_seek, mio_read, mio_write, mio_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &m);
    if (!sf)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: cannot decode (%.120s)", name,
                         sf_error_number(sf_error(NULL)));
    qtts_status st = QTTS_OK;
    float *s = NULL, *blk = NULL;
    size_t n = 0, cap = 0;
    if ((info.format & SF_FORMAT_TYPEMASK) != major) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: libsndfile reads it as another format (0x%x)",
                       name, (unsigned)(info.format & SF_FORMAT_TYPEMASK));
        goto done;
    }
    if (info.channels <= 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: %d channels", name, info.channels);
        goto done;
    }
    if (info.channels > QTTS_AUDIO_MAX_CHANNELS) {
        st = qtts_fail(err, QTTS_ERR_UNSUPPORTED, "%s: %d channels; 1 or 2 supported", name,
                       info.channels);
        goto done;
    }
    if (info.samplerate < QTTS_AUDIO_MIN_RATE || info.samplerate > QTTS_AUDIO_MAX_RATE) {
        st = qtts_fail(err, QTTS_ERR_UNSUPPORTED, "%s: sample rate %d Hz outside %d-%d Hz", name,
                       info.samplerate, QTTS_AUDIO_MIN_RATE, QTTS_AUDIO_MAX_RATE);
        goto done;
    }
    const int ch = info.channels;
    enum { BLK = 4096 };
    blk = qtts_malloc(sizeof(float) * BLK * QTTS_AUDIO_MAX_CHANNELS);
    if (!blk) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, blk, BLK);
        if (got <= 0) break;
        const size_t g = (size_t)got;
        if ((st = check_decoded_size(n + g, ch, max_bytes, name, err))) goto done;
        if (n + g > cap) {
            size_t nc = cap ? cap * 2 : 65536;
            while (nc < n + g) nc *= 2;
            const size_t max_frames = max_bytes / (sizeof(float) * (size_t)ch);
            if (nc > max_frames) nc = max_frames;
            float *t = qtts_realloc(s, nc * sizeof(float));
            if (!t) {
                st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory for %zu frames", name, nc);
                goto done;
            }
            s = t;
            cap = nc;
        }
        for (size_t i = 0; i < g; i++) {
            float a = blk[i * ch], b = ch == 2 ? blk[i * ch + 1] : 0.0f;
            if (!isfinite(a) || !isfinite(b)) {
                st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: non-finite sample in frame %zu", name,
                               n + i);
                goto done;
            }
            s[n + i] = ch == 2 ? (a + b) * 0.5f : a;
        }
        n += g;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: decode error (%.120s)", name, sf_strerror(sf));
        goto done;
    }
    if (n == 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: no audio frames", name);
        goto done;
    }
    out->samples = s;
    out->n = n;
    out->sample_rate = info.samplerate;
    out->channels = ch;
    switch (info.format & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_S8: out->bits = 8; break;
    case SF_FORMAT_PCM_16: out->bits = 16; break;
    case SF_FORMAT_PCM_24: out->bits = 24; break;
    default: out->bits = 0; break;
    }
    out->container = major == SF_FORMAT_FLAC ? QTTS_AUDIO_FLAC
                     : major == SF_FORMAT_OGG ? QTTS_AUDIO_OGG
                                              : QTTS_AUDIO_MP3;
    s = NULL;
done:
    qtts_free(blk);
    qtts_free(s);
    sf_close(sf);
    return st;
}

qtts_status qtts_audio_decode(const uint8_t *buf, size_t len, const qtts_audio_limits *lim,
                              qtts_audio *out, qtts_err *err) {
    qtts_audio_limits def;
    if (!lim) {
        qtts_audio_limits_init(&def);
        lim = &def;
    }
    memset(out, 0, sizeof(*out));
    const size_t max_bytes = lim->max_decoded_bytes ? lim->max_decoded_bytes : QTTS_AUDIO_MAX_DECODED;
    qtts_status st;
    if (buf && len >= 4 && (id_is(buf, "RIFF") || id_is(buf, "RIFX") || id_is(buf, "RF64"))) {
        st = qtts_wav_parse(buf, len, max_bytes, out, err);
    } else {
        const int major = buf ? sniff_compressed(buf, len) : 0;
        if (!major)
            return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                             "audio: unrecognised format (WAV, FLAC, Ogg Vorbis/Opus or MP3 expected)");
        if (!lim->allow_compressed)
            return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "audio: only WAV accepted here");
        st = sndfile_decode(buf, len, major, max_bytes, out, err);
    }
    if (st) return st;
    const double secs = (double)out->n / out->sample_rate;
    if (lim->min_seconds > 0 && secs < lim->min_seconds) {
        qtts_audio_free(out);
        return qtts_fail(err, QTTS_ERR_LIMIT, "audio: %.3f s is shorter than the %g s minimum", secs,
                         lim->min_seconds);
    }
    if (lim->max_seconds > 0 && secs > lim->max_seconds) {
        qtts_audio_free(out);
        return qtts_fail(err, QTTS_ERR_LIMIT, "audio: %.3f s is longer than the %g s maximum", secs,
                         lim->max_seconds);
    }
    return QTTS_OK;
}

/* ---- resampling ----------------------------------------------------------- */

size_t qtts_resample_len(size_t n, int sr_in, int sr_out) {
    if (sr_in == sr_out) return n;
    const double ratio = (double)sr_out / (double)sr_in;
    return (size_t)ceil((double)n * ratio);
}

qtts_status qtts_resample(const float *in, size_t n, int sr_in, int sr_out, float **out,
                          size_t *n_out, qtts_err *err) {
    *out = NULL;
    *n_out = 0;
    if (sr_in < 1000 || sr_in > 384000 || sr_out < 1000 || sr_out > 384000)
        return qtts_fail(err, QTTS_ERR_INVALID, "resample: rates %d -> %d Hz outside 1000-384000",
                         sr_in, sr_out);
    if (n == 0) return qtts_fail(err, QTTS_ERR_INVALID, "resample: empty input");
    if (n > ((size_t)1 << 31)) return qtts_fail(err, QTTS_ERR_LIMIT, "resample: %zu samples", n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(in[i]))
            return qtts_fail(err, QTTS_ERR_INVALID, "resample: non-finite sample %zu", i);
    const size_t want = qtts_resample_len(n, sr_in, sr_out);
    if (sr_in == sr_out) {
        float *y = qtts_malloc(n * sizeof(float));
        if (!y) return qtts_fail(err, QTTS_ERR_NOMEM, "resample: out of memory");
        memcpy(y, in, n * sizeof(float));
        *out = y;
        *n_out = n;
        return QTTS_OK;
    }
    /* python-soxr csoxr_divide_proc<float>: capacity and chunk size
     * computed in double and truncated, exactly as there. */
    const double ri = sr_in, ro = sr_out;
    const size_t olen = (size_t)((double)n * ro / ri + 1);
    const size_t chunk = (size_t)(48000 * ri / ro);
    const size_t cap = olen > want ? olen : want;
    float *y = qtts_calloc(cap, sizeof(float));
    if (!y) return qtts_fail(err, QTTS_ERR_NOMEM, "resample: out of memory for %zu samples", cap);

    soxr_error_t serr = NULL;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_t sx = soxr_create(ri, ro, 1, &serr, &io, &q, NULL);
    if (serr || !sx) {
        qtts_free(y);
        return qtts_fail(err, QTTS_ERR_NOMEM, "resample: soxr_create failed (%.100s)",
                         serr ? serr : "no error text");
    }
    size_t pos = 0, done = 0;
    for (size_t i = 0; i < n && !serr; i += chunk) {
        const size_t c = chunk < n - i ? chunk : n - i;
        serr = soxr_process(sx, in + i, c, NULL, y + pos, olen - pos, &done);
        pos += done;
    }
    if (!serr) {
        serr = soxr_process(sx, NULL, 0, NULL, y + pos, olen - pos, &done);
        pos += done;
    }
    soxr_delete(sx);
    if (serr) {
        qtts_free(y);
        return qtts_fail(err, QTTS_ERR_NOMEM, "resample: soxr_process failed (%.100s)", serr);
    }
    /* librosa fix_length: zero-pad (calloc) or cut to want. */
    for (size_t i = pos; i < want; i++) y[i] = 0.0f;
    *out = y;
    *n_out = want;
    return QTTS_OK;
}

qtts_status qtts_audio_load(const uint8_t *buf, size_t len, const qtts_audio_limits *lim,
                            int sr_out, float **out, size_t *n_out, qtts_err *err) {
    *out = NULL;
    *n_out = 0;
    qtts_audio a;
    qtts_status st = qtts_audio_decode(buf, len, lim, &a, err);
    if (st) return st;
    st = qtts_resample(a.samples, a.n, a.sample_rate, sr_out, out, n_out, err);
    qtts_audio_free(&a);
    return st;
}
