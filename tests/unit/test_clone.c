/*
 * test_clone.c - voice cloning end to end through the public API, against
 * the official reference's Base-model goldens, and voice profiles.
 *
 * Each golden case is run only from its JSON inputs: the reference audio
 * file's bytes (24 kHz mono, 16 kHz mono and 44.1 kHz stereo, so decoding,
 * down-mixing and resampling are covered), the transcript, the x-vector-only
 * flag, language, text mode and max_new_tokens, greedy. Checked:
 *   - codes identical to the reference (the cases' smallest top-2 margin is
 *     1.2e-4 against our ~1e-6 logit error: no near-tie exemption needed),
 *   - the returned waveform (in-context: after the reference's trim of
 *     int(ref/total * samples) samples) within 1e-4 of `wav`, same length.
 * Profiles: a saved and reloaded profile reproduces the same bytes as
 * cloning from the audio (and has the same qtts_voice_digest, which another
 * recording's profile does not); corrupt, edited, truncated and wrong-model
 * profiles are refused with a clear message. Streamed in-context clones:
 * the one-shot samples less the one the reference's cut may keep in front
 * (check_streamed_clone), the reference frames decoded once per session.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "golden_util.h"
#include "qwen3_tts.h"
#include "base/json.h"
#include "io/safetensors.h"

/* Compare what a run collected with the golden's codes and wav. */
static void check_against_golden(const char *label, const char *gpath, const collect *c,
                                 const qtts_result *res) {
    qtts_st_file *gf = NULL;
    qtts_err e;
    REQUIRE(qtts_st_open(gpath, &gf, &e) == QTTS_OK, "%s", e.msg);
    const qtts_tensor *codes = qtts_st_find(gf, "codes");
    const qtts_tensor *wav = qtts_st_find(gf, "wav");
    if (!codes || !wav || codes->dtype != QTTS_DT_I64 || wav->dtype != QTTS_DT_F32) {
        CHECK(0, "%s: golden lacks codes/wav", label);
        qtts_st_close(gf);
        return;
    }
    const int F = (int)codes->shape[0];
    CHECK(c->n_frames == F && res->n_frames == F, "%s: %d frames (result %d), reference %d", label,
          c->n_frames, res->n_frames, F);
    const int64_t *g = codes->data;
    int diff = -1;
    for (int i = 0; i < QTTS_MIN(F, c->n_frames) * 16; i++)
        if (c->codes[i] != g[i]) {
            diff = i;
            break;
        }
    CHECK(diff < 0, "%s: codes differ first at frame %d codebook %d", label, diff / 16, diff % 16);
    CHECK(c->n == wav->numel && res->n_samples == c->n, "%s: %zu samples (result %zu), reference %llu",
          label, c->n, res->n_samples, (unsigned long long)wav->numel);
    if (c->n == wav->numel && diff < 0) {
        size_t at;
        double err = test_max_abs_err(c->pcm, wav->data, c->n, &at);
        CHECK(err <= 1e-4, "%s: waveform max abs error %.3g at %zu", label, err, at);
    }
    qtts_st_close(gf);
}

/* The reference's one-shot audio of a clone, made the plain way: the
 * reference codes and c's codes decoded window by window
 * (qtts_decode_codes), less their first int(ref / total * samples)
 * samples. True if that is c's audio, bit for bit (the engine skips most
 * of the reference frames instead of decoding them). */
static bool matches_window_decode(qtts_session *ss, const int32_t *refc, int ref_frames,
                                  const collect *c) {
    const int total = ref_frames + c->n_frames;
    int32_t *all = malloc(sizeof(int32_t) * 16 * (size_t)total);
    memcpy(all, refc, sizeof(int32_t) * 16 * (size_t)ref_frames);
    memcpy(all + (size_t)ref_frames * 16, c->codes, sizeof(int32_t) * 16 * (size_t)c->n_frames);
    collect w = {0};
    qtts_error err;
    bool ok = qtts_decode_codes(ss, all, total, on_audio, &w, &err) == QTTS_OK;
    const size_t cut = ok ? (size_t)((double)ref_frames / (double)total * (double)w.n) : 0;
    ok = ok && w.n - cut == c->n && !memcmp(w.pcm + cut, c->pcm, sizeof(float) * c->n);
    collect_free(&w);
    free(all);
    return ok;
}

/* A streamed in-context clone against the one-shot result c (already
 * checked against the golden): the reference cuts int(ref / total *
 * samples) samples, the stream exactly the reference frames' K; the cut is
 * K or K - 1, so the stream is c without its first d = K - cut samples,
 * the same bits. Run three times on ss: the second run resumes the decoder
 * after the reference instead of decoding it again (ref_frames_decoded 0),
 * the first decodes it unless ss's last streamed clone had the same
 * reference (same_ref), the third with prompt reuse off decodes it. */
static bool check_streamed_clone(const char *label, qtts_session *ss, qtts_request *req,
                                 const collect *c, const int32_t *refc, int ref_frames,
                                 bool same_ref) {
    if (c->n_frames < 2) return false;
    CHECK(matches_window_decode(ss, refc, ref_frames, c), "%s: one-shot against the window decode",
          label);
    const size_t up = c->n / (size_t)c->n_frames;   /* c has n_frames * up (+ 1) samples */
    const int total = ref_frames + c->n_frames;
    const size_t K = (size_t)ref_frames * up;
    const size_t cut = (size_t)((double)ref_frames / (double)total * ((double)total * (double)up));
    CHECK(cut == K || cut + 1 == K, "%s: reference cut %zu against %zu", label, cut, K);
    const size_t d = K - cut;
    req->stream_chunk_frames = 3;
    req->stream_first_frames = 1;
    for (int run = 0; run < 3; run++) {
        collect cs = {0};
        qtts_session_set_prompt_reuse(ss, run < 2);
        req->user = &cs;
        qtts_result r;
        qtts_error err;
        CHECK(qtts_synthesize(ss, req, &r, &err) == QTTS_OK, "%s: streamed: %s", label, err.msg);
        const int want = run == 1 || (run == 0 && same_ref) ? 0 : ref_frames;
        CHECK(r.ref_frames_decoded == want, "%s: streamed run %d decoded %d reference frames, not %d",
              label, run, r.ref_frames_decoded, want);
        CHECK(cs.n_frames == c->n_frames &&
                  !memcmp(cs.codes, c->codes, sizeof(int32_t) * 16 * (size_t)c->n_frames),
              "%s: streamed run %d: other codes", label, run);
        CHECK(cs.n + d == c->n && r.n_samples == cs.n &&
                  !memcmp(cs.pcm, c->pcm + d, sizeof(float) * cs.n),
              "%s: streamed run %d: %zu samples, not the one-shot %zu less its first %zu", label,
              run, cs.n, c->n, d);
        collect_free(&cs);
    }
    qtts_session_set_prompt_reuse(ss, true);
    req->stream_chunk_frames = req->stream_first_frames = 0;

    /* The goldens' lengths may all have d = 0: a length with d = 1 too,
     * where one up to 120 frames exists (run_model checks that some case
     * of the model had one). */
    int F = 0;
    for (int f = 2; f <= 120 && !F; f++) {
        const int t = ref_frames + f;
        if ((size_t)((double)ref_frames / (double)t * ((double)t * (double)up)) + 1 == K) F = f;
    }
    if (!F) return false;
    const int max_new = req->max_new_tokens;
    req->max_new_tokens = F + 1;   /* F frames and the draw that would be EOS */
    collect one = {0}, str = {0};
    qtts_result r;
    qtts_error err;
    req->user = &one;
    CHECK(qtts_synthesize(ss, req, &r, &err) == QTTS_OK, "%s: %d frames: %s", label, F, err.msg);
    req->stream_chunk_frames = 4;
    req->user = &str;
    CHECK(qtts_synthesize(ss, req, &r, &err) == QTTS_OK, "%s: %d frames, streamed: %s", label, F,
          err.msg);
    const bool tested = one.n_frames == F;   /* else the model chose EOS earlier */
    if (tested)
        CHECK(matches_window_decode(ss, refc, ref_frames, &one),
              "%s: %d frames: one-shot against the window decode (cut one short)", label, F);
    if (tested)
        CHECK(str.n_frames == F && str.n + 1 == one.n &&
                  !memcmp(str.pcm, one.pcm + 1, sizeof(float) * str.n),
              "%s: %d frames: streamed %zu samples against one-shot %zu (cut one short)", label,
              F, str.n, one.n);
    collect_free(&one);
    collect_free(&str);
    req->stream_chunk_frames = 0;
    req->max_new_tokens = max_new;
    return tested;
}

static void run_model(const char *model) {
    char dir[256];
    snprintf(dir, sizeof dir, MODELS "/%s", model);
    qtts_engine *eng = NULL;
    qtts_error err;
    REQUIRE(qtts_engine_open(dir, NULL, &eng, &err) == QTTS_OK, "%s", err.msg);
    qtts_session *s = qtts_session_new(eng, &err);
    REQUIRE(s, "%s", err.msg);
    qtts_session *ss = qtts_session_new(eng, &err);   /* the streamed clones' */
    REQUIRE(ss, "%s", err.msg);
    char last_ref[1024] = "";   /* the reference audio and text of ss's last streamed clone */
    int cut_short = 0;          /* streamed clones checked with the cut one sample short */
    char seen[16][1100];        /* per case: audio, transcript and mode, and the voice digest */
    uint64_t digests[16];
    int n_seen = 0;
    char gdir[256];
    snprintf(gdir, sizeof gdir, GOLDEN "/%s", model);
    DIR *d = opendir(gdir);
    CHECK(d, "%s: %s", gdir, strerror(errno));
    int n_cases = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
        char jpath[512], gpath[512], label[256], apath[512];
        snprintf(jpath, sizeof jpath, "%s/%s", gdir, de->d_name);
        snprintf(gpath, sizeof gpath, "%s/%.*s.safetensors", gdir, (int)(l - 5), de->d_name);
        snprintf(label, sizeof label, "%s/%.*s", model, (int)(l - 5), de->d_name);
        qtts_json *doc = load_json(jpath);
        CHECK(doc, "cannot parse %s", jpath);
        if (!doc) continue;
        const qtts_json *in = qtts_json_get(doc, "inputs");
        int64_t max_new = 0;
        bool ns = false, xvo = false;
        qtts_json_get_int(in, "max_new_tokens", &max_new);
        qtts_json_get_bool(in, "non_streaming_mode", &ns);
        qtts_json_get_bool(in, "x_vector_only_mode", &xvo);
        snprintf(apath, sizeof apath, QTTS_FIXTURES "/%s", jstr(in, "ref_audio"));
        size_t alen = 0;
        void *audio = read_all(apath, &alen);
        CHECK(audio, "%s: cannot read %s", label, apath);

        qtts_request req;
        qtts_request_init(&req);
        req.text = jstr(in, "text");
        req.language = jstr(in, "language");
        req.ref_audio = audio;
        req.ref_audio_len = alen;
        req.ref_text = jstr(in, "ref_text");
        req.x_vector_only = xvo;
        req.text_mode = ns ? QTTS_TEXT_MODE_NON_STREAMING : QTTS_TEXT_MODE_STREAMING;
        req.do_sample = req.subtalker_do_sample = 0;
        req.max_new_tokens = (int)max_new;
        collect c = {0};
        req.on_frame = on_frame;
        req.on_audio = on_audio;
        req.user = &c;
        qtts_result res;
        qtts_status st = audio ? qtts_synthesize(s, &req, &res, &err) : QTTS_ERR_IO;
        CHECK(st == QTTS_OK, "%s: %s", label, err.msg);
        if (st == QTTS_OK) check_against_golden(label, gpath, &c, &res);

        /* The same through a saved and reloaded profile: identical bytes. */
        qtts_voice *v = NULL, *v2 = NULL;
        char vpath[256];
        snprintf(vpath, sizeof vpath, "/tmp/qtts_test_clone_%d.voice", (int)getpid());
        if (audio && st == QTTS_OK &&
            qtts_voice_create(eng, audio, alen, req.ref_text, xvo, NULL, &v, &err) == QTTS_OK &&
            qtts_voice_save(v, vpath, &err) == QTTS_OK && qtts_voice_load(eng, vpath, &v2, &err) == QTTS_OK) {
            qtts_voice_info vi;
            qtts_voice_get_info(v2, &vi);
            /* the digest: the same for the reloaded profile, and for another
             * case iff it cloned the same audio (and transcript, in context) */
            const uint64_t dg = qtts_voice_digest(v);
            CHECK(qtts_voice_digest(v2) == dg, "%s: the reloaded profile's digest differs", label);
            char what[1100];
            snprintf(what, sizeof what, "%s\n%s", apath, vi.in_context ? vi.ref_text : "");
            for (int i = 0; i < n_seen; i++)
                CHECK((digests[i] == dg) == !strcmp(seen[i], what), "%s: digest against case %d", label, i);
            if (n_seen < 16) {
                snprintf(seen[n_seen], sizeof seen[n_seen], "%s", what);
                digests[n_seen++] = dg;
            }
            CHECK(vi.in_context == (!xvo && req.ref_text && *req.ref_text), "%s: profile mode", label);
            collect c2 = {0};
            req.ref_audio = NULL;
            req.ref_audio_len = 0;
            req.ref_text = NULL;
            req.voice = v2;
            req.user = &c2;
            qtts_result res2;
            CHECK(qtts_synthesize(s, &req, &res2, &err) == QTTS_OK, "%s: profile: %s", label, err.msg);
            CHECK(c2.n_frames == c.n_frames && c2.n == c.n &&
                      !memcmp(c2.codes, c.codes, sizeof(int32_t) * 16 * (size_t)c.n_frames) &&
                      !memcmp(c2.pcm, c.pcm, sizeof(float) * c.n),
                  "%s: the reloaded profile does not reproduce the direct clone", label);
            collect_free(&c2);
            qtts_st_file *vf = NULL;
            const qtts_tensor *rc = NULL;
            if (vi.in_context) {
                qtts_err e2;
                CHECK(qtts_st_open(vpath, &vf, &e2) == QTTS_OK, "%s", e2.msg);
                rc = vf ? qtts_st_find(vf, "ref_codes") : NULL;
                CHECK(rc && rc->dtype == QTTS_DT_I32 && rc->numel == (uint64_t)vi.ref_frames * 16,
                      "%s: the profile's ref_codes", label);
            }
            if (rc && rc->dtype == QTTS_DT_I32 && rc->numel == (uint64_t)vi.ref_frames * 16) {
                char ref[1024];
                snprintf(ref, sizeof ref, "%s\n%s", apath, vi.ref_text);
                cut_short += check_streamed_clone(label, ss, &req, &c, rc->data, vi.ref_frames,
                                                  !strcmp(ref, last_ref));
                snprintf(last_ref, sizeof last_ref, "%s", ref);
            }
            qtts_st_close(vf);
        } else if (audio && st == QTTS_OK) {
            CHECK(0, "%s: profile round trip: %s", label, err.msg);
        }
        unlink(vpath);
        qtts_voice_free(v);
        qtts_voice_free(v2);
        collect_free(&c);
        free(audio);
        qtts_json_free(doc);
        n_cases++;
    }
    if (d) closedir(d);
    CHECK(n_cases >= 4, "%s: only %d golden cases", model, n_cases);
    CHECK(cut_short > 0, "%s: no streamed clone was checked with the cut one sample short", model);
    qtts_session_free(ss);
    qtts_session_free(s);
    qtts_engine_close(eng);
}

static void test_goldens_base06(void) { run_model("base06"); }
static void test_goldens_base17(void) { run_model("base17"); }

/* ==== bad input ============================================================ */

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void test_bad_voice_input(void) {
    qtts_engine *eng = NULL, *eng17 = NULL, *cv = NULL;
    qtts_error err;
    REQUIRE(qtts_engine_open(MODELS "/base06", NULL, &eng, &err) == QTTS_OK, "%s", err.msg);
    REQUIRE(qtts_engine_open(MODELS "/base17", NULL, &eng17, &err) == QTTS_OK, "%s", err.msg);
    REQUIRE(qtts_engine_open(MODELS "/cv06", NULL, &cv, &err) == QTTS_OK, "%s", err.msg);
    size_t alen;
    void *audio = read_all(QTTS_FIXTURES "/audio/ref_24k_mono.wav", &alen);
    REQUIRE(audio, "audio fixture");
    qtts_session *s = qtts_session_new(eng, &err);
    qtts_session *scv = qtts_session_new(cv, &err);
    REQUIRE(s && scv, "session");
    qtts_request req;

    /* Base without a voice; with a preset speaker; cloning on CustomVoice */
    qtts_request_init(&req);
    req.text = "Hi.";
    CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_INVALID && strstr(err.msg, "reference audio"),
          "no voice: %s", err.msg);
    req.speaker = "vivian";
    CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_INVALID && strstr(err.msg, "preset"),
          "speaker on Base: %s", err.msg);
    qtts_request_init(&req);
    req.text = "Hi.";
    req.speaker = "vivian";
    req.ref_audio = audio;
    req.ref_audio_len = alen;
    CHECK(qtts_synthesize(scv, &req, NULL, &err) == QTTS_ERR_INVALID && strstr(err.msg, "Base"),
          "clone on CustomVoice: %s", err.msg);
    qtts_voice *vx = NULL;
    CHECK(qtts_voice_create(cv, audio, alen, NULL, false, NULL, &vx, &err) == QTTS_ERR_INVALID &&
              !vx && strstr(err.msg, "Base"),
          "profile on CustomVoice: %s", err.msg);

    /* bad audio: garbage, truncated WAV, too short */
    qtts_request_init(&req);
    req.text = "Hi.";
    req.ref_audio = "not audio at all, just text";
    req.ref_audio_len = 27;
    CHECK(qtts_synthesize(s, &req, NULL, &err) != QTTS_OK && strlen(err.msg) > 0, "garbage audio: %s",
          err.msg);
    req.ref_audio = audio;
    req.ref_audio_len = 20; /* inside the fmt chunk */
    CHECK(qtts_synthesize(s, &req, NULL, &err) != QTTS_OK && strstr(err.msg, "WAV"),
          "truncated WAV: %s", err.msg);
    req.ref_audio_len = 60; /* data cut short: decodes 8 samples, then the duration rule */
    CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_LIMIT && strstr(err.msg, "shorter"),
          "WAV cut inside its data: %s", err.msg);
    req.ref_audio_len = 44 + 2 * 2400; /* 0.1 s */
    CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_LIMIT, "0.1 s of audio: %s", err.msg);
    req.ref_audio_len = alen;
    req.ref_text = "bad \xff utf8";
    CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_INVALID && strstr(err.msg, "UTF-8"),
          "bad ref_text: %s", err.msg);

    /* profiles */
    qtts_voice *v = NULL, *v2 = NULL;
    REQUIRE(qtts_voice_create(eng, audio, alen, "Hello there.", false, "english", &v, &err) == QTTS_OK,
            "%s", err.msg);
    CHECK(qtts_voice_create(eng, audio, alen, NULL, false, "klingon", &v2, &err) == QTTS_ERR_INVALID,
          "unknown language: %s", err.msg);
    char good[128], bad[128];
    snprintf(good, sizeof good, "/tmp/qtts_test_voice_%d.voice", (int)getpid());
    snprintf(bad, sizeof bad, "/tmp/qtts_test_voice_%d.bad", (int)getpid());
    REQUIRE(qtts_voice_save(v, good, &err) == QTTS_OK, "%s", err.msg);
    size_t vlen;
    unsigned char *vb = read_all(good, &vlen);
    REQUIRE(vb && vlen > 100, "profile bytes");

    /* wrong model */
    CHECK(qtts_voice_load(eng17, good, &v2, &err) == QTTS_ERR_INVALID && !v2 && strstr(err.msg, "hidden"),
          "profile on another model: %s", err.msg);
    CHECK(qtts_voice_load(cv, good, &v2, &err) != QTTS_OK && !v2, "profile on CustomVoice: %s", err.msg);
    /* a flipped byte in the data area: checksum */
    unsigned char *m = malloc(vlen);
    REQUIRE(m, "oom");
    memcpy(m, vb, vlen);
    m[vlen - 3] ^= 0x40;
    write_file(bad, m, vlen);
    CHECK(qtts_voice_load(eng, bad, &v2, &err) == QTTS_ERR_FORMAT && !v2, "flipped data byte: %s", err.msg);
    /* an edited transcript in the header: checksum */
    memcpy(m, vb, vlen);
    char *t = memmem(m, vlen, "Hello there.", 12);
    CHECK(t, "transcript in header");
    if (t) {
        t[0] = 'J';
        write_file(bad, m, vlen);
        CHECK(qtts_voice_load(eng, bad, &v2, &err) == QTTS_ERR_FORMAT && strstr(err.msg, "checksum"),
              "edited transcript: %s", err.msg);
    }
    /* truncated, empty, a model file, a missing file */
    write_file(bad, vb, vlen - 10);
    CHECK(qtts_voice_load(eng, bad, &v2, &err) == QTTS_ERR_FORMAT, "truncated: %s", err.msg);
    write_file(bad, vb, 0);
    CHECK(qtts_voice_load(eng, bad, &v2, &err) != QTTS_OK, "empty: %s", err.msg);
    CHECK(qtts_voice_load(eng, MODELS "/base06/speech_tokenizer/model.safetensors", &v2, &err) ==
                  QTTS_ERR_FORMAT && strstr(err.msg, "not a voice profile"),
          "model file as profile: %s", err.msg);
    CHECK(qtts_voice_load(eng, "/nonexistent.voice", &v2, &err) == QTTS_ERR_IO, "missing: %s", err.msg);
    /* the good one still loads, and its info is right */
    CHECK(qtts_voice_load(eng, good, &v2, &err) == QTTS_OK, "%s", err.msg);
    if (v2) {
        qtts_voice_info vi;
        qtts_voice_get_info(v2, &vi);
        CHECK(vi.in_context && vi.ref_frames > 0 && vi.language && !strcmp(vi.language, "english") &&
                  vi.ref_text && !strcmp(vi.ref_text, "Hello there.") && !strcmp(vi.model_size, "0b6"),
              "profile info");
        /* voice and ref_audio together are refused */
        qtts_request_init(&req);
        req.text = "Hi.";
        req.voice = v2;
        req.ref_audio = audio;
        req.ref_audio_len = alen;
        CHECK(qtts_synthesize(s, &req, NULL, &err) == QTTS_ERR_INVALID, "voice + audio: %s", err.msg);
    }
    /* from a descriptor: the same file, the same checks; the caller's
     * descriptor stays open and the message names what the caller said */
    {
        qtts_voice *v3 = NULL;
        CHECK(qtts_voice_load_fd(eng, -1, "nofd.voice", &v3, &err) == QTTS_ERR_IO && !v3 &&
                  strstr(err.msg, "nofd.voice"),
              "fd -1: %s", err.msg);
        int fd = open(good, O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0, "open %s", good);
        CHECK(qtts_voice_load_fd(eng, fd, "good.voice", &v3, &err) == QTTS_OK && v3, "by fd: %s", err.msg);
        CHECK(fcntl(fd, F_GETFD) != -1, "the caller's descriptor was closed");
        if (v2 && v3) {
            qtts_voice_info a, b;
            qtts_voice_get_info(v2, &a);
            qtts_voice_get_info(v3, &b);
            CHECK(a.ref_frames == b.ref_frames && a.ref_text && b.ref_text && !strcmp(a.ref_text, b.ref_text),
                  "by fd: another profile than by path");
        }
        qtts_voice_free(v3);
        v3 = NULL;
        close(fd);
        fd = open(bad, O_RDONLY | O_CLOEXEC);   /* empty by now */
        REQUIRE(fd >= 0, "open %s", bad);
        CHECK(qtts_voice_load_fd(eng, fd, "bad.voice", &v3, &err) == QTTS_ERR_FORMAT && !v3 &&
                  strstr(err.msg, "bad.voice"),
              "empty by fd: %s", err.msg);
        close(fd);
        fd = open(MODELS "/base06", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        REQUIRE(fd >= 0, "open the model directory");
        CHECK(qtts_voice_load_fd(eng, fd, "dir", &v3, &err) == QTTS_ERR_IO && !v3, "directory by fd: %s",
              err.msg);
        close(fd);
    }
    free(m);
    free(vb);
    unlink(good);
    unlink(bad);
    qtts_voice_free(v);
    qtts_voice_free(v2);
    free(audio);
    qtts_session_free(s);
    qtts_session_free(scv);
    qtts_engine_close(eng);
    qtts_engine_close(eng17);
    qtts_engine_close(cv);
}

/* ==== CLI ================================================================== */

static int run(char *out, size_t cap, const char *cmd) {
    char full[2048];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static void test_cli(void) {
    char out[4096], cmd[1536], dir[64];
    snprintf(dir, sizeof dir, "/tmp/qtts_test_clone_cli_%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    REQUIRE(system(cmd) == 0, "mkdir");
    const char *bin = QTTS_BIN, *m = MODELS "/base06", *a = QTTS_FIXTURES "/audio/ref_16k_mono.wav";
    snprintf(cmd, sizeof cmd,
             "%s synth -m %s --ref-audio %s --ref-text 'Hello there.' --text 'Good day.' --greedy "
             "--max-frames 6 -q --f32 -o %s/a.wav --save-voice %s/v.voice",
             bin, m, a, dir, dir);
    int rc = run(out, sizeof out, cmd);
    CHECK(rc == 0, "synth --ref-audio: %d %s", rc, out);
    snprintf(cmd, sizeof cmd,
             "%s synth -m %s --voice %s/v.voice --text 'Good day.' --greedy --max-frames 6 -q --f32 "
             "-o %s/b.wav && cmp %s/a.wav %s/b.wav",
             bin, m, dir, dir, dir, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0, "synth --voice differs from --ref-audio: %d %s", rc, out);
    /* streamed: the same samples, or all but the first (check_streamed_clone
     * has which); f32 WAVs of 4-byte samples behind the same header, so
     * their last bytes past any header's 100 agree */
    snprintf(cmd, sizeof cmd,
             "%s synth -m %s --voice %s/v.voice --text 'Good day.' --greedy --max-frames 6 -q --f32 "
             "--stream -o %s/c.wav && a=$(stat -c %%s %s/a.wav) && c=$(stat -c %%s %s/c.wav) && "
             "test $((a - c)) -ge 0 && test $((a - c)) -le 4 && "
             "tail -c $((c - 100)) %s/a.wav > %s/a.t && tail -c $((c - 100)) %s/c.wav > %s/c.t && "
             "cmp %s/a.t %s/c.t",
             bin, m, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0, "synth --voice --stream: %d %s", rc, out);
    /* bench of a clone reports the reference skip apart */
    snprintf(cmd, sizeof cmd, "%s bench -m %s --voice %s/v.voice -j 1 --runs 1 --frames 4 -q", bin, m, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0 && strstr(out, "reference skip"), "bench --voice: %d %s", rc, out);
    /* bench --json: one JSON object whose machine block names the last-level
     * cache and whether the code predictor's layers count as resident in it
     * (a tiny model's fit any cache of known size), and has the threads'
     * round trip, null with one thread */
    snprintf(cmd, sizeof cmd,
             "(%s bench -m %s --voice %s/v.voice -j 1 --runs 1 --frames 3 -q --json 2>/dev/null)",
             bin, m, dir);
    rc = run(out, sizeof out, cmd);
    {
        qtts_err jerr = {0};
        qtts_json *doc = rc == 0 ? qtts_json_parse(out, strlen(out), NULL, "bench --json", &jerr)
                                 : NULL;
        const qtts_json *mach = doc ? qtts_json_get(doc, "machine") : NULL;
        const qtts_json *rt = mach ? qtts_json_get(mach, "thread_round_trip_ns") : NULL;
        double llc = -1;
        bool resident = false;
        CHECK(mach && qtts_json_get_num(mach, "llc_mb", &llc) &&
                  qtts_json_get_bool(mach, "cp_resident", &resident) && llc >= 0 &&
                  resident == (llc > 0) && rt && rt->type == QTTS_JSON_NULL,
              "bench --json machine block: rc %d, %s %s", rc, jerr.msg, out);
        bool ov = true;
        CHECK(doc && qtts_json_get_bool(doc, "codec_overlap", &ov) && !ov &&
                  !qtts_json_get(doc, "serial_codec"),
              "bench --json -j 1: no run beside generation: %s", out);
        qtts_json_free(doc);
    }
    /* on two threads each timed run has its twin with the codec beside
     * generation, whose RTF is the one given; --serial-codec drops it */
    for (int serial = 0; serial < 2; serial++) {
        snprintf(cmd, sizeof cmd,
                 "(%s bench -m %s --voice %s/v.voice -j 2 --runs 2 --frames 6 -q --json %s "
                 "2>/dev/null)",
                 bin, m, dir, serial ? "--serial-codec" : "");
        rc = run(out, sizeof out, cmd);
        qtts_err jerr = {0};
        qtts_json *doc = rc == 0 ? qtts_json_parse(out, strlen(out), NULL, "bench --json", &jerr)
                                 : NULL;
        const qtts_json *sc = doc ? qtts_json_get(doc, "serial_codec") : NULL;
        bool ov = serial;
        double rtf = 0, srtf = 0, ratio = 0;
        CHECK(doc && qtts_json_get_bool(doc, "codec_overlap", &ov) && ov == !serial &&
                  qtts_json_get_num(doc, "rtf", &rtf) && rtf > 0 &&
                  (serial ? !sc
                          : sc && qtts_json_get_num(sc, "rtf", &srtf) && srtf > 0 &&
                                qtts_json_get_num(sc, "overlap_rtf_ratio", &ratio) && ratio > 0),
              "bench --json -j 2%s: rc %d, %s %s", serial ? " --serial-codec" : "", rc, jerr.msg,
              out);
        qtts_json_free(doc);
    }
    snprintf(cmd, sizeof cmd, "%s voice create -m %s --ref-audio %s -l german -o %s/x.voice", bin, m,
             a, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0 && strstr(out, "x-vector only") && strstr(out, "german"), "voice create: %d %s", rc,
          out);
    snprintf(cmd, sizeof cmd, "%s voice create -m %s --ref-audio %s -q -o %s/q.voice && test -s %s/q.voice",
             bin, m, a, dir, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0 && !out[0], "voice create -q: %d '%s'", rc, out);
    /* a transcript with terminal controls is kept, and printed escaped */
    snprintf(cmd, sizeof cmd,
             "%s synth -m %s --ref-audio %s --ref-text \"$(printf 'Hi\\033[31m there\\007.')\" "
             "--text 'Good day.' --max-frames 3 -q -o %s/e.wav --save-voice %s/e.voice && "
             "%s voice info -m %s %s/e.voice",
             bin, m, a, dir, dir, bin, m, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0 && strstr(out, "text \"Hi\\u001b[31m there\\u0007.\"") && !strchr(out, 0x1b) &&
              !strchr(out, 0x07),
          "voice info with controls in the transcript: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s voice list -m %s %s", bin, m, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 0 && strstr(out, "v.voice") && strstr(out, "x.voice") && strstr(out, "in-context"),
          "voice list: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s voice info -m " MODELS "/base17 %s/v.voice", bin, dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "hidden"), "profile on another model: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s synth -m " MODELS "/cv06 -s vivian --ref-audio %s --text hi -o /dev/null",
             bin, a);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "Base"), "--ref-audio on CustomVoice: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s synth -m %s --voice /nonexistent.voice --text hi -o /dev/null", bin, m);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "/nonexistent.voice"), "missing profile: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s synth -m %s --text hi -o /dev/null", bin, m);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "reference audio"), "Base without a voice: %d %s", rc, out);
    /* a missing recording is reported before the model is opened (this model does not exist) */
    snprintf(cmd, sizeof cmd,
             "%s synth -m /nonexistent-model --ref-audio /nonexistent.wav --text hi -o /dev/null", bin);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "/nonexistent.wav") && !strstr(out, "nonexistent-model"),
          "synth, missing recording: %d %s", rc, out);
    snprintf(cmd, sizeof cmd,
             "%s voice create -m /nonexistent-model --ref-audio /nonexistent.wav -o %s/n.voice", bin,
             dir);
    rc = run(out, sizeof out, cmd);
    CHECK(rc == 1 && strstr(out, "/nonexistent.wav") && !strstr(out, "nonexistent-model"),
          "voice create, missing recording: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    TEST_RUN(test_goldens_base06);
    TEST_RUN(test_goldens_base17);
    TEST_RUN(test_bad_voice_input);
    TEST_RUN(test_cli);
    TEST_END();
}
