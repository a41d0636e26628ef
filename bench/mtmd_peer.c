// The image-encoding test of `kiln bench --mmproj --image` on llama.cpp's libmtmd, for
// bench/compare_mtmd_encode.py: loads the text model and the mmproj, prepares the image as
// llama-mtmd-cli does (mtmd_helper_bitmap_init_from_file, mtmd_tokenize), encodes it once to warm
// up, then R more times, printing each encode's wall and process CPU milliseconds
// ("encode_ms N cpu_ms M").
//   mtmd_peer TEXT.gguf MMPROJ.gguf IMAGE REPS THREADS FLASH(0|1)
#define _POSIX_C_SOURCE 199309L
#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"
#include "ggml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_ms(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void quiet(enum ggml_log_level level, const char* text, void* ud) {
  (void) ud;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s TEXT.gguf MMPROJ.gguf IMAGE REPS THREADS FLASH\n", argv[0]);
    return 2;
  }
  const int reps = atoi(argv[4]), threads = atoi(argv[5]), flash = atoi(argv[6]);
  llama_log_set(quiet, NULL);
  mtmd_helper_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  struct mtmd_context_params p = mtmd_context_params_default();
  p.use_gpu = false;
  p.print_timings = false;
  p.n_threads = threads;
  p.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  mtmd_context* ctx = mtmd_init_from_file(argv[2], model, p);
  if (!ctx) return 1;
  struct mtmd_helper_bitmap_wrapper bw = mtmd_helper_bitmap_init_from_file(ctx, argv[3], false, mtmd_helper_init_opt_default());
  if (!bw.bitmap) return 1;
  const mtmd_bitmap* bitmaps[1] = {bw.bitmap};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  struct mtmd_input_text text = {"<__media__>", strlen("<__media__>"), false, true};
  if (mtmd_tokenize(ctx, chunks, &text, bitmaps, 1) != 0) return 1;
  const mtmd_input_chunk* image = NULL;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE) image = c;
  }
  if (!image || mtmd_encode_chunk(ctx, image) != 0) return 1;  // warm-up (allocates)
  for (int r = 0; r < reps; r++) {
    const double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    if (mtmd_encode_chunk(ctx, image) != 0) return 1;
    printf("encode_ms %.3f cpu_ms %.3f\n", clock_ms(CLOCK_MONOTONIC) - t0, clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0);
  }
  mtmd_input_chunks_free(chunks);
  mtmd_bitmap_free(bw.bitmap);
  mtmd_free(ctx);
  llama_model_free(model);
  return 0;
}
