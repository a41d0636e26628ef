// The objects behind the C API's opaque handles, and the registry of live handles that lets every
// function refuse a null or freed handle with an error instead of touching freed memory.
//
// Ownership: kiln_runtime owns the DeviceRegistry (and, with arbiter_dir, the Arbiter);
// kiln_model shares the Model and owns its placement on one device (DeviceWeights); kiln_context
// owns its Context and the Backend it computes with, and with an mmproj its VisionEncoder and/or
// AudioEncoder; kiln_sampler owns its Sampler; kiln_mmproj shares the VisionModel and AudioModel. Each counts the handles made
// from it (`users`), and refuses to be freed while any is alive.
// Thread-safety: the registry is guarded by a mutex; a handle's `users` is atomic; the objects
// are as thread-safe as the C++ classes they hold (Context, Sampler: one thread at a time).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_status.h"
#include "backends/device_registry.h"
#include "llm/audio_encoder.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/media_prompt.h"
#include "llm/model.h"
#include "llm/model_chat_template.h"
#include "llm/sampler.h"
#include "llm/vision_encoder.h"
#include "llm/vision_model.h"
#include "runtime/arbiter.h"

struct kiln_runtime {
  std::unique_ptr<kiln::DeviceRegistry> devices;
  std::atomic<int64_t> users{0};  // live models
  // With an arbiter (kiln_runtime_options.arbiter_dir): the live models its yield evicts, guarded
  // by models_mutex (kiln_model_load adds, kiln_model_free removes before the model goes).
  std::mutex models_mutex;
  std::vector<kiln_model*> models;
  std::chrono::milliseconds arbiter_timeout{60000};
  std::unique_ptr<kiln::Arbiter> arbiter;  // last: destroyed first (its monitor reads `models`)
};

struct kiln_model {
  kiln_runtime* runtime = nullptr;
  std::shared_ptr<const kiln::Model> model;
  std::shared_ptr<kiln::DeviceWeights> weights;  // on the main device
  // Every device's weights, `weights` first (one entry: the model is not split).
  std::vector<std::shared_ptr<kiln::DeviceWeights>> placed;
  bool kv_on_host = false;  // no_kv_offload: its contexts keep every layer's K and V in host memory
  std::optional<kiln::ModelChatTemplate> chat_template;  // set by kiln_model_load
  std::atomic<int64_t> users{0};                         // live contexts, samplers and mmprojs
};

struct kiln_mmproj {
  kiln_model* model = nullptr;
  std::shared_ptr<const kiln::VisionModel> vision;  // null when the file has no vision encoder
  std::shared_ptr<const kiln::AudioModel> audio;    // null when the file has no audio encoder
  std::atomic<int64_t> users{0};  // live contexts created with it
};

struct kiln_context {
  kiln_model* model = nullptr;
  kiln_mmproj* mmproj = nullptr;           // null: text only
  std::unique_ptr<kiln::Backend> backend;  // the main device's, before `context` and `encoder`: outlives them
  std::vector<std::unique_ptr<kiln::Backend>> split_backends;  // the other devices' of a split model
  std::unique_ptr<kiln::Context> context;
  std::unique_ptr<kiln::VisionEncoder> encoder;  // with a vision mmproj: computes in the context's arena
  std::unique_ptr<kiln::AudioEncoder> audio_encoder;  // with an audio mmproj: computes in the context's arena
};

struct kiln_sampler {
  kiln_model* model = nullptr;
  kiln::Sampler sampler;
};

namespace kiln::api {

// Records `handle` as live (after creation) / not live (before it is deleted).
void register_handle(const void* handle);
void unregister_handle(const void* handle);
bool is_live(const void* handle);

// KILN_OK when `handle` is a live handle, else KILN_ERROR_ARGUMENT naming `function` and `what`
// ("kiln_decode: context is NULL" / "... is not a live handle (freed?)").
kiln_status check_handle(std::string_view function, std::string_view what, const void* handle);
// KILN_OK when `pointer` is not null, else KILN_ERROR_ARGUMENT ("FUNCTION: WHAT is NULL").
kiln_status check_pointer(std::string_view function, std::string_view what, const void* pointer);
// KILN_OK when `value` >= 0, else KILN_ERROR_ARGUMENT ("FUNCTION: WHAT is negative (-1)").
kiln_status check_size(std::string_view function, std::string_view what, int64_t value);
// KILN_OK when `token` is in [0, n_vocab), else KILN_ERROR_ARGUMENT naming it and the range.
kiln_status check_token(std::string_view function, const kiln_model& model, int32_t token);
// KILN_OK when `seq` is in [0, KILN_MAX_SEQUENCES), else KILN_ERROR_ARGUMENT.
kiln_status check_sequence(std::string_view function, std::string_view what, int32_t seq);

// The logits (embeddings = false) or hidden state of batch token `index` of the context's last
// decode into *data (pointing into the context) and *n; an error naming `fn` and why there is no
// such output (a bad handle or index, a token not marked, the other kind of context).
kiln_status context_output(std::string_view fn, const kiln_context* context, int64_t index, bool embeddings,
                           const float** data, int64_t* n);

// The prompt of kiln_decode_media_prompt and kiln_generate: `text` (with BOS as the model asks,
// control tokens parsed when parse_special) and `n_media` images and audio files for its markers,
// tokenized as `kiln run` does; an error naming `fn` for media the context's mmproj does not
// encode, a bad type, a file that does not decode, markers and media of different counts, or a
// prompt that fills the context.
kiln_status media_prompt(std::string_view fn, const kiln_context& context, const char* text, const kiln_media* media,
                         int64_t n_media, bool parse_special, MediaPrompt* out);
// Clears sequence `seq` and decodes `prompt` into it with the context's encoders
// (decode_media_prompt): the batch index of the last position's logits.
kiln::Result<size_t> decode_prompt(kiln_context& context, const MediaPrompt& prompt, int32_t seq);

// The arbiter (api/arbiter_api.cpp). open_arbiter: with a non-empty `dir`, opens the runtime's
// arbiter, whose yield evicts the runtime's tracked models. take_turn: waits (up to the runtime's
// arbiter timeout) until the runtime holds the device token and keeps it in *turn until *turn is
// reset or destroyed; an empty turn without an arbiter; KILN_ERROR_FAILED naming `fn`, the
// directory and the wait when the deadline passes. track/untrack_model: the models a yield
// evicts. Thread-safe.
kiln_status open_arbiter(std::string_view fn, kiln_runtime& runtime, const char* dir, int32_t timeout_ms);
kiln_status take_turn(std::string_view fn, kiln_runtime& runtime, Arbiter::Use* turn);
void track_model(kiln_model& model);
void untrack_model(kiln_model& model);

// The JSON text `text` (named `what` in errors), parsed; its nesting depth checked first
// (api/chat_api.cpp).
Result<nlohmann::ordered_json> parse_json(std::string_view what, const char* text);

// Writes `text` to a string output (kiln.h: truncated to size - 1 bytes and NUL-terminated,
// *length the whole length); `buf` may be null only when size is 0.
kiln_status write_text(std::string_view function, std::string_view text, char* buf, int64_t size,
                       int64_t* length);

}  // namespace kiln::api

// Returns the status of `expr` when it is not KILN_OK.
#define KILN_API_TRY(expr)                                                      \
  do {                                                                          \
    if (const kiln_status kiln_s_ = (expr); kiln_s_ != KILN_OK) return kiln_s_; \
  } while (0)
