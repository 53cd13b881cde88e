/*
 * test_config.c - config.json / generation_config.json /
 * speech_tokenizer/config.json loading.
 *
 * The real 0.6B-CustomVoice files (copied into
 * tests/fixtures/real_configs/0.6b-customvoice, generation_config.json
 * written from spec 3.1) must load to exactly the values of spec 2. Bad
 * configs are made at test time by editing one spot of a real file in a
 * mkdtemp directory; each must be rejected with the expected status and a
 * message "<dir>/<file>: <key path>: <rule>". The tiny HF-layout models
 * under tests/fixtures/models must all load.
 */
#include "harness.h"

#include "io/config.h"

#include <sys/stat.h>
#include <unistd.h>

#define REAL_DIR QTTS_FIXTURES "/real_configs/0.6b-customvoice"

static const char *const cfg_files[3] = {"config.json", "generation_config.json",
                                         "speech_tokenizer/config.json"};
static char *real_text[3];
static char g_dir[64];

static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len;
    qtts_err err = {0};
    if (qtts_read_file(path, 1 << 20, &buf, &len, &err) != QTTS_OK) {
        fprintf(stderr, "cannot read fixture: %s\n", err.msg);
        exit(2);
    }
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* text with the nth (1-based) occurrence of find replaced by repl; NULL if
 * there are fewer occurrences (the fixture changed under the test). */
static char *replace_nth(const char *text, const char *find, const char *repl, int nth) {
    const char *at = text;
    for (int i = 0; i < nth; i++) {
        at = strstr(i ? at + 1 : at, find);
        if (!at) return NULL;
    }
    size_t pre = (size_t)(at - text), fl = strlen(find), rl = strlen(repl), tl = strlen(text);
    char *out = malloc(tl - fl + rl + 1);
    memcpy(out, text, pre);
    memcpy(out + pre, repl, rl);
    memcpy(out + pre + rl, at + fl, tl - pre - fl + 1);
    return out;
}

/* A model dir under g_dir holding the real files, with file `which`
 * replaced by `text` (which < 0: none). */
static void make_model_dir(char *dir, size_t cap, const char *name, int which, const char *text) {
    snprintf(dir, cap, "%s/%s", g_dir, name);
    mkdir(dir, 0700);
    char p[512];
    snprintf(p, sizeof p, "%s/speech_tokenizer", dir);
    mkdir(p, 0700);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cfg_files[i]);
        write_text(p, i == which ? text : real_text[i]);
    }
}

static void test_real_06b_customvoice(void) {
    qtts_config c;
    qtts_err err = {0};
    qtts_status st = qtts_config_load(REAL_DIR, &c, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);

    /* 2.2 top level */
    CHECK(c.model_type == QTTS_MODEL_CUSTOM_VOICE, "model type");
    CHECK(!strcmp(c.model_size, "0b6"), "size %s", c.model_size);
    CHECK(c.im_start_id == 151644 && c.im_end_id == 151645, "im ids");
    CHECK(c.tts_pad_id == 151671 && c.tts_bos_id == 151672 && c.tts_eos_id == 151673, "tts ids");

    /* 2.3 talker */
    const qtts_stack_config *t = &c.talker;
    CHECK(t->hidden == 1024 && t->inter == 3072 && t->layers == 28, "talker dims");
    CHECK(t->heads == 16 && t->kv_heads == 8 && t->head_dim == 128, "talker heads");
    CHECK(t->rms_eps == 1e-6f && t->rope_theta == 1e6, "talker eps/theta");
    CHECK(t->vocab == 3072 && t->num_code_groups == 16, "talker vocab/groups");
    CHECK(c.text_vocab == 151936 && c.text_hidden == 2048, "text vocab/hidden");
    CHECK(c.codec_pad_id == 2148 && c.codec_bos_id == 2149 && c.codec_eos_id == 2150, "codec ids");
    CHECK(c.codec_think_id == 2154 && c.codec_nothink_id == 2155 && c.codec_think_bos_id == 2156 &&
              c.codec_think_eos_id == 2157,
          "think ids");

    /* 2.4 code predictor */
    const qtts_stack_config *p = &c.cp;
    CHECK(p->hidden == 1024 && p->inter == 3072 && p->layers == 5, "cp dims");
    CHECK(p->heads == 16 && p->kv_heads == 8 && p->head_dim == 128, "cp heads");
    CHECK(p->vocab == 2048 && p->num_code_groups == 16 && p->rope_theta == 1e6 && p->rms_eps == 1e-6f,
          "cp vocab/groups/theta");
    CHECK(!c.has_speaker_encoder, "no speaker encoder");

    /* 2.6 languages, in file order */
    static const struct { const char *n; int id; } langs[] = {
        {"chinese", 2055},  {"english", 2050}, {"german", 2053},  {"italian", 2070},
        {"portuguese", 2071}, {"spanish", 2054}, {"japanese", 2058}, {"korean", 2064},
        {"french", 2061},   {"russian", 2069}, {"beijing_dialect", 2074}, {"sichuan_dialect", 2062},
    };
    REQUIRE(c.n_langs == 12, "n_langs %d", c.n_langs);
    for (int i = 0; i < 12; i++)
        CHECK(!strcmp(c.langs[i].name, langs[i].n) && c.langs[i].id == langs[i].id, "lang %d: %s %d", i,
              c.langs[i].name, c.langs[i].id);

    /* 2.6 speakers */
    static const struct { const char *n; int id; const char *dialect; } spk[] = {
        {"serena", 3066, ""}, {"vivian", 3065, ""}, {"uncle_fu", 3010, ""},
        {"ryan", 3061, ""},   {"aiden", 2861, ""},  {"ono_anna", 2873, ""},
        {"sohee", 2864, ""},  {"eric", 2875, "sichuan_dialect"}, {"dylan", 2878, "beijing_dialect"},
    };
    REQUIRE(c.n_speakers == 9, "n_speakers %d", c.n_speakers);
    for (int i = 0; i < 9; i++)
        CHECK(!strcmp(c.speakers[i].name, spk[i].n) && c.speakers[i].id == spk[i].id &&
                  !strcmp(c.speakers[i].dialect, spk[i].dialect),
              "speaker %d: %s %d '%s'", i, c.speakers[i].name, c.speakers[i].id, c.speakers[i].dialect);

    /* case-insensitive lookups */
    const qtts_speaker *e = qtts_config_find_speaker(&c, "ERIC");
    CHECK(e && e->id == 2875 && !strcmp(e->dialect, "sichuan_dialect"), "eric -> sichuan_dialect");
    CHECK(qtts_config_find_speaker(&c, "Uncle_Fu") && qtts_config_find_speaker(&c, "uncle_fu")->id == 3010,
          "uncle_fu");
    CHECK(!qtts_config_find_speaker(&c, "nobody") && !qtts_config_find_speaker(&c, NULL) &&
              !qtts_config_find_speaker(&c, "eri") && !qtts_config_find_speaker(&c, "erics"),
          "absent speakers");
    const qtts_named_id *l = qtts_config_find_lang(&c, "English");
    CHECK(l && l->id == 2050, "English");
    CHECK(qtts_config_find_lang(&c, "SICHUAN_DIALECT") && !qtts_config_find_lang(&c, "klingon") &&
              !qtts_config_find_lang(&c, ""),
          "lang lookups");

    /* 3.1 generation_config.json */
    CHECK(c.gen.do_sample && c.gen.top_k == 50 && c.gen.top_p == 1.0f && c.gen.temperature == 0.9f &&
              c.gen.repetition_penalty == 1.05f,
          "talker sampling");
    CHECK(c.gen.subtalker_do_sample && c.gen.subtalker_top_k == 50 && c.gen.subtalker_top_p == 1.0f &&
              c.gen.subtalker_temperature == 0.9f && c.gen.max_new_tokens == 8192,
          "subtalker sampling");

    /* 2.7 codec */
    CHECK(c.codec.codebook_size == 2048 && c.codec.codebook_dim == 512 && c.codec.latent_dim == 1024 &&
              c.codec.decoder_dim == 1536,
          "codec sizes");
    CHECK(c.codec.hidden == 512 && c.codec.inter == 1024 && c.codec.head_dim == 64 && c.codec.heads == 16 &&
              c.codec.kv_heads == 16 && c.codec.layers == 8,
          "codec transformer");
    CHECK(c.codec.num_quantizers == 16 && c.codec.num_semantic_quantizers == 1, "quantizers");
    CHECK(c.codec.rms_eps == 1e-5f && c.codec.layer_scale_init == 0.01f && c.codec.rope_theta == 10000 &&
              c.codec.sliding_window == 72,
          "codec eps/scale/theta/window");
    CHECK(c.codec.upsample_rates[0] == 8 && c.codec.upsample_rates[1] == 5 && c.codec.upsample_rates[2] == 4 &&
              c.codec.upsample_rates[3] == 3,
          "upsample_rates");
    CHECK(c.codec.upsampling_ratios[0] == 2 && c.codec.upsampling_ratios[1] == 2, "upsampling_ratios");
    CHECK(c.codec.decode_upsample_rate == 1920 && c.codec.output_sample_rate == 24000 &&
              c.codec.input_sample_rate == 24000 && c.codec.encode_downsample_rate == 1920 &&
              c.codec.encoder_valid_num_quantizers == 16,
          "codec rates");
}

/* The shipped Base layout: only enc_dim and sample_rate given; the rest
 * takes the reference's class defaults (spec 2.5). */
static void test_base_speaker_encoder_defaults(void) {
    char *t = replace_nth(real_text[0], "\"tts_model_type\": \"custom_voice\",",
                          "\"tts_model_type\": \"base\", \"speaker_encoder_config\": "
                          "{\"enc_dim\": 1024, \"sample_rate\": 24000},",
                          1);
    REQUIRE(t, "fixture drift");
    char dir[256];
    make_model_dir(dir, sizeof dir, "base_defaults", 0, t);
    free(t);
    qtts_config c;
    qtts_err err = {0};
    qtts_status st = qtts_config_load(dir, &c, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);
    CHECK(c.model_type == QTTS_MODEL_BASE && c.has_speaker_encoder, "base");
    CHECK(c.spk_enc_dim == 1024 && c.spk_sample_rate == 24000 && c.spk_mel_dim == 128, "enc_dim/sr/mel");
    static const int ch[5] = {512, 512, 512, 512, 1536}, k[5] = {5, 3, 3, 3, 1}, d[5] = {1, 2, 3, 4, 1};
    CHECK(!memcmp(c.spk_channels, ch, sizeof ch) && !memcmp(c.spk_kernels, k, sizeof k) &&
              !memcmp(c.spk_dilations, d, sizeof d),
          "array defaults");
    CHECK(c.spk_attn_channels == 128 && c.spk_res2net_scale == 8 && c.spk_se_channels == 128,
          "scalar defaults");
}

typedef struct {
    const char *name;
    int file;           /* index into cfg_files */
    const char *find;   /* text to replace (nth occurrence) */
    int nth;
    const char *repl;
    const char *expect; /* "<key path>: <rule>" part of the message */
    qtts_status status;
} bad_cfg;

#define F QTTS_ERR_FORMAT
#define BASE_WITH(se)                                                                          \
    "\"tts_model_type\": \"base\", \"speaker_encoder_config\": " se ","

static const bad_cfg bad_cfgs[] = {
    /* config.json: presence and types */
    {"missing_talker_head_dim", 0, "\"head_dim\": 128,", 2, "", "talker_config.head_dim: missing", F},
    {"missing_cp_head_dim", 0, "\"head_dim\": 128,", 1, "",
     "talker_config.code_predictor_config.head_dim: missing", F},
    {"missing_model_type", 0, "\"tts_model_type\": \"custom_voice\",", 1, "", "tts_model_type: missing", F},
    {"missing_text_vocab", 0, "\"text_vocab_size\": 151936,", 1, "", "talker_config.text_vocab_size: missing", F},
    {"missing_spk_id", 0, "\"spk_id\": {", 1, "\"spk_idx\": {", "talker_config.spk_id: missing", F},
    {"missing_tts_pad", 0, "\"tts_pad_token_id\": 151671,", 1, "", "tts_pad_token_id: missing", F},
    {"hidden_string", 0, "\"hidden_size\": 1024", 2, "\"hidden_size\": \"1024\"",
     "talker_config.hidden_size: must be a number, not string", F},
    {"hidden_fraction", 0, "\"hidden_size\": 1024", 2, "\"hidden_size\": 1024.5",
     "talker_config.hidden_size: must be an integer", F},
    {"hidden_exponent", 0, "\"hidden_size\": 1024", 2, "\"hidden_size\": 1.024e3",
     "talker_config.hidden_size: must be an integer", F},
    {"talker_not_object", 0, "\"talker_config\": {", 1, "\"talker_config\": [], \"x\": {",
     "talker_config: must be an object, not array", F},
    {"rope_theta_string", 0, "\"rope_theta\": 1000000,", 2, "\"rope_theta\": \"1e6\",",
     "talker_config.rope_theta: must be a number", F},
    {"hidden_act_gelu", 0, "\"hidden_act\": \"silu\"", 2, "\"hidden_act\": \"gelu\"",
     "talker_config.hidden_act: only \"silu\"", QTTS_ERR_UNSUPPORTED},
    /* config.json: ranges */
    {"hidden_zero", 0, "\"hidden_size\": 1024", 2, "\"hidden_size\": 0",
     "talker_config.hidden_size: 0 out of range [1, 1048576]", F},
    {"inter_huge", 0, "\"intermediate_size\": 3072", 2, "\"intermediate_size\": 1048577",
     "talker_config.intermediate_size: 1048577 out of range", F},
    {"layers_million", 0, "\"num_hidden_layers\": 28", 1, "\"num_hidden_layers\": 1000000",
     "talker_config.num_hidden_layers: 1000000 out of range [1, 256]", F},
    {"cp_layers_negative", 0, "\"num_hidden_layers\": 5", 1, "\"num_hidden_layers\": -5",
     "talker_config.code_predictor_config.num_hidden_layers: -5 out of range", F},
    {"kv_not_dividing", 0, "\"num_key_value_heads\": 8", 2, "\"num_key_value_heads\": 3",
     "talker_config.num_key_value_heads: 3 does not divide num_attention_heads 16", F},
    {"head_dim_odd", 0, "\"head_dim\": 128,", 2, "\"head_dim\": 127,", "talker_config.head_dim: 127 must be even", F},
    {"eps_zero", 0, "\"rms_norm_eps\": 1e-06", 2, "\"rms_norm_eps\": 0",
     "talker_config.rms_norm_eps: 0 out of range (0, 1]", F},
    {"model_type_unknown", 0, "\"tts_model_type\": \"custom_voice\"", 1, "\"tts_model_type\": \"foo\"",
     "tts_model_type: must be one of custom_voice, voice_design, base", QTTS_ERR_UNSUPPORTED},
    {"model_size_unknown", 0, "\"tts_model_size\": \"0b6\"", 1, "\"tts_model_size\": \"4b\"",
     "tts_model_size: must be one of 0b6, 1b7", QTTS_ERR_UNSUPPORTED},
    {"codec_eos_outside_vocab", 0, "\"codec_eos_token_id\": 2150", 1, "\"codec_eos_token_id\": 5000",
     "talker_config.codec_eos_token_id: 5000 out of range [0, 3071]", F},
    {"tts_pad_outside_text_vocab", 0, "\"tts_pad_token_id\": 151671", 1, "\"tts_pad_token_id\": 151936",
     "tts_pad_token_id: 151936 out of range [0, 151935]", F},
    {"speaker_outside_vocab", 0, "\"serena\": 3066", 1, "\"serena\": 4000",
     "talker_config.spk_id.serena: 4000 out of range [0, 3071]", F},
    {"language_negative", 0, "\"english\": 2050", 1, "\"english\": -1",
     "talker_config.codec_language_id.english: -1 out of range", F},
    {"language_not_int", 0, "\"english\": 2050", 1, "\"english\": \"2050\"",
     "talker_config.codec_language_id.english: must be an integer", F},
    {"cp_groups_8", 0, "\"num_code_groups\": 16", 1, "\"num_code_groups\": 8",
     "talker_config.code_predictor_config.num_code_groups: 8 is not supported", QTTS_ERR_UNSUPPORTED},
    {"talker_groups_32", 0, "\"num_code_groups\": 16", 2, "\"num_code_groups\": 32",
     "talker_config.num_code_groups: 32 is not supported", QTTS_ERR_UNSUPPORTED},
    {"talker_groups_100", 0, "\"num_code_groups\": 16", 2, "\"num_code_groups\": 100",
     "talker_config.num_code_groups: 100 out of range", F},
    /* rope_scaling */
    {"mrope_sum", 0, "        24,", 1, "        26,",
     "talker_config.rope_scaling.mrope_section: sums to 66, must be head_dim/2 = 64", F},
    {"mrope_missing", 0, "\"mrope_section\"", 1, "\"mrope_sections\"",
     "talker_config.rope_scaling.mrope_section: missing", F},
    {"rope_type_yarn", 0, "\"rope_type\": \"default\"", 1, "\"rope_type\": \"yarn\"",
     "talker_config.rope_scaling.rope_type: only \"default\"", QTTS_ERR_UNSUPPORTED},
    {"rope_scaling_number", 0, "\"rope_scaling\": {", 1, "\"rope_scaling\": 2, \"x\": {",
     "talker_config.rope_scaling: must be an object or null", F},
    {"cp_rope_scaling_linear", 0, "\"rope_scaling\": null", 1,
     "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}",
     "talker_config.code_predictor_config.rope_scaling.type: only \"default\"", QTTS_ERR_UNSUPPORTED},
    /* names */
    {"speaker_name_64", 0, "\"serena\": 3066", 1,
     "\"s123456789012345678901234567890123456789012345678901234567890123\": 3066",
     "talker_config.spk_id.s123456789012345678901234567890123456789012345678901234567890123: name of 64 "
     "bytes (must be 1..63)",
     F},
    {"speaker_name_control", 0, "\"serena\": 3066", 1, "\"ser\\nena\": 3066",
     "talker_config.spk_id.ser?ena: name contains a control character", F},
    {"speaker_name_c1_csi", 0, "\"serena\": 3066", 1, "\"ser\xc2\x9b" "ena\": 3066",
     "talker_config.spk_id.ser??ena: name contains a control character", F},
    {"speaker_case_duplicate", 0, "\"vivian\": 3065", 1, "\"SERENA\": 3065",
     "talker_config.spk_id.SERENA: duplicate name", F},
    {"language_case_duplicate", 0, "\"english\": 2050", 1, "\"Chinese\": 2050",
     "talker_config.codec_language_id.Chinese: duplicate name", F},
    {"too_many_languages", 0, "\"codec_language_id\": {", 1,
     "\"codec_language_id\": {\"a0\":1,\"a1\":1,\"a2\":1,\"a3\":1,\"a4\":1,\"a5\":1,\"a6\":1,\"a7\":1,"
     "\"a8\":1,\"a9\":1,\"b0\":1,\"b1\":1,\"b2\":1,\"b3\":1,\"b4\":1,\"b5\":1,\"b6\":1,\"b7\":1,\"b8\":1,"
     "\"b9\":1,\"c0\":1,",
     "talker_config.codec_language_id: 33 entries, more than 32", QTTS_ERR_LIMIT},
    {"dialect_unknown", 0, "\"eric\": \"sichuan_dialect\"", 1, "\"eric\": \"klingon_dialect\"",
     "talker_config.spk_is_dialect.eric: dialect is not a key of codec_language_id", F},
    {"dialect_true", 0, "\"serena\": false", 1, "\"serena\": true",
     "talker_config.spk_is_dialect.serena: must be false or a dialect name", F},
    {"dialect_missing_entry", 0, "\"serena\": false,", 1, "",
     "talker_config.spk_is_dialect.serena: missing", F},
    {"dialect_extra_entry", 0, "\"serena\": false,", 1, "\"serena\": false, \"nobody\": false,",
     "talker_config.spk_is_dialect.nobody: not a key of spk_id", F},
    /* JSON level */
    {"duplicate_key", 0, "\"hidden_size\": 1024,", 2, "\"hidden_size\": 1024, \"hidden_size\": 2048,",
     "duplicate key at byte", F},
    {"trailing_comma", 0, "\"pad_token_id\": 2148", 1, "\"pad_token_id\": 2148,",
     "object key must be a string at byte", F},
    /* speaker encoder (Base) */
    {"base_without_speaker_encoder", 0, "\"tts_model_type\": \"custom_voice\"", 1,
     "\"tts_model_type\": \"base\"", "speaker_encoder_config: missing", F},
    {"base_enc_dim_mismatch", 0, "\"tts_model_type\": \"custom_voice\",", 1,
     BASE_WITH("{\"enc_dim\": 2048}"), "speaker_encoder_config.enc_dim: 2048 != talker_config.hidden_size 1024",
     F},
    {"base_channels_4", 0, "\"tts_model_type\": \"custom_voice\",", 1,
     BASE_WITH("{\"enc_dim\": 1024, \"enc_channels\": [512, 512, 512, 1536]}"),
     "speaker_encoder_config.enc_channels: must have 5 entries, not 4", F},
    {"base_res2net_7", 0, "\"tts_model_type\": \"custom_voice\",", 1,
     BASE_WITH("{\"enc_dim\": 1024, \"enc_res2net_scale\": 7}"),
     "speaker_encoder_config.enc_res2net_scale: 7 does not divide enc_channels[1] = 512", F},
    {"base_sample_rate_string", 0, "\"tts_model_type\": \"custom_voice\",", 1,
     BASE_WITH("{\"enc_dim\": 1024, \"sample_rate\": \"24k\"}"),
     "speaker_encoder_config.sample_rate: must be a number", F},
    {"base_encoder_not_object", 0, "\"tts_model_type\": \"custom_voice\",", 1, BASE_WITH("null"),
     "speaker_encoder_config: must be an object, not null", F},
    /* generation_config.json */
    {"gen_missing_top_k", 1, "\"top_k\": 50,", 1, "", "generation_config.json: top_k: missing", F},
    {"gen_missing_subtalker_dosample", 1, "\"subtalker_dosample\": true,", 1, "",
     "generation_config.json: subtalker_dosample: missing", F},
    {"gen_top_p_high", 1, "\"top_p\": 1.0,", 1, "\"top_p\": 1.5,",
     "generation_config.json: top_p: 1.5 out of range (0, 1]", F},
    {"gen_temperature_zero", 1, "\"temperature\": 0.9,", 1, "\"temperature\": 0,",
     "generation_config.json: temperature: 0 out of range (0, 100]", F},
    {"gen_do_sample_string", 1, "\"do_sample\": true", 1, "\"do_sample\": \"yes\"",
     "generation_config.json: do_sample: must be a boolean, not string", F},
    {"gen_max_new_tokens_zero", 1, "\"max_new_tokens\": 8192", 1, "\"max_new_tokens\": 0",
     "generation_config.json: max_new_tokens: 0 out of range [1, 1048576]", F},
    {"gen_top_k_float", 1, "\"top_k\": 50,", 1, "\"top_k\": 50.0,",
     "generation_config.json: top_k: must be an integer", F},
    /* speech_tokenizer/config.json */
    {"codec_missing_window", 2, "\"sliding_window\": 72,", 1, "",
     "speech_tokenizer/config.json: decoder_config.sliding_window: missing", F},
    {"codec_missing_decoder", 2, "\"decoder_config\": {", 1, "\"decoder_configs\": {",
     "speech_tokenizer/config.json: decoder_config: missing", F},
    {"codec_upsample_5", 2, "\"upsample_rates\": [", 1, "\"upsample_rates\": [9, ",
     "speech_tokenizer/config.json: decoder_config.upsample_rates: must have 4 entries, not 5", F},
    {"codec_upsample_string", 2, "\"upsample_rates\": [", 1, "\"upsample_rates\": [\"8\", 5, 4, 3], \"x\": [",
     "decoder_config.upsample_rates[0]: must be an integer", F},
    {"codec_decode_rate", 2, "\"decode_upsample_rate\": 1920", 1, "\"decode_upsample_rate\": 1921",
     "speech_tokenizer/config.json: decode_upsample_rate: 1921 != product", F},
    {"codec_dim_odd", 2, "\"codebook_dim\": 512", 1, "\"codebook_dim\": 511",
     "speech_tokenizer/config.json: decoder_config.codebook_dim: 511 must be even", F},
    {"codec_quantizers_mismatch", 2, "\"num_quantizers\": 16", 1, "\"num_quantizers\": 8",
     "speech_tokenizer/config.json: decoder_config.num_quantizers: 8 != talker_config.num_code_groups 16", F},
    {"codec_codebook_mismatch", 2, "\"codebook_size\": 2048", 1, "\"codebook_size\": 1024",
     "speech_tokenizer/config.json: decoder_config.codebook_size: 1024 != code_predictor_config.vocab_size 2048",
     F},
    {"codec_sample_rate_zero", 2, "\"output_sample_rate\": 24000", 1, "\"output_sample_rate\": 0",
     "speech_tokenizer/config.json: output_sample_rate: 0 out of range", F},
    {"codec_kv_not_dividing", 2, "\"num_key_value_heads\": 16", 1, "\"num_key_value_heads\": 5",
     "decoder_config.num_key_value_heads: 5 does not divide num_attention_heads 16", F},
};

static void test_bad_configs(void) {
    size_t n = QTTS_ARRAY_LEN(bad_cfgs);
    for (size_t i = 0; i < n; i++) {
        const bad_cfg *b = &bad_cfgs[i];
        char *t = replace_nth(real_text[b->file], b->find, b->repl, b->nth);
        if (!t) {
            CHECK(0, "%s: fixture has no occurrence %d of %s", b->name, b->nth, b->find);
            continue;
        }
        char dir[256];
        make_model_dir(dir, sizeof dir, b->name, b->file, t);
        free(t);
        qtts_config c;
        qtts_err err = {0};
        qtts_status st = qtts_config_load(dir, &c, &err);
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s/%s: ", dir, cfg_files[b->file]);
        CHECK(st == b->status, "%s: status %s, want %s (%s)", b->name, qtts_status_name(st),
              qtts_status_name(b->status), err.msg);
        CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0, "%s: message does not start with %s: %s",
              b->name, prefix, err.msg);
        CHECK(strstr(err.msg, b->expect) != NULL, "%s: '%s' not in: %s", b->name, b->expect, err.msg);
        if (getenv("QTTS_TEST_VERBOSE")) fprintf(stderr, "  %s -> %s\n", b->name, err.msg);
    }
}

/* Valid variations: null/absent rope_scaling, legacy keys, empty speaker
 * tables, an unknown key. */
static void test_accepted_variations(void) {
    static const struct { const char *name, *find, *repl; int nth; } ok[] = {
        {"rope_scaling_null", "\"rope_scaling\": {", "\"rope_scaling\": null, \"unused\": {", 1},
        {"rope_scaling_absent", "\"rope_scaling\": {", "\"unused\": {", 1},
        {"unknown_key", "\"talker_config\": {", "\"talker_config\": {\"brand_new_key\": [1, {}],", 1},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(ok); i++) {
        char *t = replace_nth(real_text[0], ok[i].find, ok[i].repl, ok[i].nth);
        REQUIRE(t, "fixture drift (%s)", ok[i].name);
        char dir[256];
        make_model_dir(dir, sizeof dir, ok[i].name, 0, t);
        free(t);
        qtts_config c;
        qtts_err err = {0};
        qtts_status st = qtts_config_load(dir, &c, &err);
        CHECK(st == QTTS_OK, "%s: %s", ok[i].name, err.msg);
    }
    /* VoiceDesign-like: no speakers, no dialects */
    char *t1 = replace_nth(real_text[0], "\"tts_model_type\": \"custom_voice\"", "\"tts_model_type\": \"voice_design\"", 1);
    char *t2 = replace_nth(t1, "\"spk_id\": {", "\"spk_id\": {}, \"spk_id_unused\": {", 1);
    char *t3 = replace_nth(t2, "\"spk_is_dialect\": {", "\"spk_is_dialect\": {}, \"spk_is_dialect_unused\": {", 1);
    REQUIRE(t3, "fixture drift");
    char dir[256];
    make_model_dir(dir, sizeof dir, "voice_design_like", 0, t3);
    free(t1), free(t2), free(t3);
    qtts_config c;
    qtts_err err = {0};
    qtts_status st = qtts_config_load(dir, &c, &err);
    CHECK(st == QTTS_OK && c.model_type == QTTS_MODEL_VOICE_DESIGN && c.n_speakers == 0 && c.n_langs == 12,
          "voice design like: %s", err.msg);
}

static void test_missing_files(void) {
    char dir[256];
    make_model_dir(dir, sizeof dir, "no_gen", -1, NULL);
    char p[512];
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    unlink(p);
    qtts_config c;
    qtts_err err = {0};
    qtts_status st = qtts_config_load(dir, &c, &err);
    CHECK(st == QTTS_ERR_IO && strstr(err.msg, p) == err.msg, "missing generation_config: %s", err.msg);

    snprintf(p, sizeof p, "%s/config.json", g_dir);
    st = qtts_config_load(g_dir, &c, &err);
    CHECK(st == QTTS_ERR_IO && strstr(err.msg, p) == err.msg, "missing config.json: %s", err.msg);

    make_model_dir(dir, sizeof dir, "empty_config", 0, "");
    st = qtts_config_load(dir, &c, &err);
    CHECK(st == QTTS_ERR_FORMAT && strstr(err.msg, "unexpected end of input"), "empty: %s", err.msg);

    make_model_dir(dir, sizeof dir, "array_config", 1, "[1]");
    snprintf(p, sizeof p, "%s/generation_config.json: top level must be a JSON object", dir);
    st = qtts_config_load(dir, &c, &err);
    CHECK(st == QTTS_ERR_FORMAT && !strcmp(err.msg, p), "array: %s", err.msg);
}

/* The tiny HF-layout models generated from the Python reference. */
static void test_tiny_model_configs(void) {
    static const struct { const char *name; qtts_model_type type; const char *size; int n_spk, n_lang; } m[] = {
        {"cv06", QTTS_MODEL_CUSTOM_VOICE, "0b6", 9, 12}, {"cv17", QTTS_MODEL_CUSTOM_VOICE, "1b7", 9, 12},
        {"vd17", QTTS_MODEL_VOICE_DESIGN, "1b7", 0, 10}, {"base06", QTTS_MODEL_BASE, "0b6", 0, 10},
        {"base17", QTTS_MODEL_BASE, "1b7", 0, 10},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(m); i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/models/%s", QTTS_FIXTURES, m[i].name);
        struct stat sb;
        if (stat(dir, &sb) != 0) {
            printf("test_config: %s absent, tiny-model config check skipped\n", dir);
            continue;
        }
        qtts_config c;
        qtts_err err = {0};
        qtts_status st = qtts_config_load(dir, &c, &err);
        if (st != QTTS_OK) {
            CHECK(0, "%s: %s", dir, err.msg);
            continue;
        }
        CHECK(c.model_type == m[i].type && !strcmp(c.model_size, m[i].size), "%s: type/size", dir);
        CHECK(c.n_speakers == m[i].n_spk && c.n_langs == m[i].n_lang, "%s: %d speakers, %d languages", dir,
              c.n_speakers, c.n_langs);
        CHECK(c.has_speaker_encoder == (m[i].type == QTTS_MODEL_BASE), "%s: speaker encoder", dir);
        if (c.has_speaker_encoder) CHECK(c.spk_enc_dim == c.talker.hidden, "%s: enc_dim", dir);
        CHECK(c.talker.heads * c.talker.head_dim > 0 && c.cp.hidden > 0, "%s: dims", dir);
        if (m[i].n_spk) {
            const qtts_speaker *s = qtts_config_find_speaker(&c, "Dylan");
            CHECK(s && s->id == 2878 && !strcmp(s->dialect, "beijing_dialect"), "%s: dylan", dir);
        }
    }
}

static void remove_tree(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", REAL_DIR, cfg_files[i]);
        real_text[i] = slurp(p);
    }
    strcpy(g_dir, "/tmp/qtts_cfg_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    TEST_RUN(test_real_06b_customvoice);
    TEST_RUN(test_base_speaker_encoder_defaults);
    TEST_RUN(test_bad_configs);
    TEST_RUN(test_accepted_variations);
    TEST_RUN(test_missing_files);
    TEST_RUN(test_tiny_model_configs);
    remove_tree(g_dir);
    for (int i = 0; i < 3; i++) free(real_text[i]);
    TEST_END();
}
