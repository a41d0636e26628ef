/* kiln.h: the C API of kiln, an engine that runs GGUF language models on a machine's own devices.
 *
 * C99 (and C89-compatible FFIs: ctypes, cffi, JNA...): opaque handles, plain structs, no C++ type
 * crosses this boundary. Link with libkiln.so (`pkg-config --cflags --libs kiln`, or CMake's
 * `find_package(kiln)` and the target `kiln::kiln`).
 *
 * Errors: every function returns a kiln_status. KILN_OK is success; on any other status nothing
 * was changed unless the function says otherwise, and kiln_last_error() gives a message that
 * names the thing (the argument, the file, the key, the numbers).
 *
 * Handles, from the outside in:
 *   kiln_runtime  the devices of the process (the CPU, simulated accelerators, Vulkan GPUs), one
 *                 thread pool, one memory budget per device;
 *   kiln_model    a GGUF model placed on one device of a runtime (its weights count in the
 *                 device's budget; they may be evicted and restored, bit-exact);
 *   kiln_context  a KV cache of up to KILN_MAX_SEQUENCES sequences over a model, and the last
 *                 batch's logits (or embeddings);
 *   kiln_sampler  a token sampler (temperature, top-k/p, min-p, penalties, grammar, seed);
 *   kiln_mmproj   a model's vision and/or audio encoder and projector (llama.cpp's mmproj
 *                 GGUF): contexts created with it take images and/or audio in their prompts.
 * A handle must be freed after every handle made from it (contexts and samplers before their
 * model, contexts before their mmproj, mmprojs before their model, models before their runtime);
 * freeing in the wrong order is refused with an error.
 *
 * Strings: inputs are NUL-terminated UTF-8 unless a length is given. Outputs go to a caller's
 * buffer `buf` of `size` bytes: the text is written truncated to size - 1 bytes and NUL-terminated
 * (nothing is written when size is 0), and `*length` receives the whole text's length without
 * the NUL; call again with a buffer of *length + 1 bytes when it did not fit. Sizes and counts
 * are int64_t; a negative one is an error.
 *
 * Thread-safety: kiln_last_error() is per thread. A runtime and a model may be used from any
 * number of threads at once. A context or a sampler is used by one thread at a time (a context
 * serializes its own calls; two contexts compute on two threads at once, taking turns on a shared
 * device where they must).
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#if defined(KILN_BUILDING_LIBRARY)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header's API and ABI. kiln_api_version() returns the library's: a program
 * built against another value should refuse to run. Raised at every incompatible change. */
#define KILN_API_VERSION 4

/* Sequence ids of a context are in [0, KILN_MAX_SEQUENCES). */
#define KILN_MAX_SEQUENCES 64

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_ARGUMENT = 1, /* a null handle or pointer, a negative size, a token, position or
                              sequence out of range, an option out of range */
  KILN_ERROR_FAILED = 2    /* the operation failed: a file, the memory budget, a template... */
} kiln_status;

typedef struct kiln_runtime kiln_runtime;
typedef struct kiln_model kiln_model;
typedef struct kiln_context kiln_context;
typedef struct kiln_sampler kiln_sampler;
typedef struct kiln_mmproj kiln_mmproj;

/* ---- errors and versions ---- */

/* The message of the last call on this thread that did not return KILN_OK ("" if none yet).
 * Owned by the library, valid until the thread's next kiln call. Thread-safe (per thread). */
KILN_API const char* kiln_last_error(void);

/* The library's version ("0.1.0"), a static string. Thread-safe. */
KILN_API const char* kiln_version(void);

/* The library's KILN_API_VERSION. Thread-safe. */
KILN_API int32_t kiln_api_version(void);

/* ---- runtime: devices, budgets, threads ---- */

/* A memory budget (`kiln --max-mem DEVICE=GiB`): gib >= 0 is the budget; gib < 0 leaves -gib GiB
 * of the device's total memory out of it. */
typedef struct kiln_budget {
  const char* device; /* "cpu", "sim0", "vulkan0" */
  double gib;
} kiln_budget;

/* A simulated accelerator (`--sim-capacity NAME=GiB`): memory that is not host-visible, with a
 * hard capacity; it computes with the CPU kernels. */
typedef struct kiln_sim_device {
  const char* name;  /* "sim0", "sim1", ... */
  uint64_t capacity; /* bytes, > 0 */
} kiln_sim_device;

typedef struct kiln_runtime_options {
  int32_t n_threads;                  /* threads of the compute pool; 0 or less: every core */
  const kiln_sim_device* sim_devices; /* n_sim_devices entries, may be NULL when 0 */
  int64_t n_sim_devices;
  const kiln_budget* budgets;         /* n_budgets entries, may be NULL when 0 */
  int64_t n_budgets;
  const char* swap_dir;               /* NULL or "": evicted KV caches stay in host memory */
  int32_t vulkan;                     /* non-zero: look for Vulkan GPUs (none found is no error) */
  /* NULL or "": no arbiter. Else `kiln serve --arbiter DIR`: processes (and runtimes) that name
   * the same directory take turns on their devices by a token in it (created if missing, one
   * level). A call that computes or places memory (kiln_model_load, kiln_model_restore,
   * kiln_context_create, kiln_decode, kiln_embed, kiln_generate, kiln_decode_media_prompt,
   * kiln_state_load) first waits for the token; while the runtime is idle and another waits, a
   * thread of the runtime evicts its models (weights and KV caches, restored bit-exact at their
   * next use) and hands the token on. Not covered: an mmproj's encoder stays resident. */
  const char* arbiter_dir;
  int32_t arbiter_timeout_ms;         /* how long such a call waits for the token before it fails
                                         (KILN_ERROR_FAILED); 0 or less: 60000 */
} kiln_runtime_options;

/* Fills *options with the defaults (every core, the CPU only, no budget, no swap directory, no
 * arbiter). Thread-safe. */
KILN_API kiln_status kiln_runtime_default_options(kiln_runtime_options* options);

/* Opens the devices `options` names (NULL: the defaults) into *out, which the caller owns and
 * frees with kiln_runtime_free. The option strings are copied. Errors: a bad sim device name or
 * capacity, a budget for an unknown device, a swap directory that cannot hold files, an arbiter
 * directory that cannot be created or opened. */
KILN_API kiln_status kiln_runtime_create(const kiln_runtime_options* options, kiln_runtime** out);

/* Frees a runtime. Refused while models of it are alive. NULL is an error. */
KILN_API kiln_status kiln_runtime_free(kiln_runtime* runtime);

typedef struct kiln_device_info {
  char name[64];         /* "cpu", "sim0", "vulkan0" */
  char kind[32];         /* "cpu", "sim", "vulkan" */
  char description[128]; /* "host RAM", ... (truncated to fit) */
  uint64_t total;        /* bytes the device has */
  uint64_t free;         /* bytes an allocation could get now */
} kiln_device_info;

/* The number of devices of the runtime. Thread-safe. */
KILN_API kiln_status kiln_runtime_device_count(const kiln_runtime* runtime, int64_t* count);

/* Device `index` (0 .. count - 1; the CPU is 0) with its capacity and free memory now.
 * Thread-safe. */
KILN_API kiln_status kiln_runtime_device_info(const kiln_runtime* runtime, int64_t index, kiln_device_info* info);

/* One line of the memory breakdown: a device (owner[0] == '\0') or one owner of memory on it
 * (a model's weights, KV caches and compute; the device's shared compute arena). */
typedef struct kiln_memory_row {
  char device[64];
  char owner[128];       /* "" on the device's line */
  uint64_t total, free;  /* the device's line: its memory; 0 on owner lines */
  uint64_t budget;       /* the device's line: its budget, UINT64_MAX when none */
  uint64_t counted;      /* the device's line: bytes the budget counts now */
  uint64_t weights, kv, compute, scratch; /* owner lines: resident bytes by kind */
  int64_t evicted;       /* owner lines: its residents that are not on the device now */
  int32_t pinned;        /* owner lines: non-zero while it computes */
} kiln_memory_row;

/* The memory breakdown, per device and owner: writes up to `capacity` rows to `rows` (may be
 * NULL when capacity is 0) and the number of rows there are to *n_rows (call again with more
 * room when it is larger than capacity). Thread-safe. */
KILN_API kiln_status kiln_runtime_memory(const kiln_runtime* runtime, kiln_memory_row* rows, int64_t capacity,
                                         int64_t* n_rows);

/* ---- models ---- */

/* kiln_model_options.split_mode: layers spread over the devices by tensor_split, or all on
 * main_gpu (llama.cpp's -sm layer / -sm none). */
#define KILN_SPLIT_MODE_LAYER 0
#define KILN_SPLIT_MODE_NONE 1
/* kiln_model_options.n_gpu_layers: every layer and the output layer on the devices. */
#define KILN_ALL_LAYERS (-1)

typedef struct kiln_model_options {
  const char* device; /* the device the weights go on; NULL or "": "cpu" */
  int32_t no_mmap;    /* non-zero: copy every weight into memory of its own (`--no-mmap`) */
  int32_t mlock;      /* non-zero: lock the weights' pages in RAM while resident (`--mlock`) */
  /* A model larger than a device, split as llama.cpp splits it (the README's "Models larger than
   * a device"): the flags -dev A,B, -ngl, -sm, -ts, -mg, -ot, -nkvo, --fit, -fitt. With the
   * defaults the whole model lies on `device` when it fits there, else fit splits it. */
  const char* devices;          /* "sim0,sim1": the devices, the first the main one; NULL or "": `device` */
  int32_t n_gpu_layers;         /* the last N of n_layer + 1 layers on the devices; KILN_ALL_LAYERS (default) */
  int32_t split_mode;           /* KILN_SPLIT_MODE_LAYER (default) or KILN_SPLIT_MODE_NONE */
  const float* tensor_split;    /* n_tensor_split shares, one per device (not read after the call); NULL */
  int32_t n_tensor_split;
  int32_t main_gpu;             /* the device (index into `devices`) of KILN_SPLIT_MODE_NONE; default 0 */
  const char* override_tensor;  /* "PATTERN=DEVICE,...": tensors matching go to DEVICE; NULL or "": none */
  int32_t no_kv_offload;        /* non-zero: every layer's K and V in host memory */
  int32_t fit;                  /* non-zero (default): fit a model that does not fit (see above) */
  int64_t fit_target_mib;       /* memory fit leaves free per device; -1 (default): each device's own */
  int64_t fit_n_ctx;            /* the context fit plans for; 0 (default): 4096 or the training context */
  int32_t segmented;            /* non-zero: devices that cannot hold their layers stream them in segments
                                   (`--segmented`); kiln_model_evict evicts the segments too */
} kiln_model_options;

/* Fills *options with the defaults (the CPU, weights read from the mapped file, fit on). Zeroed
 * options are not the defaults (n_gpu_layers 0 keeps every layer on the CPU): start from these.
 * Thread-safe. */
KILN_API kiln_status kiln_model_default_options(kiln_model_options* options);

/* Loads the GGUF file at `path` and places its weights on options->device, or over the devices
 * its split options give (NULL options: the defaults), into *out, which the caller owns and frees
 * with kiln_model_free. The runtime must outlive the model. Errors: a file that is not a model
 * kiln runs, an unknown device, a bad split option, no room within a device's budget (the message
 * has the numbers). Thread-safe. */
KILN_API kiln_status kiln_model_load(kiln_runtime* runtime, const char* path, const kiln_model_options* options,
                                     kiln_model** out);

/* Frees a model. Refused while contexts or samplers of it are alive. NULL is an error. */
KILN_API kiln_status kiln_model_free(kiln_model* model);

/* The model's vocabulary size, embedding width and training context length. Thread-safe. */
KILN_API kiln_status kiln_model_n_vocab(const kiln_model* model, int32_t* n_vocab);
KILN_API kiln_status kiln_model_n_embd(const kiln_model* model, int32_t* n_embd);
KILN_API kiln_status kiln_model_n_ctx_train(const kiln_model* model, int64_t* n_ctx_train);

/* The model's name (GGUF general.name, else the file name), as a string output (see the top).
 * Thread-safe. */
KILN_API kiln_status kiln_model_name(const kiln_model* model, char* buf, int64_t size, int64_t* length);

/* The string value of GGUF metadata `key` ("general.architecture", "tokenizer.chat_template"), as
 * a string output. Errors: the key is absent or not a string. Thread-safe. */
KILN_API kiln_status kiln_model_meta_string(const kiln_model* model, const char* key, char* buf, int64_t size,
                                            int64_t* length);

/* The integer value of GGUF metadata `key` (any integer type). Errors: absent, not an integer.
 * Thread-safe. */
KILN_API kiln_status kiln_model_meta_int(const kiln_model* model, const char* key, int64_t* value);

/* The text of token `token` (0 .. n_vocab - 1), control tokens' text included, as a string
 * output. Thread-safe. */
KILN_API kiln_status kiln_model_token_text(const kiln_model* model, int32_t token, char* buf, int64_t size,
                                           int64_t* length);

/* Whether `token` ends a generation (end of sequence, end of turn). Thread-safe. */
KILN_API kiln_status kiln_model_token_is_eog(const kiln_model* model, int32_t token, int32_t* is_eog);

/* Renders a chat with the model's chat template (GGUF tokenizer.chat_template, else ChatML), as
 * a string output. `messages_json`: an OpenAI-style JSON array ([{"role": "user", "content":
 * "..."}, ...]). `extra_json`: NULL, or a JSON object of more template variables ({"tools":
 * [...]}). `add_generation_prompt` non-zero: end with the assistant turn's opening. Errors: bad
 * JSON (the message says where), a template error. Thread-safe. */
KILN_API kiln_status kiln_model_apply_chat_template(const kiln_model* model, const char* messages_json,
                                                    const char* extra_json, int32_t add_generation_prompt,
                                                    char* buf, int64_t size, int64_t* length);

/* Splits a model's output into an OpenAI chat message, as `kiln serve`'s /v1/chat/completions
 * does (the same chat plan and output parser): `request_json` is the chat request the output
 * answers ({"messages": [...], "tools"?: [...], "tool_choice"?: ...}; its template and tool
 * syntax come from the model), `output` the generated text. Writes, as a string output, a JSON
 * object {"role": "assistant", "content": TEXT or null, "reasoning_content"?: TEXT,
 * "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments": JSON TEXT}}]};
 * a call whose text carries no id gets "" (name it yourself). Errors: bad JSON, a tool or a
 * tool_choice kiln refuses, a template error. Thread-safe. */
KILN_API kiln_status kiln_model_parse_chat_output(const kiln_model* model, const char* request_json,
                                                  const char* output, char* buf, int64_t size, int64_t* length);

/* The prompt `kiln serve` renders for the chat request `request_json` (as in
 * kiln_model_parse_chat_output): the template's own with the tools when it takes them, else with
 * kiln's description of the tools and of the call syntax the parser reads; the generation prompt
 * included. A string output. Errors as kiln_model_parse_chat_output's. Thread-safe. */
KILN_API kiln_status kiln_model_chat_prompt(const kiln_model* model, const char* request_json, char* buf,
                                            int64_t size, int64_t* length);

/* Evicts the model's memory from its device now: its weights, and its contexts' KV caches
 * (copied to host memory or the swap directory; a KV cache on the CPU stays without a swap
 * directory) and input buffers; the device's compute arena, shared by every model there, stays
 * (the budget evicts it when idle). The next call that computes
 * brings everything back, bit-exact; kiln_model_restore does it now. Errors: the model is
 * computing (pinned), a swap file cannot be written. Thread-safe. */
KILN_API kiln_status kiln_model_evict(kiln_model* model);

/* Restores what kiln_model_evict (or the budget) evicted of the model. Errors: no room within the
 * budget (the message has the numbers). Thread-safe. */
KILN_API kiln_status kiln_model_restore(kiln_model* model);

/* Whether all of the model's memory is on its device now (non-zero) or some is evicted (0).
 * Thread-safe. */
KILN_API kiln_status kiln_model_is_resident(const kiln_model* model, int32_t* resident);

/* ---- text ---- */

/* Tokenizes `text` (`text_len` bytes, need not be NUL-terminated) with the model's tokenizer:
 * `add_special` non-zero adds BOS (and EOS) as the model's metadata asks; `parse_special`
 * non-zero turns control tokens written in the text (<|im_start|>) into their ids. Writes up to
 * `capacity` ids to `tokens` (may be NULL when capacity is 0) and the count there is to
 * *n_tokens. Thread-safe. */
KILN_API kiln_status kiln_tokenize(const kiln_model* model, const char* text, int64_t text_len, int32_t add_special,
                                   int32_t parse_special, int32_t* tokens, int64_t capacity, int64_t* n_tokens);

/* The text of `n_tokens` token ids, as a string output; `special` non-zero writes control tokens'
 * text too. Errors: an id outside the vocabulary. Thread-safe. */
KILN_API kiln_status kiln_detokenize(const kiln_model* model, const int32_t* tokens, int64_t n_tokens,
                                     int32_t special, char* buf, int64_t size, int64_t* length);

/* ---- contexts ---- */

typedef struct kiln_context_options {
  int64_t n_ctx;      /* KV cells, shared by all sequences; 0: the model's training context, at
                         most 4096 */
  int64_t n_batch;    /* most tokens one kiln_decode accepts (default 2048) */
  int64_t n_ubatch;   /* most tokens one micro-batch computes (default 512) */
  int32_t embeddings; /* non-zero: outputs are hidden states [n_embd] (kiln_get_embeddings,
                         kiln_embed), not logits */
  kiln_mmproj* mmproj; /* NULL: text only; else the context takes the mmproj's media (images,
                          audio) in its prompts (kiln_decode_media_prompt,
                          kiln_generate_options.media), encoded by this mmproj, which must be the
                          model's and outlive the context */
} kiln_context_options;

/* Fills *options with the defaults. Thread-safe. */
KILN_API kiln_status kiln_context_default_options(kiln_context_options* options);

/* A context over `model` (NULL options: the defaults) into *out, which the caller owns and frees
 * with kiln_context_free; the model must outlive it. It has sequences 0 .. KILN_MAX_SEQUENCES - 1
 * sharing n_ctx cells, and a backend of its own on the model's device (two contexts compute on
 * two threads). Errors: options out of range, no room within the device's budget. Thread-safe. */
KILN_API kiln_status kiln_context_create(kiln_model* model, const kiln_context_options* options,
                                         kiln_context** out);

/* Frees a context. NULL is an error. */
KILN_API kiln_status kiln_context_free(kiln_context* context);

/* The context's KV cells. */
KILN_API kiln_status kiln_context_n_ctx(const kiln_context* context, int64_t* n_ctx);

/* One token of a batch: id `token` at position `pos` of sequence `seq`; `logits` non-zero keeps
 * its output (logits, or the hidden state in an embeddings context). */
typedef struct kiln_batch_token {
  int32_t token;
  int32_t pos;
  int32_t seq;
  int32_t logits;
} kiln_batch_token;

/* Decodes `n_tokens` tokens (1 .. n_batch) of any sequences in one pass. Errors (nothing
 * computed): a token outside the vocabulary, a negative position, a sequence outside
 * [0, KILN_MAX_SEQUENCES), too many tokens, no room within the budget; "the context is full"
 * when its cells ran out. One thread at a time per context. */
KILN_API kiln_status kiln_decode(kiln_context* context, const kiln_batch_token* tokens, int64_t n_tokens);

/* The logits [n_vocab] of batch token `index` of the last kiln_decode: *logits points into the
 * context, valid until its next decode or free. Errors: the token was not marked, an embeddings
 * context, index out of range. */
KILN_API kiln_status kiln_get_logits(const kiln_context* context, int64_t index, const float** logits,
                                     int64_t* n_logits);

/* The hidden state [n_embd] (after the output norm) of batch token `index` of the last
 * kiln_decode of an embeddings context; as kiln_get_logits. */
KILN_API kiln_status kiln_get_embeddings(const kiln_context* context, int64_t index, const float** embeddings,
                                         int64_t* n_embd);

/* The embedding of `n_tokens` tokens as one sequence, pooled as the model's metadata says (mean
 * by default) and scaled to norm 1 when `normalize` is non-zero (as `kiln serve`'s
 * /v1/embeddings): writes min(capacity, n_embd) floats to `out` and n_embd to *n_out. Uses
 * sequence 0 of an embeddings context, whose cache it clears. One thread at a time per context. */
KILN_API kiln_status kiln_embed(kiln_context* context, const int32_t* tokens, int64_t n_tokens, int32_t normalize,
                                float* out, int64_t capacity, int64_t* n_out);

/* Sequence edits over positions [p0, p1) (p1 < 0: to the end; p0 < 0: from the start):
 * remove from `seq` (seq < 0: every sequence), copy `src` to `dst` (the cells are shared), keep
 * only `seq`. kiln_seq_pos_max: the largest position in `seq`, -1 when empty. One thread at a
 * time per context. */
KILN_API kiln_status kiln_seq_rm(kiln_context* context, int32_t seq, int32_t p0, int32_t p1);
KILN_API kiln_status kiln_seq_cp(kiln_context* context, int32_t src, int32_t dst, int32_t p0, int32_t p1);
KILN_API kiln_status kiln_seq_keep(kiln_context* context, int32_t seq);
KILN_API kiln_status kiln_seq_pos_max(const kiln_context* context, int32_t seq, int32_t* pos_max);

/* Saves sequence `seq` to the file at `path`: its `n_tokens` tokens (the caller's record of what
 * the sequence holds) and its cached K/V, bit-exact. */
KILN_API kiln_status kiln_state_save(kiln_context* context, int32_t seq, const int32_t* tokens, int64_t n_tokens,
                                     const char* path);

/* Loads a file of kiln_state_save into sequence `seq` (cleared first) of a context of the same
 * model shape and cache types; writes up to `capacity` of its tokens to `tokens` and their count
 * to *n_tokens. */
KILN_API kiln_status kiln_state_load(kiln_context* context, int32_t seq, const char* path, int32_t* tokens,
                                     int64_t capacity, int64_t* n_tokens);

/* ---- sampling ---- */

typedef struct kiln_sampler_params {
  uint64_t seed;           /* any value is deterministic */
  float temperature;       /* <= 0: greedy */
  int32_t top_k;           /* <= 0: off */
  float top_p;             /* >= 1: off */
  float min_p;             /* <= 0: off */
  float typical_p;         /* >= 1: off */
  int32_t penalty_last_n;  /* tokens the penalties look at; -1: the whole history */
  float repeat_penalty;    /* 1: off */
  float frequency_penalty; /* 0: off */
  float presence_penalty;  /* 0: off */
  const char* grammar;     /* NULL or "": none; a GBNF grammar the output follows */
  const char* json_schema; /* NULL or "": none; a JSON schema the output follows (not with grammar) */
} kiln_sampler_params;

/* Fills *params with kiln's defaults (`kiln run`'s: temperature 0.8, top-k 40, top-p 0.95,
 * min-p 0.05, seed 0xFFFFFFFF). Thread-safe. */
KILN_API kiln_status kiln_sampler_default_params(kiln_sampler_params* params);

/* A sampler for `model`'s vocabulary into *out, which the caller owns and frees with
 * kiln_sampler_free; the model must outlive it. Strings are copied. Errors: a parameter out of
 * range, a grammar or schema that does not parse (the message says where). Thread-safe. */
KILN_API kiln_status kiln_sampler_create(kiln_model* model, const kiln_sampler_params* params,
                                         kiln_sampler** out);

/* Frees a sampler. NULL is an error. */
KILN_API kiln_status kiln_sampler_free(kiln_sampler* sampler);

/* Draws a token from the logits of batch token `index` of `context`'s last decode into *token.
 * Does not accept it: call kiln_sampler_accept. One thread at a time per sampler. */
KILN_API kiln_status kiln_sampler_sample(kiln_sampler* sampler, const kiln_context* context, int64_t index,
                                         int32_t* token);

/* Records a generated token: the penalties' history, the grammar's state. */
KILN_API kiln_status kiln_sampler_accept(kiln_sampler* sampler, int32_t token);

/* Forgets the history and puts the grammar back at its start (a new reply); the seed's stream
 * goes on. */
KILN_API kiln_status kiln_sampler_reset(kiln_sampler* sampler);

/* ---- images and audio ---- */

/* Loads llama.cpp's mmproj GGUF (a vision encoder, an audio encoder or both, with their
 * projectors: the types kiln runs, see the README) made for `model` into *out, which the caller
 * owns and frees with kiln_mmproj_free; the model must outlive it. Each context created with it
 * places the vision side's weights on the model's device (an owner of its own there, evicted and
 * restored as the model's); the audio encoder runs on the CPU only, so a context on another device
 * with an audio mmproj is refused. Errors: the file, a projector of another type or for a text
 * model of another width. Thread-safe. */
KILN_API kiln_status kiln_mmproj_load(kiln_model* model, const char* path, kiln_mmproj** out);

/* Frees an mmproj. NULL is an error; so is an mmproj whose contexts are alive. */
KILN_API kiln_status kiln_mmproj_free(kiln_mmproj* mmproj);

typedef enum kiln_media_type {
  KILN_MEDIA_IMAGE = 0, /* PNG or JPEG, as `kiln run --image` reads */
  KILN_MEDIA_AUDIO = 1  /* WAV, FLAC or MP3 (at most 30 minutes), as `kiln run --audio` reads */
} kiln_media_type;

/* A media file's bytes, `size` bytes at `data`, and what they hold. */
typedef struct kiln_media {
  int32_t type; /* a kiln_media_type (an int32_t field: an enum's size is the compiler's choice) */
  const uint8_t* data;
  int64_t size;
} kiln_media;

/* Decodes `prompt` with `n_media` media files into sequence `seq` (cleared first), as `kiln run
 * --image/--audio` and llama-mtmd-cli do: each marker "<__media__>" in the prompt stands for the
 * next file (a prompt without markers gets them in front of its text); text is tokenized with
 * BOS as the model asks (control tokens parsed when `parse_special` is non-zero); each image, and
 * each 30-second chunk of an audio file, is encoded by the context's mmproj and fills its tokens'
 * positions. *n_positions (may be NULL)
 * receives the positions filled (the next token's position); *logits_index (may be NULL) the batch
 * index of the last position's logits (kiln_get_logits, kiln_sampler_sample). The sampler's
 * penalties do not see the prompt (kiln_generate's do). Errors: media without an mmproj that
 * encodes their type (the message says which encoder is missing), a type that is neither image
 * nor audio, markers and media of different counts, a file that does not decode (the message says
 * why), a prompt that fills the context. One thread at a time per context. */
KILN_API kiln_status kiln_decode_media_prompt(kiln_context* context, const char* prompt, const kiln_media* media,
                                              int64_t n_media, int32_t parse_special, int32_t seq,
                                              int64_t* n_positions, int64_t* logits_index);

/* ---- generation ---- */

/* Called with each generated token and its text (`piece`, `piece_len` bytes, not NUL-terminated,
 * valid during the call; a token may end inside a UTF-8 character). Return 0 to go on, non-zero
 * to stop after this token. */
typedef int32_t (*kiln_token_callback)(void* user_data, int32_t token, const char* piece, int64_t piece_len);

typedef enum kiln_stop_reason {
  KILN_STOP_END_OF_GENERATION = 0, /* the model ended its reply */
  KILN_STOP_LENGTH = 1,            /* max_tokens */
  KILN_STOP_STOP_TEXT = 2,         /* the output ended with one of the stop texts */
  KILN_STOP_CONTEXT_FULL = 3,      /* the sequence filled the context */
  KILN_STOP_CALLBACK = 4           /* the callback returned non-zero */
} kiln_stop_reason;

typedef struct kiln_generate_options {
  int64_t max_tokens;       /* most tokens to generate; -1: until the end or the context is full */
  int32_t seq;              /* the sequence it runs in (cleared first) */
  int32_t parse_special;    /* non-zero: control tokens written in the prompt become their ids */
  const char* const* stop;  /* n_stop texts that end the reply when the output ends with one */
  int64_t n_stop;
  const kiln_media* media;  /* n_media images and audio files for the prompt's "<__media__>"
                               markers (see kiln_decode_media_prompt); needs a context created
                               with an mmproj */
  int64_t n_media;
} kiln_generate_options;

typedef struct kiln_generate_result {
  int64_t n_prompt;            /* tokens of the prompt */
  int64_t n_generated;         /* tokens handed to the callback */
  kiln_stop_reason stop;
} kiln_generate_result;

/* Fills *options with the defaults (no limit, sequence 0, no stop texts, no media). Thread-safe. */
KILN_API kiln_status kiln_generate_default_options(kiln_generate_options* options);

/* Continues `prompt` as `kiln run -p PROMPT` (with media, `kiln run --image/--audio`) does:
 * tokenizes it (with BOS as the model asks; media as kiln_decode_media_prompt), decodes it into options->seq (NULL options: the defaults), then samples with `sampler` and
 * decodes token after token, calling `callback` (may be NULL) with each, until the stop reason
 * in *result (may be NULL). The same model, prompt, sampler parameters and seed give the tokens
 * `kiln run` gives. Errors: an empty prompt or one that fills the context, a decode error. The
 * context and the sampler are used by one thread at a time. */
KILN_API kiln_status kiln_generate(kiln_context* context, kiln_sampler* sampler, const char* prompt,
                                   const kiln_generate_options* options, kiln_token_callback callback,
                                   void* user_data, kiln_generate_result* result);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
