/*
 * main.c - the qwen3-tts command line: one binary, several subcommands.
 *
 *   qwen3-tts synth   -m MODEL_DIR --text "..." -o out.wav [options]
 *   qwen3-tts quantize -m MODEL_DIR --quant int8|int4 [--cp int8|int4] -o OUT_DIR
 *   qwen3-tts bench   -m MODEL_DIR [--quant ...] [-j N] [--frames N] [--runs N] [--json]
 *   qwen3-tts inspect -m MODEL_DIR
 *   qwen3-tts serve   -m MODEL_DIR [--host 127.0.0.1] [--port 8080] [options]
 *   qwen3-tts --help | --version
 *
 * This file only turns flags into qtts_request fields and files into
 * buffers; everything else goes through the public API (qwen3_tts.h).
 * It is the only place that prints to the terminal or exits.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "qwen3_tts.h"
#include "base/base.h"
#include "bench.h"
#include "codes_file.h"
#include "server/server.h"

#define QTTS_VERSION "0.1.0"
#define MAX_TEXT_BYTES (1u << 20)

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("qwen3-tts: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage_main(FILE *f) {
    fputs("usage: qwen3-tts <command> [options]\n"
          "\n"
          "commands:\n"
          "  synth     synthesize speech from text (or decode a codes file)\n"
          "  voice     create, inspect and list voice profiles (Base models)\n"
          "  quantize  write an int8/int4 copy of a model directory that loads directly\n"
          "  bench     per-stage speed, time to first audio, RTF and memory, against\n"
          "            this machine's measured bandwidth and FMA peak\n"
          "  inspect   list a model directory's configuration and tensors\n"
          "  serve     HTTP server: OpenAI /v1/audio/speech, native /v1/tts, /health, /metrics\n"
          "\n"
          "Run 'qwen3-tts <command> --help' for the options of a command.\n",
          f);
}

static void usage_synth(FILE *f) {
    fputs(
        "usage: qwen3-tts synth -m MODEL_DIR (--text TEXT | --text-file FILE|-) -o OUT.wav [options]\n"
        "\n"
        "input and output:\n"
        "  -m, --model DIR          Hugging Face model directory (required)\n"
        "  -t, --text TEXT          text to speak\n"
        "      --text-file FILE     read the text from FILE ('-' = stdin)\n"
        "  -o, --output FILE        output WAV ('-' = stdout); default out.wav\n"
        "      --raw                write raw 16-bit little-endian PCM (24 kHz mono) instead of WAV,\n"
        "                           streamed as it is produced (with --stream: within a few frames)\n"
        "      --stream             low-latency audio: decode as frames are generated, the first\n"
        "                           audio after 1 frame, then after 2, 4, 8, 12, 12, ... more (the\n"
        "                           same samples, bit for bit, as the default 300-frame windows)\n"
        "      --stream-chunk N     frames per decode when streaming (default 12; implies --stream)\n"
        "      --stream-first N     frames before the first audio (default 1)\n"
        "      --serial-codec       on 2+ threads, decode the audio between two frames on all\n"
        "                           threads, not beside generation on one (the same samples;\n"
        "                           beside is faster where generation waits on memory)\n"
        "      --f32                write 32-bit float samples (WAV format 3, or raw f32le with --raw)\n"
        "      --speed X            speak X times faster (0.25-4; below 1 slower) at the same pitch;\n"
        "                           the codes are unchanged (default 1)\n"
        "      --codes-out FILE     also write the generated codes (one frame per line, 16 ints)\n"
        "      --codes-in FILE      skip generation: decode the codes in FILE to audio\n"
        "voice:\n"
        "  -s, --speaker NAME       preset speaker (CustomVoice models)\n"
        "  -l, --language NAME      language, or 'auto' (default)\n"
        "  -i, --instruct TEXT      style instruction (1.7B CustomVoice) or voice description (VoiceDesign)\n"
        "      --list-speakers      print the model's speakers and exit\n"
        "voice cloning (Base models):\n"
        "      --ref-audio FILE     reference recording (WAV, FLAC, MP3, Ogg; 1-30 s)\n"
        "      --ref-text TEXT      its transcript: in-context cloning (without it: x-vector only)\n"
        "      --x-vector-only      use only the speaker embedding, even with --ref-text\n"
        "      --voice FILE         a voice profile made by 'qwen3-tts voice create' or --save-voice\n"
        "      --save-voice FILE    also save the cloned voice as a profile for reuse\n"
        "      --list-languages     print the model's languages and exit\n"
        "generation:\n"
        "      --streaming-text     feed the text one token per frame (the reference's streaming text mode)\n"
        "      --non-streaming-text put the whole text in the prompt (default for CustomVoice/VoiceDesign)\n"
        "      --greedy             argmax decoding in both the talker and the code predictor\n"
        "      --seed N             sampling seed (default 0)\n"
        "      --temperature X      talker temperature (default from generation_config.json)\n"
        "      --top-k N            talker top-k (0 = off)\n"
        "      --top-p X            talker top-p (1 = off)\n"
        "      --repetition-penalty X\n"
        "      --subtalker-temperature X, --subtalker-top-k N, --subtalker-top-p X\n"
        "      --subtalker-greedy   argmax in the code predictor only\n"
        "      --max-frames N       stop after N frames (12.5 frames per second)\n"
        "      --max-seconds X      stop after X seconds of audio\n"
        "weights:\n"
        "      --quant Q            talker and code-predictor linear layers as Q: int8 or int4,\n"
        "                           quantized at load (or 'none'; default: as stored). Output is\n"
        "                           then not bit-exact to the reference (docs/QUANT.md)\n"
        "      --quant-talker Q, --quant-cp Q   the same per component (mixed allowed)\n"
        "      --codec F            codec decoder convolutions: fp32 (default, exact) or bf16\n"
        "                           (about 1.8x faster on CPUs with AVX512-BF16 or AArch64 BF16;\n"
        "                           lossy, docs/QUANT.md)\n"
        "      --kv-cache F         the talker's KV cache: f32 or bf16 (half the bytes, faster\n"
        "                           long outputs; default bf16 with --quant, else f32)\n"
        "      --check-weights      scan every weight for NaN/infinity at load and refuse the\n"
        "                           model naming the tensor (reads all the weights once)\n"
        "other:\n"
        "      --backend NAME       where the model runs: cpu (default) or cuda (a build with\n"
        "                           the CUDA backend, 'make cuda')\n"
        "  -j, --threads N          worker threads (default: all cores)\n"
        "  -q, --quiet              no progress output\n"
        "  -h, --help\n",
        f);
}

/* ---- strict number parsing ---------------------------------------------- */

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die("%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, s);
    return v;
}

static unsigned long long parse_u64(const char *flag, const char *s) {
    char *end;
    errno = 0;
    if (s[0] == '-') die("%s: expected a non-negative integer, got '%s'", flag, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end) die("%s: expected a non-negative integer, got '%s'", flag, s);
    return v;
}

static float parse_float(const char *flag, const char *s, double lo, double hi, bool lo_open) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v > hi || v < lo || (lo_open && v == lo))
        die("%s: expected a number in %c%g, %g], got '%s'", flag, lo_open ? '(' : '[', lo, hi, s);
    return (float)v;
}

/* ---- text input ----------------------------------------------------------- */

static char *read_stream(FILE *f, const char *what) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) die("out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= MAX_TEXT_BYTES) die("%s: text is longer than %u bytes", what, MAX_TEXT_BYTES);
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) die("out of memory");
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) die("%s: read error", what);
    buf[n] = 0;
    if (strlen(buf) != n) die("%s: text contains a NUL byte", what);
    return buf;
}

static char *read_text_file(const char *path) {
    if (strcmp(path, "-") == 0) return read_stream(stdin, "stdin");
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    char *t = read_stream(f, path);
    fclose(f);
    return t;
}

#define MAX_AUDIO_FILE_BYTES (64u << 20)

static void *read_binary_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) die("out of memory");
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_AUDIO_FILE_BYTES) die("%s: file is larger than %u bytes", path, MAX_AUDIO_FILE_BYTES);
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) die("out of memory");
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) die("%s: read error", path);
    if (f != stdin) fclose(f);
    *len = n;
    return buf;
}

/* ---- synth ----------------------------------------------------------------- */

typedef struct {
    /* accumulated PCM (WAV output) or streamed (raw output) */
    float *pcm;
    size_t n, cap;
    FILE *raw;
    bool f32;
    /* codes output */
    FILE *codes_out;
    /* progress */
    bool progress;
    int frames;
    double t0;
    double t_first;       /* first audio, 0 until then */
    int max_frames;
} synth_sink;

static int on_audio(void *user, const float *pcm, size_t n) {
    synth_sink *s = user;
    if (!s->t_first && n) s->t_first = qtts_cli_now();
    if (s->raw) {
        qtts_error err;
        (void)err;
        if (s->f32) {
            if (fwrite(pcm, sizeof(float), n, s->raw) != n) return 1;
        } else {
            int16_t buf[1024];
            for (size_t i = 0; i < n;) {
                size_t m = n - i < 1024 ? n - i : 1024;
                for (size_t j = 0; j < m; j++) {
                    float x = pcm[i + j];
                    if (!(x == x)) x = 0;
                    x = x > 1 ? 1 : x < -1 ? -1 : x;
                    buf[j] = (int16_t)lrintf(x * 32767.0f);
                }
                if (fwrite(buf, 2, m, s->raw) != m) return 1;
                i += m;
            }
        }
        fflush(s->raw);
        return 0;
    }
    if (s->n + n > s->cap) {
        size_t nc = s->cap ? s->cap : 65536;
        while (nc < s->n + n) nc *= 2;
        float *np = realloc(s->pcm, nc * sizeof(float));
        if (!np) return 1;
        s->pcm = np;
        s->cap = nc;
    }
    memcpy(s->pcm + s->n, pcm, n * sizeof(float));
    s->n += n;
    return 0;
}

static int on_frame(void *user, int idx, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    synth_sink *s = user;
    s->frames = idx + 1;
    if (s->codes_out && qtts_codes_write_frame(s->codes_out, codes) != 0) return 1;
    if (s->progress) {
        double el = qtts_cli_now() - s->t0;
        fprintf(stderr, "\rgenerating: %d frames (%.2f s of audio) in %.1f s", s->frames,
                s->frames / 12.5, el);
        if (s->max_frames > 0) fprintf(stderr, " [max %d]", s->max_frames);
        fflush(stderr);
    }
    return 0;
}

static int cmd_synth(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *text_file = NULL, *out = "out.wav";
    const char *codes_out = NULL, *codes_in = NULL, *backend = NULL;
    const char *ref_audio = NULL, *voice_in = NULL, *voice_out = NULL;
    const char *quant_talker = NULL, *quant_cp = NULL, *codec = NULL, *kv_cache = NULL;
    bool check_weights = false, serial_codec = false;
    bool raw = false, f32 = false, quiet = false, list_spk = false, list_lang = false;
    int max_frames = -1, threads = 0;
    double max_seconds = -1;
    qtts_request req;
    qtts_request_init(&req);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage_synth(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = NEXT();
        else if (!strcmp(a, "-t") || !strcmp(a, "--text")) text = NEXT();
        else if (!strcmp(a, "--text-file")) text_file = NEXT();
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = NEXT();
        else if (!strcmp(a, "--raw")) raw = true;
        else if (!strcmp(a, "--stream")) { if (!req.stream_chunk_frames) req.stream_chunk_frames = 12; }
        else if (!strcmp(a, "--stream-chunk")) req.stream_chunk_frames = (int)parse_long(a, NEXT(), 1, 300);
        else if (!strcmp(a, "--stream-first")) req.stream_first_frames = (int)parse_long(a, NEXT(), 1, 300);
        else if (!strcmp(a, "--f32")) f32 = true;
        else if (!strcmp(a, "--speed")) req.speed = parse_float(a, NEXT(), 0.25, 4, false);
        else if (!strcmp(a, "--codes-out")) codes_out = NEXT();
        else if (!strcmp(a, "--codes-in")) codes_in = NEXT();
        else if (!strcmp(a, "-s") || !strcmp(a, "--speaker")) req.speaker = NEXT();
        else if (!strcmp(a, "-l") || !strcmp(a, "--language")) req.language = NEXT();
        else if (!strcmp(a, "-i") || !strcmp(a, "--instruct")) req.instruct = NEXT();
        else if (!strcmp(a, "--list-speakers")) list_spk = true;
        else if (!strcmp(a, "--ref-audio")) ref_audio = NEXT();
        else if (!strcmp(a, "--ref-text")) req.ref_text = NEXT();
        else if (!strcmp(a, "--x-vector-only")) req.x_vector_only = true;
        else if (!strcmp(a, "--voice")) voice_in = NEXT();
        else if (!strcmp(a, "--save-voice")) voice_out = NEXT();
        else if (!strcmp(a, "--list-languages")) list_lang = true;
        else if (!strcmp(a, "--streaming-text")) req.text_mode = QTTS_TEXT_MODE_STREAMING;
        else if (!strcmp(a, "--non-streaming-text")) req.text_mode = QTTS_TEXT_MODE_NON_STREAMING;
        else if (!strcmp(a, "--greedy")) { req.do_sample = 0; req.subtalker_do_sample = 0; }
        else if (!strcmp(a, "--subtalker-greedy")) req.subtalker_do_sample = 0;
        else if (!strcmp(a, "--seed")) req.seed = parse_u64(a, NEXT());
        else if (!strcmp(a, "--temperature")) req.temperature = parse_float(a, NEXT(), 0, 100, true);
        else if (!strcmp(a, "--top-k")) req.top_k = (int)parse_long(a, NEXT(), 0, 1 << 20);
        else if (!strcmp(a, "--top-p")) req.top_p = parse_float(a, NEXT(), 0, 1, true);
        else if (!strcmp(a, "--repetition-penalty")) req.repetition_penalty = parse_float(a, NEXT(), 0, 100, true);
        else if (!strcmp(a, "--subtalker-temperature")) req.subtalker_temperature = parse_float(a, NEXT(), 0, 100, true);
        else if (!strcmp(a, "--subtalker-top-k")) req.subtalker_top_k = (int)parse_long(a, NEXT(), 0, 1 << 20);
        else if (!strcmp(a, "--subtalker-top-p")) req.subtalker_top_p = parse_float(a, NEXT(), 0, 1, true);
        else if (!strcmp(a, "--max-frames")) max_frames = (int)parse_long(a, NEXT(), 1, 1 << 20);
        else if (!strcmp(a, "--max-seconds")) max_seconds = parse_float(a, NEXT(), 0, 86400, true);
        else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) threads = (int)parse_long(a, NEXT(), 0, 1024);
        else if (!strcmp(a, "--backend")) backend = NEXT();
        else if (!strcmp(a, "--quant")) quant_talker = quant_cp = NEXT();
        else if (!strcmp(a, "--quant-talker")) quant_talker = NEXT();
        else if (!strcmp(a, "--quant-cp")) quant_cp = NEXT();
        else if (!strcmp(a, "--codec")) codec = NEXT();
        else if (!strcmp(a, "--kv-cache")) kv_cache = NEXT();
        else if (!strcmp(a, "--check-weights")) check_weights = true;
        else if (!strcmp(a, "--serial-codec")) serial_codec = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else die("synth: unknown option '%s' (see qwen3-tts synth --help)", a);
#undef NEXT
    }
    if (!model) die("synth: -m MODEL_DIR is required (see qwen3-tts synth --help)");
    if (text && text_file) die("synth: give either --text or --text-file, not both");
    if (ref_audio && voice_in) die("synth: give either --ref-audio or --voice, not both");
    if (voice_out && !ref_audio) die("synth: --save-voice needs --ref-audio");
    if (req.stream_first_frames && !req.stream_chunk_frames) req.stream_chunk_frames = 12;

    qtts_error err;
    qtts_engine_options eo;
    qtts_engine_options_init(&eo);
    eo.n_threads = threads;
    if (backend) eo.backend = backend;
    eo.quant_talker = quant_talker;
    eo.quant_cp = quant_cp;
    eo.codec = codec;
    eo.kv_cache = kv_cache;
    eo.check_weights = check_weights;
    eo.serial_codec = serial_codec;
    /* the inputs before the model: a missing file or text fails at once */
    char *text_buf = NULL;
    void *ref_buf = NULL;
    size_t ref_len = 0;
    if (!list_spk && !list_lang) {
        if (codes_in && req.speed != 0 && req.speed != 1)
            die("synth: --speed applies to synthesis, not to --codes-in");
        if (!codes_in) {
            if (text_file) text_buf = read_text_file(text_file);
            else if (text) text_buf = strdup(text);
            else die("synth: no text: use --text TEXT or --text-file FILE ('-' for stdin)");
            if (!text_buf) die("out of memory");
            req.text = text_buf;
        }
        if (ref_audio) ref_buf = read_binary_file(ref_audio, &ref_len);
    }
    qtts_engine *eng = NULL;
    double t_load = qtts_cli_now();
    if (qtts_engine_open(model, &eo, &eng, &err)) die("%s", err.msg);
    t_load = qtts_cli_now() - t_load;

    if (list_spk || list_lang) {
        qtts_model_info info;
        qtts_engine_info(eng, &info);
        if (list_spk)
            for (int i = 0; i < info.n_speakers; i++) printf("%s\n", qtts_engine_speaker(eng, i));
        if (list_lang) {
            printf("auto\n");
            for (int i = 0; i < info.n_languages; i++) printf("%s\n", qtts_engine_language(eng, i));
        }
        qtts_engine_close(eng);
        return 0;
    }

    int frame_cap = max_frames;
    if (max_seconds > 0) {
        int f = (int)ceil(max_seconds * 12.5);
        if (frame_cap < 0 || f < frame_cap) frame_cap = f;
    }
    /* max_new_tokens counts codebook-0 draws including the EOS draw. */
    if (frame_cap > 0) req.max_new_tokens = frame_cap + 1;

    synth_sink sink = {0};
    sink.f32 = f32;
    sink.progress = !quiet && isatty(2);
    sink.t0 = qtts_cli_now();
    sink.max_frames = frame_cap;
    if (raw) {
        if (strcmp(out, "-") == 0) sink.raw = stdout;
        else if (!(sink.raw = fopen(out, "wb"))) die("%s: cannot create: %s", out, strerror(errno));
    }
    if (codes_out && !(sink.codes_out = fopen(codes_out, "w")))
        die("%s: cannot create: %s", codes_out, strerror(errno));

    qtts_voice *voice = NULL;
    if (ref_audio) {
        /* Clone once through a profile, so --save-voice stores exactly what
         * this synthesis used. */
        if (qtts_voice_create(eng, ref_buf, ref_len, req.ref_text, req.x_vector_only, NULL, &voice,
                              &err))
            die("%s: %s", ref_audio, err.msg);
        free(ref_buf);
        if (voice_out && qtts_voice_save(voice, voice_out, &err)) die("%s", err.msg);
    } else if (voice_in) {
        if (qtts_voice_load(eng, voice_in, &voice, &err)) die("%s", err.msg);
    }
    req.voice = voice;
    req.ref_text = NULL; /* carried by the profile */

    qtts_session *ses = qtts_session_new(eng, &err);
    if (!ses) die("%s", err.msg);

    qtts_status st;
    qtts_result res = {0};
    if (codes_in) {
        int32_t *codes = NULL;
        int n_frames = 0;
        char msg[QTTS_ERR_MAX];
        if (qtts_codes_read(codes_in, &codes, &n_frames, msg, sizeof msg)) die("%s", msg);
        st = qtts_decode_codes(ses, codes, n_frames, on_audio, &sink, &err);
        free(codes);
        res.n_frames = n_frames;
    } else {
        req.on_audio = on_audio;
        req.on_frame = on_frame;
        req.user = &sink;
        st = qtts_synthesize(ses, &req, &res, &err);
    }
    if (sink.progress) fputc('\n', stderr);
    if (st) die("%s", err.msg);
    if (res.warning[0]) fprintf(stderr, "qwen3-tts: warning: %s\n", res.warning);

    if (!raw && qtts_write_wav(out, sink.pcm, sink.n, QTTS_SAMPLE_RATE, f32, &err))
        die("%s", err.msg);
    if (sink.raw && sink.raw != stdout && fclose(sink.raw) != 0) die("%s: write failed", out);
    if (sink.codes_out && fclose(sink.codes_out) != 0) die("%s: write failed", codes_out);

    if (!quiet) {
        double el = qtts_cli_now() - sink.t0;
        double audio_s = (double)(raw ? (size_t)res.n_samples : sink.n) / QTTS_SAMPLE_RATE;
        char first[64] = "";
        if (sink.t_first > 0 && !codes_in)
            snprintf(first, sizeof first, ", first audio after %.2f s", sink.t_first - sink.t0);
        fprintf(stderr, "%s: %d frames, %.2f s of audio%s, load %.2f s, synth %.2f s (RTF %.2f)%s\n",
                strcmp(out, "-") ? out : "stdout", res.n_frames, audio_s,
                codes_in ? "" : (res.hit_eos ? " (ended by EOS)" : " (frame limit reached)"),
                t_load, el, audio_s > 0 ? el / audio_s : 0.0, first);
    }
    qtts_session_free(ses);
    qtts_voice_free(voice);
    qtts_engine_close(eng);
    free(sink.pcm);
    free(text_buf);
    return 0;
}

/* ---- voice ----------------------------------------------------------------- */

static void usage_voice(FILE *f) {
    fputs("usage: qwen3-tts voice create -m MODEL_DIR --ref-audio FILE [--ref-text TEXT]\n"
          "                              [--x-vector-only] [--language NAME] [-q] -o PROFILE\n"
          "       qwen3-tts voice info   -m MODEL_DIR PROFILE...\n"
          "       qwen3-tts voice list   -m MODEL_DIR DIR\n"
          "\n"
          "A profile stores the speaker embedding (and, with --ref-text, the reference codes\n"
          "and transcript for in-context cloning), so a voice is cloned once and reused with\n"
          "'qwen3-tts synth --voice PROFILE'. info/list check each profile against the model.\n"
          "create prints the new profile's summary; -q, --quiet prints nothing but errors.\n",
          f);
}

/* s on stdout with its control characters (C0, DEL, C1) as \u00XX: a
 * profile's strings come from a file, and printed raw one could drive the
 * terminal. */
static void put_clean(const char *s) {
    for (size_t i = 0, n = strlen(s); i < n; i++) {
        const int c = qtts_control_len(s + i, n - i);
        if (c) printf("\\u%04x", (unsigned char)s[i += (size_t)c - 1]);
        else putchar(s[i]);
    }
}

static void print_voice(const char *path, const qtts_voice *v) {
    qtts_voice_info vi;
    qtts_voice_get_info(v, &vi);
    printf("%s: version %d, %s, model ", path, vi.version,
           vi.in_context ? "in-context" : "x-vector only");
    put_clean(vi.model_type);
    putchar(' ');
    put_clean(vi.model_size);
    printf(", x-vector %d", vi.xvector_dim);
    if (vi.in_context) printf(", %d reference frames (%.2f s)", vi.ref_frames, vi.ref_frames / 12.5);
    printf(", language ");
    put_clean(vi.language ? vi.language : "auto");
    if (vi.ref_text) {
        printf(", text \"");
        put_clean(vi.ref_text);
        putchar('"');
    }
    putchar('\n');
}

static int cmd_voice(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage_voice(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "create") && strcmp(verb, "info") && strcmp(verb, "list"))
        die("voice: unknown command '%s' (create, info, list)", verb);
    const char *model = NULL, *ref_audio = NULL, *ref_text = NULL, *lang = NULL, *out = NULL;
    bool xvec_only = false, quiet = false;
    const char *paths[256];
    int n_paths = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage_voice(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = NEXT();
        else if (!strcmp(a, "--ref-audio")) ref_audio = NEXT();
        else if (!strcmp(a, "--ref-text")) ref_text = NEXT();
        else if (!strcmp(a, "--x-vector-only")) xvec_only = true;
        else if (!strcmp(a, "-l") || !strcmp(a, "--language")) lang = NEXT();
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = NEXT();
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (a[0] == '-' && a[1]) die("voice %s: unknown option '%s'", verb, a);
        else if (n_paths < 256) paths[n_paths++] = a;
        else die("voice %s: too many files", verb);
#undef NEXT
    }
    if (!model) die("voice %s: -m MODEL_DIR is required", verb);
    const bool create = !strcmp(verb, "create");
    if (create && (!ref_audio || !out))
        die("voice create: --ref-audio FILE and -o PROFILE are required");
    /* the recording before the model: a missing file fails at once */
    size_t alen = 0;
    void *abuf = create ? read_binary_file(ref_audio, &alen) : NULL;
    qtts_error err;
    qtts_engine *eng = NULL;
    if (qtts_engine_open(model, NULL, &eng, &err)) die("%s", err.msg);
    int rc = 0;
    if (create) {
        qtts_voice *v = NULL;
        if (qtts_voice_create(eng, abuf, alen, ref_text, xvec_only, lang, &v, &err))
            die("%s: %s", ref_audio, err.msg);
        free(abuf);
        if (qtts_voice_save(v, out, &err)) die("%s", err.msg);
        if (!quiet) print_voice(out, v);
        qtts_voice_free(v);
    } else if (!strcmp(verb, "info")) {
        if (!n_paths) die("voice info: give one or more profile files");
        for (int i = 0; i < n_paths; i++) {
            qtts_voice *v = NULL;
            if (qtts_voice_load(eng, paths[i], &v, &err)) {
                fprintf(stderr, "qwen3-tts: %s\n", err.msg);
                rc = 1;
                continue;
            }
            print_voice(paths[i], v);
            qtts_voice_free(v);
        }
    } else {
        if (n_paths != 1) die("voice list: give one directory");
        DIR *d = opendir(paths[0]);
        if (!d) die("%s: cannot open: %s", paths[0], strerror(errno));
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s", paths[0], de->d_name) >= (int)sizeof p) continue;
            qtts_voice *v = NULL;
            if (qtts_voice_load(eng, p, &v, &err)) continue; /* not a profile for this model */
            print_voice(p, v);
            qtts_voice_free(v);
            n++;
        }
        closedir(d);
        if (!n) fprintf(stderr, "qwen3-tts: no voice profiles for this model in %s\n", paths[0]);
    }
    qtts_engine_close(eng);
    return rc;
}

/* ---- quantize -------------------------------------------------------------- */

static void usage_quantize(FILE *f) {
    fputs("usage: qwen3-tts quantize -m MODEL_DIR --quant int8|int4 [--cp int8|int4|none] -o OUT_DIR\n"
          "\n"
          "Writes OUT_DIR (new or empty): model.safetensors with the talker's and the code\n"
          "predictor's linear layers as Q8_0 (int8) or Q4_0 (int4) and everything else as it\n"
          "was, plus copies of the other files. 'qwen3-tts synth -m OUT_DIR' then loads it\n"
          "directly, without the bf16 weights. Embeddings, norms and the codec stay at full\n"
          "precision; docs/QUANT.md has the measured error.\n"
          "\n"
          "  -m, --model DIR     the bf16 model directory (Hugging Face layout)\n"
          "      --quant Q       int8 or int4 for both components\n"
          "      --talker Q      the talker's format (overrides --quant)\n"
          "      --cp Q          the code predictor's format (overrides --quant); 'none' keeps it\n"
          "  -o, --output DIR    the new model directory\n"
          "      --link-codec    symlink speech_tokenizer/ instead of copying it\n"
          "  -j, --threads N     threads for quantizing (default: all cores)\n"
          "  -q, --quiet\n",
          f);
}

static void quant_progress(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "qwen3-tts: %s\n", line);
}

static int cmd_quantize(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *quant = NULL;
    qtts_quantize_options o = {0};
    int threads = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage_quantize(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = NEXT();
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = NEXT();
        else if (!strcmp(a, "--quant")) quant = NEXT();
        else if (!strcmp(a, "--talker") || !strcmp(a, "--quant-talker")) o.talker = NEXT();
        else if (!strcmp(a, "--cp") || !strcmp(a, "--quant-cp")) o.cp = NEXT();
        else if (!strcmp(a, "--link-codec")) o.link_codec = true;
        else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) threads = (int)parse_long(a, NEXT(), 0, 1024);
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else die("quantize: unknown option '%s' (see qwen3-tts quantize --help)", a);
#undef NEXT
    }
    if (!model || !out) die("quantize: -m MODEL_DIR and -o OUT_DIR are required");
    if (!o.talker) o.talker = quant;
    if (!o.cp) o.cp = quant ? quant : o.talker;
    if (!o.talker && !o.cp) die("quantize: give --quant int8|int4 (or --talker/--cp)");
    if (!o.talker) o.talker = "none";
    if (!quiet) o.progress = quant_progress;
    o.n_threads = threads;
    qtts_error err;
    if (qtts_quantize_model(model, out, &o, &err)) die("%s", err.msg);
    return 0;
}

/* ---- inspect --------------------------------------------------------------- */

static void print_line(void *user, const char *text) {
    (void)user;
    puts(text);
}

static int cmd_inspect(int argc, char **argv) {
    const char *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts("usage: qwen3-tts inspect -m MODEL_DIR");
            return 0;
        } else if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else {
            die("inspect: unknown option '%s'", argv[i]);
        }
    }
    if (!model) die("inspect: -m MODEL_DIR is required");
    qtts_error err;
    if (qtts_inspect(model, print_line, NULL, &err)) die("%s", err.msg);
    return 0;
}

/* ---- serve ----------------------------------------------------------------- */

static void usage_serve(FILE *f) {
    fputs(
        "usage: qwen3-tts serve -m MODEL_DIR [options]\n"
        "\n"
        "  -m, --model DIR              Hugging Face model directory (required)\n"
        "      --host ADDR              numeric address to bind (default 127.0.0.1; 0.0.0.0 or ::\n"
        "                               exposes the server to the network)\n"
        "  -p, --port N                 TCP port (default 8080; 0 = any free port)\n"
        "  -b, --batch B                requests generated together, one frame each per step (default 4)\n"
        "      --queue Q                requests waiting for a batch slot; more get 503 (default 16)\n"
        "  -j, --threads N              engine threads (default: all cores)\n"
        "      --api-key KEY            require 'Authorization: Bearer KEY' (not on /health)\n"
        "      --api-key-file FILE      the same, the key read from FILE (first line)\n"
        "      --model-name NAME        model id listed by /v1/models (default qwen3-tts)\n"
        "      --voices DIR             Base models: voice profiles DIR/NAME.voice (from 'voice create'\n"
        "                               or 'synth --save-voice'), read at start; the OpenAI 'voice' and\n"
        "                               /v1/tts 'voice_profile' name one (NAME: 1-64 of a-z 0-9 _ -)\n"
        "limits:\n"
        "      --max-connections N      open connections (default 256); more get 503\n"
        "      --max-body BYTES         request body size (default 1048576)\n"
        "      --max-clone-body BYTES   /v1/tts body size on a Base model, for base64 reference audio\n"
        "                               (default 16777216)\n"
        "      --max-input-chars N      text length cap (default 4096; also <= max frames / 4)\n"
        "      --max-instructions-chars N  (default 4096)\n"
        "      --max-audio-seconds S    audio per request (default 600, i.e. 7500 frames)\n"
        "      --queue-timeout S        wait for a slot before 503 (default 30)\n"
        "      --header-timeout S       whole request head, else 408 (default 10)\n"
        "      --body-timeout S         whole request body, else 408 (default 30)\n"
        "      --idle-timeout S         keep-alive wait for the next request (default 5)\n"
        "      --write-timeout S        a client that stops reading this long is dropped (default 10)\n"
        "      --drain-timeout S        on SIGINT/SIGTERM, time to finish accepted requests (default 30)\n"
        "      --quant Q                talker and code predictor quantized at load: int8 or int4\n"
        "                               (or serve a directory written by 'qwen3-tts quantize')\n"
        "      --codec F                codec decoder convolutions: fp32 (default) or bf16 (faster\n"
        "                               on CPUs with AVX512-BF16 or AArch64 BF16; lossy)\n"
        "      --kv-cache F             the talker's KV cache: f32 or bf16 (default bf16 for int8/int4\n"
        "                               weights, else f32)\n"
        "      --check-weights          scan every weight for NaN/infinity at load; a bad one\n"
        "                               fails the load (/health 503, the tensor in the log)\n"
        "      --backend NAME           cpu (default) or cuda (a CUDA build on a GPU machine)\n"
        "      --stream-chunk N         frames per codec decode as a request generates, the first\n"
        "                               audio after 1 frame (default 12; 0 = 300-frame windows)\n"
        "  -q, --quiet                  no log lines\n"
        "  -h, --help\n"
        "\n"
        "Signals: SIGINT/SIGTERM drain (a second one aborts), SIGUSR1 prints statistics.\n",
        f);
}

static void serve_log(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "qwen3-tts: %s\n", line);
}

static char *read_key_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    char *t = read_stream(f, path);
    fclose(f);
    t[strcspn(t, "\r\n")] = 0;
    if (!*t) die("%s: the first line is empty", path);
    return t;
}

static int cmd_serve(int argc, char **argv) {
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.install_signal_handlers = true;
    c.log = serve_log;
    char *key_buf = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage_serve(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) c.model_dir = NEXT();
        else if (!strcmp(a, "--host")) c.host = NEXT();
        else if (!strcmp(a, "-p") || !strcmp(a, "--port")) c.port = (int)parse_long(a, NEXT(), 0, 65535);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) c.batch = (int)parse_long(a, NEXT(), 1, 64);
        else if (!strcmp(a, "--queue")) c.queue = (int)parse_long(a, NEXT(), 0, 4096);
        else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) c.threads = (int)parse_long(a, NEXT(), 0, 1024);
        else if (!strcmp(a, "--api-key")) c.api_key = NEXT();
        else if (!strcmp(a, "--api-key-file")) c.api_key = key_buf = read_key_file(NEXT());
        else if (!strcmp(a, "--model-name")) c.model_name = NEXT();
        else if (!strcmp(a, "--max-connections")) c.max_connections = (int)parse_long(a, NEXT(), 1, 65536);
        else if (!strcmp(a, "--max-body")) c.max_body = (size_t)parse_long(a, NEXT(), 64, 64L << 20);
        else if (!strcmp(a, "--max-clone-body")) c.max_clone_body = (size_t)parse_long(a, NEXT(), 64, 64L << 20);
        else if (!strcmp(a, "--voices")) c.voices_dir = NEXT();
        else if (!strcmp(a, "--max-input-chars")) c.max_input_chars = (size_t)parse_long(a, NEXT(), 1, 65536);
        else if (!strcmp(a, "--max-instructions-chars")) c.max_instructions_chars = (size_t)parse_long(a, NEXT(), 0, 65536);
        else if (!strcmp(a, "--max-audio-seconds")) c.max_audio_seconds = parse_float(a, NEXT(), 1, 7200, false);
        else if (!strcmp(a, "--queue-timeout")) c.queue_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--header-timeout")) c.header_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--body-timeout")) c.body_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--idle-timeout")) c.idle_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--write-timeout")) c.write_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--drain-timeout")) c.drain_timeout_s = parse_float(a, NEXT(), 0, 3600, true);
        else if (!strcmp(a, "--stream-chunk")) c.stream_chunk_frames = (int)parse_long(a, NEXT(), 0, 300);
        else if (!strcmp(a, "--quant")) c.quant = NEXT();
        else if (!strcmp(a, "--codec")) c.codec = NEXT();
        else if (!strcmp(a, "--kv-cache")) c.kv_cache = NEXT();
        else if (!strcmp(a, "--check-weights")) c.check_weights = true;
        else if (!strcmp(a, "--backend")) c.backend = NEXT();
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) c.log = NULL;
        else die("serve: unknown option '%s' (see qwen3-tts serve --help)", a);
#undef NEXT
    }
    if (!c.model_dir) die("serve: -m MODEL_DIR is required (see qwen3-tts serve --help)");
    qtts_error err;
    qtts_server *srv;
    if (qtts_server_start(&c, &srv, &err)) die("serve: %s", err.msg);
    int code = qtts_server_wait(srv, &err);
    if (code >= 128) {
        /* Aborted by a second signal: requests may still be running. */
        fflush(stderr);
        _exit(code);
    }
    qtts_server_free(srv);
    free(key_buf);
    if (code) die("serve: %s", err.msg);
    if (c.log) fprintf(stderr, "qwen3-tts: drained, exiting\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage_main(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("qwen3-tts %s\n", QTTS_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "synth")) return cmd_synth(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return qtts_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "voice")) return cmd_voice(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    fprintf(stderr, "qwen3-tts: unknown command '%s'\n\n", cmd);
    usage_main(stderr);
    return 2;
}
