/* The C API from C99 against the installed header (tests/api/c_api_test.sh compiles it with
 * `gcc -std=c99 -Wall -Wextra -Werror $(pkg-config --cflags --libs kiln)`).
 *   c_api_test generate MODEL PROMPT N TEMP SEED [MMPROJ MEDIA]
 *                                                  prints the continuation as `kiln run
 *                                                  --no-display-prompt [--mmproj MMPROJ --image
 *                                                  MEDIA]` does (greedy for TEMP 0); MEDIA is
 *                                                  audio (--audio) when it ends in .wav, .flac
 *                                                  or .mp3
 *   c_api_test checks MODEL                        evict/restore, 4 sequences in one batch, state
 *                                                  files, chat template, and every function's
 *                                                  errors; prints "ok" and exits 0, else names
 *                                                  the failed check and exits 1
 *   c_api_test image-checks MODEL MMPROJ IMAGE     images: a prompt with an image decoded, and
 *                                                  the errors of images without an mmproj, bad
 *                                                  image bytes, markers without images, and
 *                                                  freeing in the wrong order; "ok" as checks
 *   c_api_test audio-checks MODEL MMPROJ WAV       audio: a prompt with an audio file decoded,
 *                                                  and the errors of audio without an audio
 *                                                  mmproj, bad audio bytes, an image for an
 *                                                  audio-only mmproj and an unknown media type;
 *                                                  "ok" as checks
 *   c_api_test arbiter-checks MODEL DIR            two runtimes with the arbiter in DIR take
 *                                                  turns: each one's decode evicts the other's
 *                                                  model, and the logits stay exact; "ok" as
 *                                                  checks
 */
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, kiln_last_error());                          \
      ++g_failures;                                                         \
    }                                                                       \
  } while (0)
#define OK(call) CHECK((call) == KILN_OK)
/* An error status, and a message that names the function. */
#define FAILS(fn, call)                                                          \
  do {                                                                           \
    kiln_status s_ = (call);                                                     \
    if (s_ == KILN_OK || strstr(kiln_last_error(), fn) == NULL) {                \
      fprintf(stderr, "%s:%d: expected an error from %s (status %d, message '%s')\n", \
              __FILE__, __LINE__, #call, (int)s_, kiln_last_error());            \
      ++g_failures;                                                              \
    }                                                                            \
  } while (0)

static int32_t print_piece(void* user_data, int32_t token, const char* piece, int64_t len) {
  (void)user_data;
  (void)token;
  fwrite(piece, 1, (size_t)len, stdout);
  return 0;
}

/* The bytes of file `path` into *data (malloc'd) and *size; 0 on failure. */
static int read_file(const char* path, uint8_t** data, int64_t* size) {
  FILE* f = fopen(path, "rb");
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    if (f != NULL) fclose(f);
    return 0;
  }
  *data = (uint8_t*)malloc((size_t)n + 1);
  *size = (int64_t)fread(*data, 1, (size_t)n, f);
  fclose(f);
  return *size == n;
}

/* Whether `path` names an audio file (by its extension). */
static int is_audio_file(const char* path) {
  const size_t n = strlen(path);
  return (n > 4 && (strcmp(path + n - 4, ".wav") == 0 || strcmp(path + n - 4, ".mp3") == 0)) ||
         (n > 5 && strcmp(path + n - 5, ".flac") == 0);
}

/* `mmproj_path` and `media_path` may be NULL (text only). */
static int generate(const char* path, const char* prompt, long n, float temp, unsigned long seed,
                    const char* mmproj_path, const char* media_path) {
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_mmproj* mmproj = NULL;
  kiln_context* ctx = NULL;
  kiln_sampler* sampler = NULL;
  kiln_context_options co;
  kiln_sampler_params sp;
  kiln_generate_options go;
  kiln_media media = {KILN_MEDIA_IMAGE, NULL, 0};
  uint8_t* bytes = NULL;
  kiln_context_default_options(&co);
  kiln_generate_default_options(&go);
  if (kiln_runtime_create(NULL, &rt) != KILN_OK || kiln_model_load(rt, path, NULL, &model) != KILN_OK ||
      (mmproj_path != NULL && kiln_mmproj_load(model, mmproj_path, &mmproj) != KILN_OK)) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  if (media_path != NULL) {
    if (!read_file(media_path, &bytes, &media.size)) {
      fprintf(stderr, "cannot read %s\n", media_path);
      return 1;
    }
    media.type = is_audio_file(media_path) ? KILN_MEDIA_AUDIO : KILN_MEDIA_IMAGE;
    media.data = bytes;
    go.media = &media;
    go.n_media = 1;
  }
  co.mmproj = mmproj;
  if (kiln_context_create(model, &co, &ctx) != KILN_OK) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  kiln_sampler_default_params(&sp);
  sp.temperature = temp;
  sp.seed = seed;
  go.max_tokens = n;
  if (kiln_sampler_create(model, &sp, &sampler) != KILN_OK ||
      kiln_generate(ctx, sampler, prompt, &go, print_piece, NULL, NULL) != KILN_OK) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  printf("\n");
  free(bytes);
  kiln_sampler_free(sampler);
  kiln_context_free(ctx);
  if (mmproj != NULL) kiln_mmproj_free(mmproj);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}

static int image_checks(const char* path, const char* mmproj_path, const char* image_path) {
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_mmproj* mmproj = NULL;
  kiln_context *ctx = NULL, *text_ctx = NULL;
  kiln_context_options co;
  kiln_media image = {KILN_MEDIA_IMAGE, NULL, 0}, two[2];
  const uint8_t junk[16] = {0x89, 'P', 'N', 'G', 1, 2, 3};
  const kiln_media bad = {KILN_MEDIA_IMAGE, junk, 16};
  uint8_t* bytes = NULL;
  int64_t n_positions = 0, index = -1, n_logits = 0;
  const float* logits = NULL;
  OK(kiln_runtime_create(NULL, &rt));
  OK(kiln_model_load(rt, path, NULL, &model));
  OK(kiln_mmproj_load(model, mmproj_path, &mmproj));
  if (model == NULL || mmproj == NULL || !read_file(image_path, &bytes, &image.size)) return 1;
  image.data = bytes;
  FAILS("kiln_mmproj_load", kiln_mmproj_load(model, image_path, &mmproj)); /* not a GGUF */
  OK(kiln_context_default_options(&co));
  OK(kiln_context_create(model, &co, &text_ctx));
  co.mmproj = mmproj;
  OK(kiln_context_create(model, &co, &ctx));
  OK(kiln_decode_media_prompt(ctx, "USER: <__media__>Describe the image.\nASSISTANT:", &image, 1, 0, 2,
                              &n_positions, &index));
  CHECK(n_positions > 16 && index >= 0);
  OK(kiln_get_logits(ctx, index, &logits, &n_logits));
  CHECK(logits != NULL && n_logits > 0 && isfinite(logits[0]));
  {
    int32_t pos_max = -1;
    OK(kiln_seq_pos_max(ctx, 2, &pos_max));
    CHECK(pos_max == n_positions - 1);
  }
  FAILS("kiln_decode_media_prompt",
        kiln_decode_media_prompt(text_ctx, "a <__media__>", &image, 1, 0, 0, NULL, NULL));
  FAILS("kiln_decode_media_prompt",
        kiln_decode_media_prompt(ctx, "a <__media__>", &bad, 1, 0, 0, NULL, NULL));
  CHECK(strstr(kiln_last_error(), "image") != NULL);
  two[0] = image;
  two[1] = image;
  FAILS("kiln_decode_media_prompt",
        kiln_decode_media_prompt(ctx, "<__media__> only one", two, 2, 0, 0, NULL, NULL));
  FAILS("kiln_decode_media_prompt", kiln_decode_media_prompt(ctx, "a", &image, -1, 0, 0, NULL, NULL));
  FAILS("kiln_mmproj_free", kiln_mmproj_free(mmproj)); /* its context is alive */
  FAILS("kiln_model_free", kiln_model_free(model));
  OK(kiln_context_free(ctx));
  OK(kiln_context_free(text_ctx));
  OK(kiln_mmproj_free(mmproj));
  FAILS("kiln_mmproj_free", kiln_mmproj_free(mmproj)); /* freed */
  OK(kiln_model_free(model));
  OK(kiln_runtime_free(rt));
  free(bytes);
  if (g_failures == 0) printf("ok\n");
  return g_failures == 0 ? 0 : 1;
}

static int audio_checks(const char* path, const char* mmproj_path, const char* wav_path) {
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_mmproj* mmproj = NULL;
  kiln_context *ctx = NULL, *text_ctx = NULL;
  kiln_context_options co;
  kiln_media audio = {KILN_MEDIA_AUDIO, NULL, 0}, other;
  const uint8_t riff[16] = {'R', 'I', 'F', 'F', 8, 0, 0, 0, 'W', 'A', 'V', 'E'};
  uint8_t* bytes = NULL;
  int64_t n_positions = 0, index = -1, n_logits = 0;
  const float* logits = NULL;
  OK(kiln_runtime_create(NULL, &rt));
  OK(kiln_model_load(rt, path, NULL, &model));
  OK(kiln_mmproj_load(model, mmproj_path, &mmproj));
  if (model == NULL || mmproj == NULL || !read_file(wav_path, &bytes, &audio.size)) return 1;
  audio.data = bytes;
  OK(kiln_context_default_options(&co));
  OK(kiln_context_create(model, &co, &text_ctx));
  co.mmproj = mmproj;
  OK(kiln_context_create(model, &co, &ctx));
  OK(kiln_decode_media_prompt(ctx, "USER: <__media__>Describe the audio.\nASSISTANT:", &audio, 1, 0, 1,
                              &n_positions, &index));
  CHECK(n_positions > 16 && index >= 0);
  OK(kiln_get_logits(ctx, index, &logits, &n_logits));
  CHECK(logits != NULL && n_logits > 0 && isfinite(logits[0]));
  FAILS("kiln_decode_media_prompt", kiln_decode_media_prompt(text_ctx, "a", &audio, 1, 0, 0, NULL, NULL));
  CHECK(strstr(kiln_last_error(), "takes no audio") != NULL);
  other = audio;
  other.data = riff;
  other.size = sizeof riff;
  FAILS("kiln_decode_media_prompt", kiln_decode_media_prompt(ctx, "a", &other, 1, 0, 0, NULL, NULL));
  CHECK(strstr(kiln_last_error(), "media[0]: audio: ") != NULL);
  other.type = KILN_MEDIA_IMAGE;
  FAILS("kiln_decode_media_prompt", kiln_decode_media_prompt(ctx, "a", &other, 1, 0, 0, NULL, NULL));
  CHECK(strstr(kiln_last_error(), "takes no images") != NULL);
  other.type = 7; /* no such type */
  FAILS("kiln_decode_media_prompt", kiln_decode_media_prompt(ctx, "a", &other, 1, 0, 0, NULL, NULL));
  CHECK(strstr(kiln_last_error(), "media[0].type is 7") != NULL);
  OK(kiln_context_free(ctx));
  OK(kiln_context_free(text_ctx));
  OK(kiln_mmproj_free(mmproj));
  OK(kiln_model_free(model));
  OK(kiln_runtime_free(rt));
  free(bytes);
  if (g_failures == 0) printf("ok\n");
  return g_failures == 0 ? 0 : 1;
}

/* Decodes `tokens` into `seq` from position `pos0`, with logits for the last one only. */
static kiln_status decode_seq(kiln_context* ctx, const int32_t* tokens, int64_t n, int32_t seq, int32_t pos0) {
  kiln_batch_token batch[64];
  int64_t i;
  for (i = 0; i < n; ++i) {
    batch[i].token = tokens[i];
    batch[i].pos = pos0 + (int32_t)i;
    batch[i].seq = seq;
    batch[i].logits = i == n - 1;
  }
  return kiln_decode(ctx, batch, n);
}

static float* copy_logits(const kiln_context* ctx, int64_t index, int64_t* n) {
  const float* l = NULL;
  float* out;
  if (kiln_get_logits(ctx, index, &l, n) != KILN_OK) return NULL;
  out = malloc((size_t)*n * sizeof(float));
  memcpy(out, l, (size_t)*n * sizeof(float));
  return out;
}

/* Evicting the model between two decodes leaves the next logits bit-identical; a state file
 * restores a sequence bit-exactly. */
static void check_evict_restore_and_state(kiln_model* model) {
  kiln_context* ctx = NULL;
  int32_t tokens[64];
  int64_t n = 0, n_ref = 0, n_after = 0, n_loaded = 0, n_state = 0;
  int32_t next = 0, resident = -1, loaded[64];
  float *ref, *after, *state;
  OK(kiln_context_create(model, NULL, &ctx));
  OK(kiln_tokenize(model, "In the beginning", 16, 1, 0, tokens, 64, &n));
  CHECK(n > 1 && n < 60);
  next = tokens[n - 1];
  OK(decode_seq(ctx, tokens, n, 0, 0));
  OK(decode_seq(ctx, &next, 1, 0, (int32_t)n));
  ref = copy_logits(ctx, 0, &n_ref);

  OK(kiln_seq_rm(ctx, -1, -1, -1));
  OK(decode_seq(ctx, tokens, n, 0, 0));
  OK(kiln_model_evict(model));
  OK(kiln_model_is_resident(model, &resident));
  CHECK(resident == 0);
  OK(kiln_model_restore(model));
  OK(kiln_model_is_resident(model, &resident));
  CHECK(resident == 1);
  OK(kiln_model_evict(model));
  OK(decode_seq(ctx, &next, 1, 0, (int32_t)n)); /* restores on its own */
  after = copy_logits(ctx, 0, &n_after);
  CHECK(ref != NULL && after != NULL && n_ref == n_after && memcmp(ref, after, (size_t)n_ref * sizeof(float)) == 0);

  OK(kiln_seq_rm(ctx, -1, -1, -1));
  OK(decode_seq(ctx, tokens, n, 0, 0));
  OK(kiln_state_save(ctx, 0, tokens, n, "c_api_test.state"));
  OK(kiln_state_load(ctx, 3, "c_api_test.state", loaded, 64, &n_loaded));
  CHECK(n_loaded == n && memcmp(loaded, tokens, (size_t)n * sizeof(int32_t)) == 0);
  OK(decode_seq(ctx, &next, 1, 3, (int32_t)n));
  state = copy_logits(ctx, 0, &n_state);
  CHECK(state != NULL && n_state == n_ref && memcmp(ref, state, (size_t)n_ref * sizeof(float)) == 0);
  remove("c_api_test.state");
  free(ref);
  free(after);
  free(state);
  OK(kiln_context_free(ctx));
}

/* Four sequences in one batch give each the logits it has decoded alone. */
static void check_four_sequences(kiln_model* model) {
  static const char* prompts[4] = {"And God said", "Let there be light", "In the beginning God", "The earth"};
  kiln_context* ctx = NULL;
  kiln_batch_token batch[256];
  int32_t tokens[4][64];
  int64_t n[4], last[4], total = 0, s, i, n_vocab = 0, n_alone = 0;
  OK(kiln_context_create(model, NULL, &ctx));
  for (s = 0; s < 4; ++s) {
    OK(kiln_tokenize(model, prompts[s], (int64_t)strlen(prompts[s]), 1, 0, tokens[s], 64, &n[s]));
    for (i = 0; i < n[s]; ++i) {
      batch[total].token = tokens[s][i];
      batch[total].pos = (int32_t)i;
      batch[total].seq = (int32_t)s;
      batch[total].logits = i == n[s] - 1;
      ++total;
    }
    last[s] = total - 1;
  }
  OK(kiln_decode(ctx, batch, total));
  for (s = 0; s < 4; ++s) {
    float* together = copy_logits(ctx, last[s], &n_vocab);
    float* alone;
    float worst = 0;
    kiln_context* one = NULL;
    OK(kiln_context_create(model, NULL, &one));
    OK(decode_seq(one, tokens[s], n[s], 0, 0));
    alone = copy_logits(one, n[s] - 1, &n_alone);
    CHECK(together != NULL && alone != NULL && n_alone == n_vocab);
    for (i = 0; together != NULL && alone != NULL && i < n_vocab; ++i) {
      const float d = fabsf(together[i] - alone[i]);
      if (d > worst) worst = d;
    }
    CHECK(worst < 1e-4f); /* bit-exact for most weight types; F32, IQ4_XS and Q4_K differ by ~1e-6 */
    free(together);
    free(alone);
    OK(kiln_context_free(one));
  }
  OK(kiln_context_free(ctx));
}

static void check_text(kiln_model* model) {
  char buf[4096];
  int64_t len = 0, n = 0;
  int32_t tokens[64];
  OK(kiln_tokenize(model, "In the beginning", 16, 0, 0, tokens, 64, &n));
  OK(kiln_detokenize(model, tokens, n, 0, buf, sizeof buf, &len));
  CHECK(strcmp(buf, "In the beginning") == 0 || strcmp(buf, " In the beginning") == 0);
  OK(kiln_detokenize(model, tokens, n, 0, buf, 4, &len)); /* truncated, NUL-terminated */
  CHECK(strlen(buf) == 3 && len >= 16);
  OK(kiln_model_apply_chat_template(model, "[{\"role\": \"user\", \"content\": \"Hello there\"}]", NULL, 1, buf,
                                    sizeof buf, &len));
  CHECK(strstr(buf, "Hello there") != NULL && len < (int64_t)sizeof buf);
  OK(kiln_model_meta_string(model, "general.architecture", buf, sizeof buf, &len));
  CHECK(len > 0);
}

/* Every function refuses a null handle, a freed one, negative sizes and out-of-range tokens. */
static void check_errors(kiln_runtime* rt, kiln_model* model) {
  kiln_runtime* no_runtime = NULL;
  kiln_model* no_model = NULL;
  kiln_context* ctx = NULL;
  kiln_context* freed_ctx = NULL;
  kiln_sampler* sampler = NULL;
  kiln_sampler* freed = NULL;
  kiln_batch_token bad = {999999, 0, 0, 1}, good = {1, 0, 0, 1};
  kiln_device_info info;
  kiln_memory_row rows[4];
  kiln_runtime_options ro;
  kiln_sim_device bad_sim = {"gpu7", 1024};
  const float* f = NULL;
  float emb[4];
  char buf[64];
  int32_t t = 0, tokens[4] = {1, 2, 3, 999999};
  int64_t len = 0, i64 = 0;
  int32_t i32 = 0;
  OK(kiln_context_create(model, NULL, &ctx));
  OK(kiln_sampler_create(model, NULL, &sampler));
  OK(kiln_sampler_create(model, NULL, &freed));
  OK(kiln_sampler_free(freed));
  OK(kiln_context_create(model, NULL, &freed_ctx));
  OK(kiln_context_free(freed_ctx));

  FAILS("kiln_runtime_default_options", kiln_runtime_default_options(NULL));
  FAILS("kiln_runtime_create", kiln_runtime_create(NULL, NULL));
  OK(kiln_runtime_default_options(&ro));
  ro.sim_devices = &bad_sim;
  ro.n_sim_devices = 1;
  FAILS("kiln_runtime_create", kiln_runtime_create(&ro, &no_runtime));
  ro.n_sim_devices = -1;
  FAILS("kiln_runtime_create", kiln_runtime_create(&ro, &no_runtime));
  FAILS("kiln_runtime_free", kiln_runtime_free(NULL));
  FAILS("kiln_runtime_free", kiln_runtime_free(rt)); /* a model is alive */
  FAILS("kiln_runtime_device_count", kiln_runtime_device_count(NULL, &i64));
  FAILS("kiln_runtime_device_info", kiln_runtime_device_info(NULL, 0, &info));
  FAILS("kiln_runtime_device_info", kiln_runtime_device_info(rt, -1, &info));
  FAILS("kiln_runtime_device_info", kiln_runtime_device_info(rt, 99, &info));
  FAILS("kiln_runtime_memory", kiln_runtime_memory(NULL, rows, 4, &i64));
  FAILS("kiln_runtime_memory", kiln_runtime_memory(rt, rows, -1, &i64));
  FAILS("kiln_model_default_options", kiln_model_default_options(NULL));
  FAILS("kiln_model_load", kiln_model_load(NULL, "x.gguf", NULL, &no_model));
  FAILS("kiln_model_load", kiln_model_load(rt, "/nonexistent.gguf", NULL, &no_model));
  FAILS("kiln_model_load", kiln_model_load(rt, NULL, NULL, &no_model));
  FAILS("kiln_model_free", kiln_model_free(NULL));
  FAILS("kiln_model_free", kiln_model_free(model)); /* a context is alive */
  FAILS("kiln_model_n_vocab", kiln_model_n_vocab(NULL, &i32));
  FAILS("kiln_model_n_embd", kiln_model_n_embd(NULL, &i32));
  FAILS("kiln_model_n_ctx_train", kiln_model_n_ctx_train(NULL, &i64));
  FAILS("kiln_model_name", kiln_model_name(NULL, buf, sizeof buf, &len));
  FAILS("kiln_model_name", kiln_model_name(model, buf, -1, &len));
  FAILS("kiln_model_meta_string", kiln_model_meta_string(NULL, "general.name", buf, sizeof buf, &len));
  FAILS("kiln_model_meta_string", kiln_model_meta_string(model, "no.such.key", buf, sizeof buf, &len));
  FAILS("kiln_model_meta_int", kiln_model_meta_int(NULL, "x", &i64));
  FAILS("kiln_model_token_text", kiln_model_token_text(NULL, 0, buf, sizeof buf, &len));
  FAILS("kiln_model_token_text", kiln_model_token_text(model, -1, buf, sizeof buf, &len));
  FAILS("kiln_model_token_text", kiln_model_token_text(model, 999999, buf, sizeof buf, &len));
  FAILS("kiln_model_token_is_eog", kiln_model_token_is_eog(NULL, 0, &i32));
  FAILS("kiln_model_token_is_eog", kiln_model_token_is_eog(model, 999999, &i32));
  FAILS("kiln_model_apply_chat_template", kiln_model_apply_chat_template(NULL, "[]", NULL, 1, buf, sizeof buf, &len));
  FAILS("kiln_model_apply_chat_template", kiln_model_apply_chat_template(model, "[{", NULL, 1, buf, sizeof buf, &len));
  FAILS("kiln_model_apply_chat_template", kiln_model_apply_chat_template(model, "[]", "[1]", 1, buf, sizeof buf, &len));
  FAILS("kiln_model_evict", kiln_model_evict(NULL));
  FAILS("kiln_model_parse_chat_output", kiln_model_parse_chat_output(NULL, "{}", "", NULL, 0, &len));
  FAILS("kiln_model_parse_chat_output", kiln_model_parse_chat_output(model, "[", "", NULL, 0, &len));
  FAILS("kiln_model_parse_chat_output", kiln_model_parse_chat_output(model, "{}", NULL, NULL, 0, &len));
  FAILS("kiln_model_chat_prompt", kiln_model_chat_prompt(model, "{\"messages\": 1}", NULL, 0, &len));
  FAILS("kiln_model_chat_prompt", kiln_model_chat_prompt(model, NULL, NULL, 0, &len));
  FAILS("kiln_model_restore", kiln_model_restore(NULL));
  FAILS("kiln_model_is_resident", kiln_model_is_resident(NULL, &i32));
  FAILS("kiln_tokenize", kiln_tokenize(NULL, "a", 1, 1, 0, tokens, 4, &i64));
  FAILS("kiln_tokenize", kiln_tokenize(model, "a", -1, 1, 0, tokens, 4, &i64));
  FAILS("kiln_tokenize", kiln_tokenize(model, "a", 1, 1, 0, tokens, -4, &i64));
  FAILS("kiln_detokenize", kiln_detokenize(NULL, tokens, 1, 0, buf, sizeof buf, &len));
  FAILS("kiln_detokenize", kiln_detokenize(model, tokens, -1, 0, buf, sizeof buf, &len));
  FAILS("kiln_detokenize", kiln_detokenize(model, tokens, 4, 0, buf, sizeof buf, &len));
  FAILS("kiln_context_default_options", kiln_context_default_options(NULL));
  FAILS("kiln_context_create", kiln_context_create(NULL, NULL, &freed_ctx));
  FAILS("kiln_context_free", kiln_context_free(NULL));
  FAILS("kiln_context_free", kiln_context_free(freed_ctx));
  FAILS("kiln_context_n_ctx", kiln_context_n_ctx(NULL, &i64));
  FAILS("kiln_decode", kiln_decode(NULL, &good, 1));
  FAILS("kiln_decode", kiln_decode(freed_ctx, &good, 1));
  FAILS("kiln_decode", kiln_decode(ctx, &good, -1));
  FAILS("kiln_decode", kiln_decode(ctx, &bad, 1));
  good.seq = KILN_MAX_SEQUENCES;
  FAILS("kiln_decode", kiln_decode(ctx, &good, 1));
  good.seq = 0;
  good.pos = -5;
  FAILS("kiln_decode", kiln_decode(ctx, &good, 1));
  FAILS("kiln_get_logits", kiln_get_logits(NULL, 0, &f, &i64));
  FAILS("kiln_get_logits", kiln_get_logits(ctx, -1, &f, &i64));
  FAILS("kiln_get_logits", kiln_get_logits(ctx, 7, &f, &i64));
  FAILS("kiln_get_embeddings", kiln_get_embeddings(NULL, 0, &f, &i64));
  FAILS("kiln_get_embeddings", kiln_get_embeddings(ctx, 0, &f, &i64)); /* a logits context */
  FAILS("kiln_embed", kiln_embed(NULL, tokens, 1, 1, emb, 4, &i64));
  FAILS("kiln_embed", kiln_embed(ctx, tokens, -1, 1, emb, 4, &i64));
  FAILS("kiln_embed", kiln_embed(ctx, tokens, 1, 1, emb, -4, &i64));
  FAILS("kiln_seq_rm", kiln_seq_rm(NULL, 0, 0, -1));
  FAILS("kiln_seq_rm", kiln_seq_rm(ctx, KILN_MAX_SEQUENCES, 0, -1));
  FAILS("kiln_seq_cp", kiln_seq_cp(NULL, 0, 1, 0, -1));
  FAILS("kiln_seq_cp", kiln_seq_cp(ctx, 0, -1, 0, -1));
  FAILS("kiln_seq_keep", kiln_seq_keep(NULL, 0));
  FAILS("kiln_seq_keep", kiln_seq_keep(ctx, 100));
  FAILS("kiln_seq_pos_max", kiln_seq_pos_max(NULL, 0, &i32));
  FAILS("kiln_seq_pos_max", kiln_seq_pos_max(ctx, -2, &i32));
  FAILS("kiln_state_save", kiln_state_save(NULL, 0, tokens, 1, "x.state"));
  FAILS("kiln_state_save", kiln_state_save(ctx, 0, tokens, -1, "x.state"));
  FAILS("kiln_state_load", kiln_state_load(NULL, 0, "x.state", tokens, 4, &i64));
  FAILS("kiln_state_load", kiln_state_load(ctx, 0, "/nonexistent.state", tokens, 4, &i64));
  FAILS("kiln_state_load", kiln_state_load(ctx, 0, "x.state", tokens, -4, &i64));
  FAILS("kiln_sampler_default_params", kiln_sampler_default_params(NULL));
  FAILS("kiln_sampler_create", kiln_sampler_create(NULL, NULL, &freed));
  {
    kiln_sampler_params sp;
    kiln_sampler* s = NULL;
    OK(kiln_sampler_default_params(&sp));
    sp.json_schema = "{\"type\": ";
    FAILS("kiln_sampler_create", kiln_sampler_create(model, &sp, &s));
    sp.json_schema = NULL;
    sp.grammar = "root ::= (";
    FAILS("kiln_sampler_create", kiln_sampler_create(model, &sp, &s));
    sp.grammar = NULL;
    sp.top_p = -3;
    FAILS("kiln_sampler_create", kiln_sampler_create(model, &sp, &s));
  }
  FAILS("kiln_sampler_free", kiln_sampler_free(NULL));
  FAILS("kiln_sampler_free", kiln_sampler_free(freed));
  FAILS("kiln_sampler_sample", kiln_sampler_sample(NULL, ctx, 0, &t));
  FAILS("kiln_sampler_sample", kiln_sampler_sample(freed, ctx, 0, &t));
  FAILS("kiln_sampler_sample", kiln_sampler_sample(sampler, NULL, 0, &t));
  FAILS("kiln_sampler_sample", kiln_sampler_sample(sampler, ctx, -1, &t));
  FAILS("kiln_sampler_accept", kiln_sampler_accept(NULL, 0));
  FAILS("kiln_sampler_accept", kiln_sampler_accept(sampler, 999999));
  FAILS("kiln_sampler_accept", kiln_sampler_accept(sampler, -1));
  FAILS("kiln_sampler_reset", kiln_sampler_reset(NULL));
  FAILS("kiln_generate_default_options", kiln_generate_default_options(NULL));
  FAILS("kiln_generate", kiln_generate(NULL, sampler, "x", NULL, NULL, NULL, NULL));
  FAILS("kiln_generate", kiln_generate(ctx, NULL, "x", NULL, NULL, NULL, NULL));
  FAILS("kiln_generate", kiln_generate(ctx, freed, "x", NULL, NULL, NULL, NULL));
  FAILS("kiln_generate", kiln_generate(ctx, sampler, NULL, NULL, NULL, NULL, NULL));
  {
    kiln_generate_options go;
    OK(kiln_generate_default_options(&go));
    go.n_stop = -1;
    FAILS("kiln_generate", kiln_generate(ctx, sampler, "x", &go, NULL, NULL, NULL));
    go.n_stop = 0;
    go.seq = -1;
    FAILS("kiln_generate", kiln_generate(ctx, sampler, "x", &go, NULL, NULL, NULL));
  }
  OK(kiln_sampler_free(sampler));
  OK(kiln_context_free(ctx));
}

static int32_t stop_after_three(void* user_data, int32_t token, const char* piece, int64_t len) {
  int* count = (int*)user_data;
  (void)token;
  (void)piece;
  (void)len;
  return ++*count >= 3;
}

/* The logits after "In the beginning" and its last token again, in a context of `model`; the
 * caller frees them. */
static float* prompt_logits(kiln_model* model, int64_t* n_logits) {
  kiln_context* ctx = NULL;
  int32_t tokens[64];
  int64_t n = 0;
  float* out = NULL;
  OK(kiln_context_create(model, NULL, &ctx));
  OK(kiln_tokenize(model, "In the beginning", 16, 1, 0, tokens, 64, &n));
  if (ctx != NULL && n > 0) {
    OK(decode_seq(ctx, tokens, n, 0, 0));
    OK(decode_seq(ctx, &tokens[n - 1], 1, 0, (int32_t)n));
    out = copy_logits(ctx, 0, n_logits);
  }
  if (ctx != NULL) OK(kiln_context_free(ctx));
  return out;
}

/* The model split over sim0 and the CPU (-ngl 2, then -ot moving the FFN matrices to the CPU and
 * -nkvo) gives the logits of the model on one device, bit for bit (sim computes with the CPU's
 * kernels), and evicts, restores and saves state as a whole model does; bad split options are
 * errors with the field named. */
static void check_split(kiln_runtime* rt, const char* path, kiln_model* whole) {
  kiln_model_options mo;
  kiln_model* split = NULL;
  int64_t n_want = 0, n_got = 0;
  float *want = prompt_logits(whole, &n_want), *got = NULL;
  int variant;
  for (variant = 0; variant < 3; ++variant) {
    OK(kiln_model_default_options(&mo));
    mo.device = "sim0";
    if (variant == 0) mo.n_gpu_layers = 2;
    if (variant == 1) mo.override_tensor = "ffn_(up|down|gate)=cpu";
    if (variant == 2) mo.no_kv_offload = 1;
    split = NULL;
    OK(kiln_model_load(rt, path, &mo, &split));
    if (split == NULL) continue;
    got = prompt_logits(split, &n_got);
    CHECK(want != NULL && got != NULL && n_want == n_got && memcmp(want, got, (size_t)n_want * sizeof(float)) == 0);
    free(got);
    check_evict_restore_and_state(split);
    OK(kiln_model_free(split));
  }
  free(want);
  OK(kiln_model_default_options(&mo));
  mo.device = "sim0";
  mo.override_tensor = "nope";
  CHECK(kiln_model_load(rt, path, &mo, &split) == KILN_ERROR_ARGUMENT);
  CHECK(strstr(kiln_last_error(), "override_tensor") != NULL);
  mo.override_tensor = NULL;
  mo.n_tensor_split = 2;
  mo.tensor_split = NULL;
  CHECK(kiln_model_load(rt, path, &mo, &split) == KILN_ERROR_ARGUMENT);
  CHECK(strstr(kiln_last_error(), "tensor_split") != NULL);
  mo.n_tensor_split = 0;
  mo.split_mode = 7;
  CHECK(kiln_model_load(rt, path, &mo, &split) == KILN_ERROR_ARGUMENT);
  CHECK(strstr(kiln_last_error(), "split_mode") != NULL);
}

static int checks(const char* path) {
  kiln_runtime_options ro;
  kiln_sim_device sim = {"sim0", 1024u * 1024u * 1024u};
  kiln_model_options mo;
  kiln_runtime* rt = NULL;
  kiln_model* model = NULL;
  kiln_context* ctx = NULL;
  kiln_sampler* sampler = NULL;
  kiln_generate_result gr;
  kiln_memory_row rows[16];
  int64_t n_devices = 0, n_rows = 0;
  int count = 0;
  OK(kiln_runtime_default_options(&ro));
  ro.sim_devices = &sim;
  ro.n_sim_devices = 1;
  OK(kiln_runtime_create(&ro, &rt));
  OK(kiln_runtime_device_count(rt, &n_devices));
  CHECK(n_devices >= 2);
  OK(kiln_model_default_options(&mo));
  mo.device = "sim0"; /* not host-visible: eviction moves the weights and the KV cache out */
  OK(kiln_model_load(rt, path, &mo, &model));
  if (model == NULL) return 1;
  OK(kiln_runtime_memory(rt, rows, 16, &n_rows));
  CHECK(n_rows >= 3);
  check_text(model);
  check_evict_restore_and_state(model);
  check_four_sequences(model);
  OK(kiln_context_create(model, NULL, &ctx));
  OK(kiln_sampler_create(model, NULL, &sampler));
  OK(kiln_generate(ctx, sampler, "In the beginning", NULL, stop_after_three, &count, &gr));
  CHECK(gr.stop == KILN_STOP_CALLBACK && gr.n_generated == 3 && count == 3);
  OK(kiln_sampler_free(sampler));
  OK(kiln_context_free(ctx));
  check_errors(rt, model);
  check_split(rt, path, model);
  OK(kiln_model_free(model));
  OK(kiln_runtime_free(rt));
  CHECK(kiln_api_version() == KILN_API_VERSION && strlen(kiln_version()) > 0);
  if (g_failures == 0) printf("ok\n");
  return g_failures == 0 ? 0 : 1;
}

static int32_t is_resident(const kiln_model* model) {
  int32_t resident = -1;
  OK(kiln_model_is_resident(model, &resident));
  return resident;
}

/* A runtime with sim0 (not host-visible: a yield moves the weights and the KV cache out) and the
 * arbiter in `dir`, and the model at `path` on it; 0 on failure. */
static int open_side(const char* path, const char* dir, kiln_runtime** rt, kiln_model** model) {
  kiln_runtime_options ro;
  kiln_sim_device sim = {"sim0", 1024u * 1024u * 1024u};
  kiln_model_options mo;
  OK(kiln_runtime_default_options(&ro));
  ro.sim_devices = &sim;
  ro.n_sim_devices = 1;
  ro.arbiter_dir = dir;
  ro.arbiter_timeout_ms = 20000; /* a hang fails in 20 s, not at ctest's timeout */
  OK(kiln_runtime_create(&ro, rt));
  OK(kiln_model_default_options(&mo));
  mo.device = "sim0";
  if (*rt != NULL) OK(kiln_model_load(*rt, path, &mo, model));
  return *rt != NULL && *model != NULL;
}

/* Two runtimes of this process sharing `dir` are two processes to each other (flocks are per open
 * file): each decode waits for the token, the idle holder evicts its model and hands it on, and
 * the evicted model's next logits are the same bits. */
static int arbiter_checks(const char* path, const char* dir) {
  kiln_runtime *rt_a = NULL, *rt_b = NULL, *bad = NULL;
  kiln_model *a = NULL, *b = NULL;
  kiln_context *ctx_a = NULL, *ctx_b = NULL;
  kiln_runtime_options ro;
  int32_t tokens[64];
  int64_t n = 0, n_ref = 0, n_b = 0, n_again = 0;
  float *ref = NULL, *got_b = NULL, *again = NULL;
  if (!open_side(path, dir, &rt_a, &a) || !open_side(path, dir, &rt_b, &b)) return 1;
  OK(kiln_context_create(a, NULL, &ctx_a));
  OK(kiln_context_create(b, NULL, &ctx_b));
  OK(kiln_tokenize(a, "In the beginning", 16, 1, 0, tokens, 64, &n));
  CHECK(n > 1 && n < 60);

  OK(decode_seq(ctx_a, tokens, n, 0, 0)); /* b yields */
  ref = copy_logits(ctx_a, n - 1, &n_ref);
  CHECK(is_resident(a) == 1 && is_resident(b) == 0);
  OK(decode_seq(ctx_b, tokens, n, 0, 0)); /* a yields */
  got_b = copy_logits(ctx_b, n - 1, &n_b);
  CHECK(is_resident(a) == 0 && is_resident(b) == 1);
  OK(decode_seq(ctx_a, tokens, n, 1, 0)); /* b yields; a's weights come back */
  again = copy_logits(ctx_a, n - 1, &n_again);
  CHECK(is_resident(a) == 1 && is_resident(b) == 0);
  CHECK(ref != NULL && got_b != NULL && again != NULL && n_ref == n_b && n_ref == n_again);
  if (ref != NULL && got_b != NULL && again != NULL && n_ref == n_b && n_ref == n_again) {
    CHECK(memcmp(ref, got_b, (size_t)n_ref * sizeof(float)) == 0);
    CHECK(memcmp(ref, again, (size_t)n_ref * sizeof(float)) == 0);
  }
  free(ref);
  free(got_b);
  free(again);
  OK(kiln_context_free(ctx_a));
  OK(kiln_context_free(ctx_b));
  OK(kiln_model_free(a));
  OK(kiln_model_free(b));
  OK(kiln_runtime_free(rt_a));
  OK(kiln_runtime_free(rt_b));

  /* A directory that cannot be made is refused by name. */
  OK(kiln_runtime_default_options(&ro));
  ro.arbiter_dir = "/proc/kiln-no-such-dir/arbiter";
  FAILS("kiln_runtime_create", kiln_runtime_create(&ro, &bad));
  CHECK(bad == NULL && strstr(kiln_last_error(), "kiln-no-such-dir") != NULL);
  if (g_failures == 0) printf("ok\n");
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if ((argc == 7 || argc == 9) && strcmp(argv[1], "generate") == 0)
    return generate(argv[2], argv[3], atol(argv[4]), (float)atof(argv[5]), strtoul(argv[6], NULL, 10),
                    argc == 9 ? argv[7] : NULL, argc == 9 ? argv[8] : NULL);
  if (argc == 3 && strcmp(argv[1], "checks") == 0) return checks(argv[2]);
  if (argc == 5 && strcmp(argv[1], "image-checks") == 0) return image_checks(argv[2], argv[3], argv[4]);
  if (argc == 5 && strcmp(argv[1], "audio-checks") == 0) return audio_checks(argv[2], argv[3], argv[4]);
  if (argc == 4 && strcmp(argv[1], "arbiter-checks") == 0) return arbiter_checks(argv[2], argv[3]);
  fprintf(stderr,
          "usage: c_api_test generate MODEL PROMPT N TEMP SEED [MMPROJ IMAGE] | checks MODEL | "
          "image-checks MODEL MMPROJ IMAGE | audio-checks MODEL MMPROJ WAV | arbiter-checks MODEL DIR\n");
  return 2;
}
