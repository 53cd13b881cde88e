/*
 * fuzz_wav.c - libFuzzer harness for the reference-audio path: the strict
 * RIFF/WAVE walker behind qtts_audio_decode (compressed formats off, so
 * only our parser sees the bytes; duration limits off so that every length
 * reaches the decoder), then the resampler on a bounded prefix of what
 * decoded. The decoded-size cap is lowered to 1 MiB to keep each input
 * fast; the cap logic is the same at any value.
 *
 *     make fuzz-wav FUZZ_TIME=60
 *
 * Seeds: tests/fuzz/corpus/wav (every hostile and valid WAV of
 * tests/unit/test_audio.c, written with QTTS_WAV_SEED_DIR).
 */
#include "io/audio.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qtts_audio_limits lim;
    qtts_audio_limits_init(&lim);
    lim.min_seconds = 0;
    lim.max_seconds = 0;
    lim.max_decoded_bytes = (size_t)1 << 20;
    lim.allow_compressed = false;
    qtts_audio a;
    qtts_err err;
    if (qtts_audio_decode(data, size, &lim, &a, &err) != QTTS_OK) {
        if (!err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
        return 0;
    }
    if (!a.samples || a.n == 0 || a.sample_rate < QTTS_AUDIO_MIN_RATE ||
        a.sample_rate > QTTS_AUDIO_MAX_RATE || a.channels < 1 || a.channels > 2)
        __builtin_trap();
    float *y = NULL;
    size_t n = 0;
    const size_t take = a.n < 4096 ? a.n : 4096;
    if (qtts_resample(a.samples, take, a.sample_rate, 24000, &y, &n, &err) == QTTS_OK) {
        if (n != qtts_resample_len(take, a.sample_rate, 24000)) __builtin_trap();
        qtts_free(y);
    }
    qtts_audio_free(&a);
    return 0;
}
