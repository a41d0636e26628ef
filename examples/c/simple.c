/* Loads a GGUF model, continues a prompt and prints the text as it comes, through kiln's C API.
 *   cc -std=c99 simple.c $(pkg-config --cflags --libs kiln) -o simple
 *   ./simple MODEL.gguf "Once upon a time"
 */
#include <kiln/kiln.h>
#include <stdio.h>

/* Called with each generated token's text; returning non-zero would stop the generation. */
static int32_t print_piece(void* user_data, int32_t token, const char* piece, int64_t len) {
  (void)user_data;
  (void)token;
  fwrite(piece, 1, (size_t)len, stdout);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  kiln_runtime* runtime = NULL;
  kiln_model* model = NULL;
  kiln_context* context = NULL;
  kiln_sampler* sampler = NULL;
  kiln_sampler_params params;
  kiln_generate_options options;
  int status = 1;
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
    return 2;
  }
  if (kiln_api_version() != KILN_API_VERSION) {
    fprintf(stderr, "libkiln has API version %d, this program was built for %d\n", (int)kiln_api_version(),
            KILN_API_VERSION);
    return 1;
  }
  kiln_sampler_default_params(&params);
  params.temperature = 0; /* greedy */
  kiln_generate_default_options(&options);
  options.max_tokens = 32;
  if (kiln_runtime_create(NULL, &runtime) == KILN_OK && kiln_model_load(runtime, argv[1], NULL, &model) == KILN_OK &&
      kiln_context_create(model, NULL, &context) == KILN_OK &&
      kiln_sampler_create(model, &params, &sampler) == KILN_OK &&
      kiln_generate(context, sampler, argv[2], &options, print_piece, NULL, NULL) == KILN_OK) {
    printf("\n");
    status = 0;
  } else {
    fprintf(stderr, "simple: %s\n", kiln_last_error());
  }
  if (sampler) kiln_sampler_free(sampler);
  if (context) kiln_context_free(context);
  if (model) kiln_model_free(model);
  if (runtime) kiln_runtime_free(runtime);
  return status;
}
