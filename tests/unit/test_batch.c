/*
 * test_batch.c - incremental and batched synthesis: every sequence of a
 * batch gets exactly the bits it gets alone.
 *
 * Stage level (model/talker.h, model/generate.h, tiny models, no codec):
 *   - qtts_gen_step_batch over generations that join at different steps and
 *     end at different times (greedy and seeded sampling, streaming and
 *     non-streaming prompts): frames, draws, EOS and the whole debug capture
 *     (talker logits and hidden, CP logits) memcmp-equal to qtts_generate
 *     alone;
 *   - qtts_talker_step_batch / qtts_cp_frame_batch: a job that fails (KV
 *     cache full, c0 out of range, non-finite CP logits) fails alone, the
 *     others equal their single-sequence calls bit for bit;
 *   - a bad batch list (inactive generation, shared sequence) does nothing.
 *
 * Public API (include/qwen3_tts.h, cv06 and cv17): a queue of requests
 * (every greedy golden case, seeded sampled requests, on cv06 one request
 * past the 300-frame decode window, a request cancelled by its frame
 * callback mid-run, an audio callback failing at finish, requests with bad
 * input, and one the scheduler cancels mid-way) runs through a pool of B = 1..5
 * sessions: requests join when a slot frees and not before their join step,
 * leave when they end, and each one's status, result, codes and PCM must
 * equal (memcmp) its own qtts_synthesize run; greedy golden codes must equal
 * the reference's. Misuse in the middle of a run (a session twice in a
 * list, an idle session in a list, finish while running, start while busy,
 * sessions of two engines) is refused without side effects.
 */
#include <dirent.h>
#include <errno.h>

#include "harness.h"
#include "qwen3_tts.h"
#include "base/json.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/prompt.h"
#include "model/talker.h"
#include "model/tokenizer.h"

#define GOLDEN QTTS_FIXTURES "/golden"
#define MODELS QTTS_FIXTURES "/models"
#define MAXB 5

/* ====================================================================== */
/* Stage level                                                             */
/* ====================================================================== */

typedef struct {
    qtts_config cfg;
    qtts_st_set *st;
    qtts_talker_weights *w;
    qtts_tokenizer *tok;
    qtts_backend *be;
} tiny_model;

static bool model_open(const char *name, tiny_model *m) {
    char dir[256];
    qtts_err err = {0};
    memset(m, 0, sizeof(*m));
    snprintf(dir, sizeof dir, "%s/%s", MODELS, name);
    if (qtts_config_load(dir, &m->cfg, &err) || qtts_st_set_open(dir, "model", &m->st, &err) ||
        qtts_talker_load(&m->cfg, m->st, &m->w, &err) || qtts_tokenizer_load(dir, &m->tok, &err) ||
        qtts_backend_open("cpu", m->w, NULL, &m->be, &err)) {
        CHECK(0, "open model %s: %s", name, err.msg);
        return false;
    }
    return true;
}

static void model_close(tiny_model *m) {
    qtts_backend_close(m->be);
    qtts_talker_free(m->w);
    qtts_st_set_close(m->st);
    qtts_tokenizer_free(m->tok);
}

static bool build_prompt(const tiny_model *m, const char *text, const char *speaker, bool ns,
                         qtts_prompt *p) {
    char *t = qtts_prompt_text_template(text);
    int32_t *ids = NULL;
    size_t n = 0;
    qtts_err err = {0};
    bool ok = t && qtts_tokenizer_encode(m->tok, t, strlen(t), &ids, &n, &err) == QTTS_OK;
    qtts_free(t);
    qtts_prompt_spec spec = {.input_ids = ids, .n_input = (int)n, .language = "auto",
                             .speaker = speaker, .non_streaming = ns};
    ok = ok && qtts_prompt_build(m->w, &m->cfg, &spec, p, &err) == QTTS_OK;
    CHECK(ok, "prompt '%s': %s", text, err.msg);
    qtts_free(ids);
    return ok;
}

/* One generation's observable output. */
typedef struct {
    qtts_gen_debug dbg;
    int32_t *frames;      /* [cap, G] */
    int n_frames, cap, G;
    bool order_ok;        /* frames arrived as 0, 1, 2, ... */
    qtts_gen_result r;
    qtts_status st;
} gen_out;

static int sink_frame(void *user, int k, const int32_t *codes) {
    gen_out *o = user;
    if (k != o->n_frames || k >= o->cap) o->order_ok = false;
    if (k < o->cap) memcpy(o->frames + (size_t)k * o->G, codes, sizeof(int32_t) * o->G);
    o->n_frames++;
    return 0;
}

static void gen_out_init(gen_out *o, const qtts_talker_weights *w, int cap) {
    const int V = w->vocab, H = w->hidden, G = w->n_groups, Vc = w->cp_vocab;
    memset(o, 0, sizeof *o);
    o->G = G;
    o->cap = cap;
    o->order_ok = true;
    o->frames = calloc((size_t)cap * G, sizeof(int32_t));
    o->dbg = (qtts_gen_debug){
        .cap_draws = cap,
        .talker_logits = calloc((size_t)cap * V, sizeof(float)),
        .talker_tokens = calloc((size_t)cap, sizeof(int32_t)),
        .talker_margin = calloc((size_t)cap, sizeof(float)),
        .talker_hidden = calloc((size_t)cap * H, sizeof(float)),
        .cap_cp_frames = cap,
        .cp_logits = calloc((size_t)cap * (G - 1) * Vc, sizeof(float)),
    };
}

static void gen_out_free(gen_out *o) {
    free(o->frames);
    free(o->dbg.talker_logits);
    free(o->dbg.talker_tokens);
    free(o->dbg.talker_margin);
    free(o->dbg.talker_hidden);
    free(o->dbg.cp_logits);
}

static void gen_out_compare(const gen_out *a, const gen_out *b, const qtts_talker_weights *w,
                            const char *label) {
    const int V = w->vocab, H = w->hidden, G = w->n_groups, Vc = w->cp_vocab;
    CHECK(a->st == b->st, "%s: status %d vs %d", label, a->st, b->st);
    CHECK(a->r.n_draws == b->r.n_draws && a->r.n_frames == b->r.n_frames &&
              a->r.stopped_by_eos == b->r.stopped_by_eos,
          "%s: draws %d/%d frames %d/%d eos %d/%d", label, a->r.n_draws, b->r.n_draws,
          a->r.n_frames, b->r.n_frames, a->r.stopped_by_eos, b->r.stopped_by_eos);
    CHECK(a->order_ok && b->order_ok && a->n_frames == b->n_frames, "%s: frame order", label);
    const size_t d = (size_t)QTTS_MIN(a->r.n_draws, a->cap), f = (size_t)QTTS_MIN(a->n_frames, a->cap);
    CHECK(!memcmp(a->frames, b->frames, f * G * sizeof(int32_t)), "%s: frames differ", label);
    CHECK(!memcmp(a->dbg.talker_logits, b->dbg.talker_logits, d * V * sizeof(float)) &&
              !memcmp(a->dbg.talker_hidden, b->dbg.talker_hidden, d * H * sizeof(float)) &&
              !memcmp(a->dbg.talker_tokens, b->dbg.talker_tokens, d * sizeof(int32_t)) &&
              !memcmp(a->dbg.talker_margin, b->dbg.talker_margin, d * sizeof(float)),
          "%s: talker capture differs", label);
    CHECK(!memcmp(a->dbg.cp_logits, b->dbg.cp_logits, f * (G - 1) * Vc * sizeof(float)),
          "%s: code-predictor logits differ", label);
}

#define NGEN 6

/* Generations joining at different steps, batched, against each alone,
 * with the talker's KV cache in format kv. */
static void gen_batch_model(const char *name, qtts_kv_format kv) {
    tiny_model m;
    if (!model_open(name, &m)) return;
    m.w->kv = kv;   /* before the sequences are made */
    static const char *const texts[NGEN] = {
        "Hello there.", "A somewhat longer sentence, so the prompt differs in length.",
        "Short.", "Numbers: one, two, three, four, five, six.",
        "Streaming text goes one token per frame here.", "The last one joins late."};
    const int max_new[NGEN] = {14, 30, 9, 22, 40, 17};
    const int join[NGEN] = {0, 0, 3, 5, 5, 11};
    qtts_prompt p[NGEN] = {{0}};
    qtts_gen_params gp[NGEN];
    gen_out alone[NGEN], batched[NGEN];
    qtts_seq *seq[NGEN] = {0};
    qtts_gen gen[NGEN];
    memset(gen, 0, sizeof gen);
    qtts_err err = {0};
    bool ok = true;
    for (int i = 0; i < NGEN && ok; i++) {
        ok = build_prompt(&m, texts[i], m.cfg.speakers[i % m.cfg.n_speakers].name, i % 2 == 0,
                          &p[i]);
        qtts_gen_params_default(&m.cfg, &gp[i]);
        gp[i].max_new_tokens = max_new[i];
        gp[i].seed = 1000 + i;
        gp[i].talker.do_sample = gp[i].cp.do_sample = i % 3 != 0;  /* 0 and 3 greedy */
        if (i == 4) gp[i].talker.top_k = 7, gp[i].cp.temperature = 0.7f;
    }
    REQUIRE(ok, "prompts");
    for (int i = 0; i < NGEN; i++) {
        gen_out_init(&alone[i], m.w, max_new[i]);
        gen_out_init(&batched[i], m.w, max_new[i]);
        ok = m.be->ops->seq_new(m.be, p[i].len + max_new[i], &seq[i], &err) == QTTS_OK;
        REQUIRE(ok, "%s", err.msg);
        alone[i].st = qtts_generate(m.be, seq[i], m.w, &p[i], &gp[i], sink_frame, &alone[i],
                                    &alone[i].dbg, &alone[i].r, &err);
        CHECK(alone[i].st == QTTS_OK, "%s alone %d: %s", name, i, err.msg);
    }
    /* batched, joining at join[i]; the sequences are reused (begin resets them) */
    int started = 0, max_rows = 0;
    for (int step = 0; step < 200; step++) {
        for (int i = 0; i < NGEN; i++)
            if (join[i] == step) {
                batched[i].st = qtts_gen_begin(&gen[i], m.be, seq[i], m.w, &p[i], &gp[i],
                                               sink_frame, &batched[i], &batched[i].dbg, &err);
                CHECK(batched[i].st == QTTS_OK, "%s begin %d: %s", name, i, err.msg);
                started++;
            }
        qtts_gen *list[NGEN];
        int n = 0;
        for (int i = 0; i < NGEN; i++)
            if (gen[i].active) list[n++] = &gen[i];
        if (!n && started == NGEN) break;
        if (!n) continue;
        qtts_err errs[NGEN];
        CHECK(qtts_gen_step_batch(list, n, errs, &err) == QTTS_OK, "%s step: %s", name, err.msg);
        max_rows = QTTS_MAX(max_rows, n);
    }
    CHECK(max_rows >= 4, "%s: at most %d generations stepped together", name, max_rows);
    for (int i = 0; i < NGEN; i++) {
        batched[i].r = gen[i].r;
        if (!batched[i].st) batched[i].st = gen[i].status;
        qtts_gen_end(&gen[i]);
        char label[64];
        snprintf(label, sizeof label, "%s generation %d", name, i);
        gen_out_compare(&batched[i], &alone[i], m.w, label);
    }
    /* a bad list does nothing */
    qtts_gen ga, gb;
    ok = qtts_gen_begin(&ga, m.be, seq[1], m.w, &p[2], &gp[2], NULL, NULL, NULL, &err) == QTTS_OK &&
         qtts_gen_begin(&gb, m.be, seq[4], m.w, &p[2], &gp[2], NULL, NULL, NULL, &err) == QTTS_OK;
    CHECK(ok, "%s", err.msg);
    qtts_gen *dup[2] = {&ga, &ga}, *idle[2] = {&ga, &gen[0]};
    qtts_err e2[2];
    CHECK(qtts_gen_step_batch(dup, 2, e2, &err) == QTTS_ERR_INVALID && ga.r.n_frames == 0 &&
              ga.active,
          "duplicate entry: %s", err.msg);
    CHECK(qtts_gen_step_batch(idle, 2, e2, &err) == QTTS_ERR_INVALID && ga.r.n_frames == 0,
          "inactive entry: %s", err.msg);
    gb.seq = ga.seq;
    qtts_gen *shared[2] = {&ga, &gb};
    CHECK(qtts_gen_step_batch(shared, 2, e2, &err) == QTTS_ERR_INVALID && strstr(err.msg, "share"),
          "shared sequence: %s", err.msg);
    qtts_gen_end(&ga);
    qtts_gen_end(&gb);
    for (int i = 0; i < NGEN; i++) {
        gen_out_free(&alone[i]);
        gen_out_free(&batched[i]);
        m.be->ops->seq_free(m.be, seq[i]);
        qtts_prompt_free(&p[i]);
    }
    model_close(&m);
}

static void test_gen_batch_cv06(void) { gen_batch_model("cv06", QTTS_KV_F32); }
static void test_gen_batch_cv17(void) { gen_batch_model("cv17", QTTS_KV_F32); }
static void test_gen_batch_kv_bf16(void) { gen_batch_model("cv17", QTTS_KV_BF16); }

/* Per-job failures in the batched stages stay with their job. */
static void test_stage_batch_errors(void) {
    tiny_model m;
    if (!model_open("cv17", &m)) return;
    const int H = m.w->hidden, V = m.w->vocab, G = m.w->n_groups, Vc = m.w->cp_vocab;
    qtts_prompt p;
    REQUIRE(build_prompt(&m, "Errors stay with their own job.", "ryan", true, &p), "prompt");
    enum { N = 4 };
    qtts_talker_state *a[N], *b[N];
    qtts_err err = {0};
    for (int i = 0; i < N; i++) {
        /* state 2 is full after the prefill */
        const int cap = i == 2 ? p.len : p.len + 4;
        bool ok = qtts_talker_state_new(m.w, cap, &a[i], &err) == QTTS_OK &&
                  qtts_talker_state_new(m.w, cap, &b[i], &err) == QTTS_OK;
        REQUIRE(ok, "%s", err.msg);
    }
    float *lg = calloc((size_t)V * N * 2, sizeof(float)), *hid = calloc((size_t)H * N * 2, sizeof(float));
    float *x = malloc(sizeof(float) * H * N);
    for (int i = 0; i < N; i++) {
        /* different prompt lengths per state: prefill i rows fewer */
        const int L = p.len - i;
        CHECK(qtts_talker_prefill(m.w, a[i], p.embeds, i == 2 ? p.len : L, lg, hid, &err) == 0 &&
                  qtts_talker_prefill(m.w, b[i], p.embeds, i == 2 ? p.len : L, lg, hid, &err) == 0,
              "%s", err.msg);
        for (int d = 0; d < H; d++) x[(size_t)i * H + d] = p.embeds[(size_t)(p.len - 1) * H + d] * (1 + i);
    }
    /* batched talker step vs single */
    qtts_talker_step_job jobs[N];
    qtts_err jerr[N];
    for (int i = 0; i < N; i++)
        jobs[i] = (qtts_talker_step_job){.st = a[i], .x = x + (size_t)i * H,
                                         .logits = lg + (size_t)i * V, .hidden = hid + (size_t)i * H,
                                         .err = &jerr[i]};
    CHECK(qtts_talker_step_batch(m.w, jobs, N, &err) == QTTS_OK, "%s", err.msg);
    for (int i = 0; i < N; i++) {
        float *l1 = lg + (size_t)(N + i) * V, *h1 = hid + (size_t)(N + i) * H;
        qtts_status s1 = qtts_talker_step(m.w, b[i], x + (size_t)i * H, l1, h1, &err);
        CHECK(jobs[i].status == s1, "step job %d: %d vs %d", i, jobs[i].status, s1);
        if (i == 2) {
            CHECK(s1 == QTTS_ERR_LIMIT && strstr(jerr[i].msg, "full"), "full state: %s", jerr[i].msg);
            CHECK(qtts_talker_state_pos(a[i]) == p.len, "a failed job does not advance");
            continue;
        }
        CHECK(!memcmp(l1, lg + (size_t)i * V, sizeof(float) * V) &&
                  !memcmp(h1, hid + (size_t)i * H, sizeof(float) * H),
              "step job %d: batched bits differ from single", i);
        CHECK(qtts_talker_state_pos(a[i]) == qtts_talker_state_pos(b[i]), "positions");
    }
    /* batched CP vs single: job 1 has c0 out of range, job 3 a NaN hidden */
    qtts_sampler_params sp[N];
    qtts_rng ra[N], rb[N];
    int32_t ca[N][16], cb[N][16];
    float *pla = malloc(sizeof(float) * N * (G - 1) * Vc), *plb = malloc(sizeof(float) * N * (G - 1) * Vc);
    qtts_cp_job cj[N];
    for (int i = 0; i < N; i++) {
        sp[i] = (qtts_sampler_params){.do_sample = i % 2 == 0, .top_k = 10 + i, .top_p = 0.9f,
                                      .temperature = 0.9f};
        qtts_rng_seed(&ra[i], 77 + i);
        qtts_rng_seed(&rb[i], 77 + i);
        if (i == 3) hid[(size_t)i * H + 5] = NAN;
        cj[i] = (qtts_cp_job){.st = a[i], .hidden = hid + (size_t)i * H, .c0 = i == 1 ? V : 100 + i,
                              .sp = &sp[i], .rng = &ra[i], .codes_out = ca[i],
                              .cp_logits_out = pla + (size_t)i * (G - 1) * Vc, .err = &jerr[i]};
    }
    CHECK(qtts_cp_frame_batch(m.w, cj, N, &err) == QTTS_OK, "%s", err.msg);
    for (int i = 0; i < N; i++) {
        qtts_status s1 = qtts_cp_frame(m.w, b[i], hid + (size_t)i * H, cj[i].c0, &sp[i], &rb[i],
                                       cb[i], plb + (size_t)i * (G - 1) * Vc, &err);
        CHECK(cj[i].status == s1, "cp job %d: %d vs %d", i, cj[i].status, s1);
        if (i == 1) CHECK(s1 == QTTS_ERR_INVALID && strstr(jerr[i].msg, "c0"), "c0: %s", jerr[i].msg);
        if (i == 3) CHECK(s1 == QTTS_ERR_NUMERIC, "NaN: %s", jerr[i].msg);
        if (s1) continue;
        CHECK(!memcmp(ca[i], cb[i], sizeof(int32_t) * (G - 1)) &&
                  !memcmp(pla + (size_t)i * (G - 1) * Vc, plb + (size_t)i * (G - 1) * Vc,
                          sizeof(float) * (G - 1) * Vc) &&
                  !memcmp(&ra[i], &rb[i], sizeof ra[i]),
              "cp job %d: batched bits differ from single", i);
    }
    free(pla);
    free(plb);
    free(lg);
    free(hid);
    free(x);
    for (int i = 0; i < N; i++) {
        qtts_talker_state_free(a[i]);
        qtts_talker_state_free(b[i]);
    }
    qtts_prompt_free(&p);
    model_close(&m);
}

/* ====================================================================== */
/* Public API                                                              */
/* ====================================================================== */

typedef struct {
    int32_t *codes;
    int n_frames, cap;
    float *pcm;
    size_t n, pcm_cap;
    int audio_calls;
    int first_audio_at; /* frames received when the first audio arrived */
    int cancel_frame;   /* on_frame returns non-zero at this frame (-1 never) */
    int fail_audio;     /* on_audio returns non-zero at this call (-1 never) */
    bool closed;        /* the request is over: no callback may fire */
    bool bad;           /* a callback fired out of order or after the end */
} collect;

static int on_frame(void *user, int idx, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    collect *c = user;
    if (c->closed || idx != c->n_frames) c->bad = true;
    if (c->n_frames == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->codes = realloc(c->codes, (size_t)c->cap * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
        if (!c->codes) return 1;
    }
    memcpy(c->codes + (size_t)c->n_frames * QTTS_NUM_CODEBOOKS, codes,
           QTTS_NUM_CODEBOOKS * sizeof(int32_t));
    c->n_frames++;
    return idx == c->cancel_frame;
}

static int on_audio(void *user, const float *pcm, size_t n) {
    collect *c = user;
    if (c->closed) c->bad = true;
    if (!c->audio_calls) c->first_audio_at = c->n_frames;
    if (c->n + n > c->pcm_cap) {
        c->pcm_cap = (c->n + n) * 2;
        c->pcm = realloc(c->pcm, c->pcm_cap * sizeof(float));
        if (!c->pcm) return 1;
    }
    memcpy(c->pcm + c->n, pcm, n * sizeof(float));
    c->n += n;
    return c->audio_calls++ == c->fail_audio;
}

typedef struct {
    qtts_status st;
    qtts_result res;
    qtts_error err;
    collect c;
    bool sched_cancelled;  /* the driver cancelled it */
} outcome;

typedef struct {
    char name[64];
    qtts_request req;
    int cancel_frame, fail_audio;
    int join_step;         /* not started before this driver step */
    int cancel_after;      /* the driver cancels it once it has this many frames (-1 never) */
    qtts_st_file *golden;  /* greedy golden codes, or NULL */
    qtts_json *doc;        /* owns the request strings of golden jobs */
    collect *live;         /* the collect its callbacks write to (req.user) */
    outcome ref;           /* alone, through qtts_synthesize */
} job;

static void collect_reset(job *j, collect *c) {
    memset(c, 0, sizeof *c);
    c->cancel_frame = j->cancel_frame;
    c->fail_audio = j->fail_audio;
    j->req.user = c;
}

static qtts_json *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    qtts_json_limits lim = qtts_json_limits_files();
    qtts_err err;
    return qtts_json_parse(buf, n, &lim, path, &err);
}

static const char *json_str(const qtts_json *o, const char *key) {
    const qtts_json *v = qtts_json_get(o, key);
    return v && v->type == QTTS_JSON_STRING ? v->str : NULL;
}

static job *add_job(job *jobs, int *n, const char *name) {
    job *j = &jobs[(*n)++];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    qtts_request_init(&j->req);
    j->req.on_frame = on_frame;
    j->req.on_audio = on_audio;
    j->cancel_frame = j->fail_audio = j->cancel_after = -1;
    return j;
}

/* Every greedy golden case of the model, as test_engine builds it. */
static void add_golden_jobs(job *jobs, int *n, int max, const char *model) {
    char dir[256];
    snprintf(dir, sizeof dir, GOLDEN "/%s", model);
    DIR *d = opendir(dir);
    CHECK(d, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    char names[32][64];
    int nn = 0;
    while (d && (de = readdir(d)) && nn < 32) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
        snprintf(names[nn++], sizeof names[0], "%.*s", (int)(l - 5), de->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)nn, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nn && *n < max; i++) {
        char path[512];
        snprintf(path, sizeof path, "%.256s/%.63s.json", dir, names[i]);
        qtts_json *doc = load_json(path);
        CHECK(doc, "cannot parse %s", path);
        if (!doc) continue;
        const qtts_json *in = qtts_json_get(doc, "inputs");
        int64_t max_new = 0;
        bool ns = true;
        CHECK(in && qtts_json_get_int(in, "max_new_tokens", &max_new) &&
                  qtts_json_get_bool(in, "non_streaming_mode", &ns),
              "%s: inputs", path);
        job *j = add_job(jobs, n, names[i]);
        j->doc = doc;
        j->req.text = json_str(in, "text");
        j->req.speaker = json_str(in, "speaker");
        j->req.language = json_str(in, "language");
        j->req.instruct = json_str(in, "instruct");
        j->req.text_mode = ns ? QTTS_TEXT_MODE_NON_STREAMING : QTTS_TEXT_MODE_STREAMING;
        j->req.do_sample = 0;
        j->req.subtalker_do_sample = 0;
        j->req.max_new_tokens = (int)max_new;
        snprintf(path, sizeof path, "%.256s/%.63s.safetensors", dir, names[i]);
        qtts_err e;
        CHECK(qtts_st_open(path, &j->golden, &e) == QTTS_OK, "%s", e.msg);
    }
}

/* The request queue of one model: goldens, sampled requests, long ones
 * (past the 300-frame window, on request), callback cancels and failures, bad input
 * and a driver cancel. Join steps stagger the starts. */
static int make_jobs(job *jobs, int max, const char *model, const char *speaker, bool long_jobs) {
    int n = 0;
    add_golden_jobs(jobs, &n, max, model);
    static const char *const texts[] = {
        "Sampling with a seed gives the same audio in any batch.",
        "Another sampled request, a bit different.",
        "Third one: with its own top-k and temperature.",
    };
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "sampled%d", i);
        job *j = add_job(jobs, &n, name);
        j->req.text = texts[i];
        j->req.speaker = speaker;
        j->req.do_sample = 1;
        j->req.subtalker_do_sample = 1;
        j->req.seed = 11 + (uint64_t)i;
        j->req.max_new_tokens = 20 + 15 * i;
        j->req.text_mode = i == 1 ? QTTS_TEXT_MODE_STREAMING : QTTS_TEXT_MODE_DEFAULT;
        if (i == 2) {
            j->req.top_k = 20;
            j->req.temperature = 0.8f;
            j->req.subtalker_top_p = 0.7f;
        }
    }
    job *j;
    if (long_jobs) {
        j = add_job(jobs, &n, "long_greedy");  /* audio of the 300-frame window mid-run */
        j->req.text = "Hello there, this is a long test.";
        j->req.speaker = speaker;
        j->req.do_sample = 0;
        j->req.subtalker_do_sample = 0;
        j->req.max_new_tokens = 330;
    }
    j = add_job(jobs, &n, "driver_cancel");
    j->req.text = "A sampled request that the scheduler drops half way.";
    j->req.speaker = speaker;
    j->req.seed = 3;
    j->req.max_new_tokens = 80;
    j->cancel_after = 40;
    j = add_job(jobs, &n, "frame_cancel");
    j->req.text = "The frame callback cancels this one.";
    j->req.speaker = speaker;
    j->req.seed = 9;
    j->req.max_new_tokens = 30;
    j->cancel_frame = 6;
    j = add_job(jobs, &n, "audio_fails_at_finish");
    j->req.text = "The audio callback refuses the final window.";
    j->req.speaker = speaker;
    j->req.do_sample = 0;
    j->req.max_new_tokens = 15;
    j->fail_audio = 0;
    j = add_job(jobs, &n, "bad_speaker");
    j->req.text = "Nobody speaks this.";
    j->req.speaker = "nobody";
    j = add_job(jobs, &n, "bad_temperature");
    j->req.text = "Zero temperature.";
    j->req.speaker = speaker;
    j->req.do_sample = 1;
    j->req.temperature = 0;
    for (int i = 0; i < n; i++) jobs[i].join_step = (i * 5) % 13;
    return n;
}

static void free_jobs(job *jobs, int n) {
    for (int i = 0; i < n; i++) {
        free(jobs[i].ref.c.codes);
        free(jobs[i].ref.c.pcm);
        qtts_st_close(jobs[i].golden);
        qtts_json_free(jobs[i].doc);
    }
}

static void run_alone(qtts_engine *eng, job *j) {
    outcome *o = &j->ref;
    memset(o, 0, sizeof *o);
    collect_reset(j, &o->c);
    qtts_session *s = qtts_session_new(eng, &o->err);
    REQUIRE(s, "%s", o->err.msg);
    o->st = qtts_synthesize(s, &j->req, &o->res, &o->err);
    o->c.closed = true;
    qtts_session_free(s);
    if (j->golden && o->st == QTTS_OK) {
        const qtts_tensor *t = qtts_st_find(j->golden, "codes");
        bool same = t && t->dtype == QTTS_DT_I64 && (int)t->shape[0] == o->c.n_frames;
        for (uint64_t i = 0; same && i < t->numel; i++)
            same = o->c.codes[i] == ((const int64_t *)t->data)[i];
        CHECK(same, "%s: alone, codes differ from the golden", j->name);
    }
}

/* memcmp for possibly empty (NULL) buffers. */
static bool same(const void *a, const void *b, size_t n) {
    return n == 0 || (a && b && !memcmp(a, b, n));
}

static void compare(const job *j, const outcome *got, int B) {
    const outcome *ref = &j->ref;
    CHECK(!got->c.bad, "B=%d %s: a callback fired out of order or after the end", B, j->name);
    if (got->sched_cancelled) {
        /* what it delivered before the cancel is the start of its lone run */
        CHECK(got->c.n_frames >= j->cancel_after && got->c.n_frames < ref->c.n_frames,
              "B=%d %s: cancelled after %d frames", B, j->name, got->c.n_frames);
        CHECK(same(got->c.codes, ref->c.codes,
                      sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)got->c.n_frames) &&
                  got->c.n <= ref->c.n && same(got->c.pcm, ref->c.pcm, sizeof(float) * got->c.n),
              "B=%d %s: output before the cancel differs", B, j->name);
        return;
    }
    CHECK(j->cancel_after < 0 || ref->c.n_frames <= j->cancel_after,
          "B=%d %s: the driver did not cancel it", B, j->name);
    CHECK(got->st == ref->st && !strcmp(got->err.msg, ref->err.msg),
          "B=%d %s: status %d '%s', alone %d '%s'", B, j->name, got->st, got->err.msg, ref->st,
          ref->err.msg);
    CHECK(got->c.n_frames == ref->c.n_frames &&
              same(got->c.codes, ref->c.codes,
                      sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)ref->c.n_frames),
          "B=%d %s: codes differ (%d frames, alone %d)", B, j->name, got->c.n_frames,
          ref->c.n_frames);
    CHECK(got->c.n == ref->c.n && same(got->c.pcm, ref->c.pcm, sizeof(float) * ref->c.n),
          "B=%d %s: PCM differs (%zu samples, alone %zu)", B, j->name, got->c.n, ref->c.n);
    CHECK(got->c.audio_calls == ref->c.audio_calls &&
              got->c.first_audio_at == ref->c.first_audio_at,
          "B=%d %s: %d audio calls, the first after %d frames (alone %d, %d)", B, j->name,
          got->c.audio_calls, got->c.first_audio_at, ref->c.audio_calls, ref->c.first_audio_at);
    CHECK(got->res.n_frames == ref->res.n_frames && got->res.hit_eos == ref->res.hit_eos &&
              got->res.n_samples == ref->res.n_samples &&
              !strcmp(got->res.warning, ref->res.warning),
          "B=%d %s: result %d/%d/%zu vs %d/%d/%zu", B, j->name, got->res.n_frames,
          got->res.hit_eos, got->res.n_samples, ref->res.n_frames, ref->res.hit_eos,
          ref->res.n_samples);
}

/* Misuse in the middle of a run: refused, nothing changes. */
static void misuse(qtts_session **pool, const int *at, qtts_session **run, int n, int B,
                   const job *busy_job) {
    const int frames_before = ((collect *)busy_job->req.user)->n_frames;
    qtts_error errs[MAXB + 1], e;
    qtts_session *dup[2] = {run[0], run[0]};
    CHECK(qtts_step_batch(dup, 2, errs) == QTTS_ERR_INVALID && strstr(errs[1].msg, "twice"),
          "duplicate: %s", errs[1].msg);
    CHECK(qtts_step_batch(run, 0, errs) == QTTS_ERR_INVALID, "empty list");
    for (int k = 0; k < B; k++)
        if (at[k] < 0) {
            qtts_session *mixed[2] = {run[0], pool[k]};
            CHECK(qtts_step_batch(mixed, 2, errs) == QTTS_ERR_INVALID &&
                      strstr(errs[0].msg, "not generating"),
                  "idle session in the list: %s", errs[0].msg);
            CHECK(qtts_session_finish(pool[k], NULL, &e) == QTTS_ERR_INVALID, "finish idle");
            break;
        }
    CHECK(qtts_session_finish(run[0], NULL, &e) == QTTS_ERR_INVALID && qtts_session_active(run[0]),
          "finish while running: %s", e.msg);
    CHECK(qtts_session_start(run[0], &busy_job->req, &e) == QTTS_ERR_INVALID &&
              qtts_session_active(run[0]),
          "start while busy: %s", e.msg);
    CHECK(((collect *)busy_job->req.user)->n_frames == frames_before, "misuse changed a session");
}

/* Runs the queue through a pool of B sessions. */
static void run_batch(qtts_engine *eng, job *jobs, int nj, int B) {
    qtts_session *pool[MAXB];
    int at[MAXB];
    qtts_error e;
    outcome *out = calloc((size_t)nj, sizeof *out);
    REQUIRE(out, "oom");
    for (int k = 0; k < B; k++) {
        pool[k] = qtts_session_new(eng, &e);
        REQUIRE(pool[k], "%s", e.msg);
        at[k] = -1;
    }
    int next = 0, steps = 0, max_rows = 0, mid_joins = 0;
    bool misused = false;
    for (int step = 0; step < 4000; step++) {
        /* leave: sessions that ended (EOS, limit, failure) */
        for (int k = 0; k < B; k++)
            if (at[k] >= 0 && !qtts_session_active(pool[k])) {
                outcome *o = &out[at[k]];
                o->st = qtts_session_finish(pool[k], &o->res, &o->err);
                o->c.closed = true;
                at[k] = -1;
            }
        /* join: free slots take the next request once its join step came */
        int running = 0;
        for (int k = 0; k < B; k++) running += at[k] >= 0;
        for (int k = 0; k < B; k++)
            while (at[k] < 0 && next < nj && jobs[next].join_step <= step) {
                job *j = &jobs[next];
                outcome *o = &out[next];
                collect_reset(j, &o->c);
                o->st = qtts_session_start(pool[k], &j->req, &o->err);
                if (o->st) {  /* bad input: the session stays idle, the others go on */
                    CHECK(!qtts_session_active(pool[k]), "failed start left it active");
                    snprintf(o->res.warning, sizeof o->res.warning, "%s", j->ref.res.warning);
                    o->c.closed = true;
                    next++;
                    continue;
                }
                if (running && steps) mid_joins++;
                at[k] = next++;
            }
        /* the driver's cancel, mid-way */
        for (int k = 0; k < B; k++)
            if (at[k] >= 0 && jobs[at[k]].cancel_after >= 0 &&
                out[at[k]].c.n_frames >= jobs[at[k]].cancel_after && qtts_session_active(pool[k])) {
                qtts_session_cancel(pool[k]);
                out[at[k]].sched_cancelled = true;
                out[at[k]].c.closed = true;
                at[k] = -1;
            }
        qtts_session *run[MAXB];
        int n = 0, first = -1;
        for (int k = 0; k < B; k++)
            if (at[k] >= 0 && qtts_session_active(pool[k])) {
                if (first < 0) first = at[k];
                run[n++] = pool[k];
            }
        if (!n) {
            bool any = false;
            for (int k = 0; k < B; k++) any |= at[k] >= 0;
            if (!any && next >= nj) break;
            continue;
        }
        if (!misused && steps >= 8) {
            misuse(pool, at, run, n, B, &jobs[first]);
            misused = true;
        }
        qtts_error errs[MAXB];
        memset(errs, 0x5a, sizeof errs);
        qtts_status st = qtts_step_batch(run, n, errs);
        CHECK(st == QTTS_OK, "B=%d step %d: %s", B, step, qtts_status_str(st));
        for (int i = 0; i < n; i++)
            CHECK(errs[i].status == QTTS_OK ? !errs[i].msg[0] : !qtts_session_active(run[i]),
                  "B=%d: errs[%d] status %d", B, i, errs[i].status);
        steps++;
        max_rows = QTTS_MAX(max_rows, n);
    }
    CHECK(next == nj, "B=%d: %d of %d requests started", B, next, nj);
    for (int k = 0; k < B; k++) CHECK(at[k] < 0, "B=%d: slot %d never ended", B, k);
    CHECK(max_rows == B, "B=%d: at most %d sessions stepped together", B, max_rows);
    CHECK(B == 1 || mid_joins > 0, "B=%d: no request joined a running batch", B);
    for (int i = 0; i < nj; i++) {
        compare(&jobs[i], &out[i], B);
        free(out[i].c.codes);
        free(out[i].c.pcm);
    }
    for (int k = 0; k < B; k++) qtts_session_free(pool[k]);
    free(out);
}

static void batch_model(const char *model, const char *speaker, bool long_jobs) {
    char dir[256];
    snprintf(dir, sizeof dir, MODELS "/%s", model);
    qtts_engine *eng = NULL;
    qtts_error err;
    REQUIRE(qtts_engine_open(dir, NULL, &eng, &err) == QTTS_OK, "%s", err.msg);
    job jobs[48];
    int nj = make_jobs(jobs, 32, model, speaker, long_jobs);
    int n_golden = 0, n_fail = 0;
    for (int i = 0; i < nj; i++) {
        run_alone(eng, &jobs[i]);
        n_golden += jobs[i].golden != NULL;
        n_fail += jobs[i].ref.st != QTTS_OK;
    }
    CHECK(n_golden >= 4, "%s: %d golden cases", model, n_golden);
    /* the queue really has what it is meant to have */
    for (int i = 0; i < nj; i++) {
        const job *j = &jobs[i];
        /* its first window's audio comes once its 300 frames exist: at frame
         * 300 when windows decode between frames, a push or so later where
         * the engine decodes them beside generation (two threads here) */
        if (!strcmp(j->name, "long_greedy"))
            CHECK(j->ref.st == QTTS_OK && j->ref.c.n_frames > 300 &&
                      j->ref.c.first_audio_at >= 300 &&
                      j->ref.c.first_audio_at < j->ref.c.n_frames && j->ref.c.audio_calls == 2,
                  "%s: long_greedy: %d frames, first audio after %d", model, j->ref.c.n_frames,
                  j->ref.c.first_audio_at);
        if (!strcmp(j->name, "frame_cancel"))
            CHECK(j->ref.st == QTTS_ERR_CANCELLED && j->ref.c.n_frames == 7, "%s: frame cancel",
                  model);
        if (!strcmp(j->name, "audio_fails_at_finish"))
            CHECK(j->ref.st == QTTS_ERR_CANCELLED && j->ref.res.n_frames > 0,
                  "%s: audio failure at finish", model);
    }
    CHECK(n_fail == 4, "%s: %d requests fail alone, want 4", model, n_fail);
    for (int B = 1; B <= MAXB; B++) run_batch(eng, jobs, nj, B);
    free_jobs(jobs, nj);
    qtts_engine_close(eng);
}

static void test_batch_cv06(void) { batch_model("cv06", "vivian", true); }
static void test_batch_cv17(void) { batch_model("cv17", "aiden", false); }

/* Sessions of two engines cannot share a batch; a failed or cancelled
 * session is reusable. */
static void test_two_engines(void) {
    qtts_engine *e6 = NULL, *e17 = NULL;
    qtts_error err;
    REQUIRE(qtts_engine_open(MODELS "/cv06", NULL, &e6, &err) == QTTS_OK, "%s", err.msg);
    REQUIRE(qtts_engine_open(MODELS "/cv17", NULL, &e17, &err) == QTTS_OK, "%s", err.msg);
    qtts_session *a = qtts_session_new(e6, &err), *b = qtts_session_new(e17, &err);
    REQUIRE(a && b, "%s", err.msg);
    qtts_request r;
    qtts_request_init(&r);
    r.text = "Two engines.";
    r.speaker = "ryan";
    r.max_new_tokens = 8;
    CHECK(qtts_session_start(a, &r, &err) == QTTS_OK && qtts_session_start(b, &r, &err) == QTTS_OK,
          "%s", err.msg);
    qtts_session *both[2] = {a, b};
    qtts_error errs[2];
    CHECK(qtts_step_batch(both, 2, errs) == QTTS_ERR_INVALID && strstr(errs[1].msg, "engine"),
          "two engines: %s", errs[1].msg);
    CHECK(qtts_session_active(a) && qtts_session_active(b), "still active");
    qtts_session_cancel(a);
    qtts_session_cancel(a);  /* idle: no-op */
    qtts_session_cancel(NULL);
    CHECK(!qtts_session_active(a) && !qtts_session_active(NULL), "cancelled");
    while (qtts_session_active(b)) CHECK(qtts_step_batch(&b, 1, NULL) == QTTS_OK, "step");
    qtts_result res;
    CHECK(qtts_session_finish(b, &res, &err) == QTTS_OK && res.n_frames > 0, "%s", err.msg);
    CHECK(qtts_session_finish(b, &res, &err) == QTTS_ERR_INVALID, "finish twice");
    CHECK(qtts_synthesize(a, &r, &res, &err) == QTTS_OK, "reuse after cancel: %s", err.msg);
    qtts_session_free(a);
    /* freeing a session mid-request is fine */
    CHECK(qtts_session_start(b, &r, &err) == QTTS_OK, "%s", err.msg);
    qtts_session_free(b);
    qtts_engine_close(e6);
    qtts_engine_close(e17);
}

int main(void) {
    TEST_RUN(test_gen_batch_cv06);
    TEST_RUN(test_gen_batch_cv17);
    TEST_RUN(test_gen_batch_kv_bf16);
    TEST_RUN(test_stage_batch_errors);
    TEST_RUN(test_batch_cv06);
    TEST_RUN(test_batch_cv17);
    TEST_RUN(test_two_engines);
    TEST_END();
}
