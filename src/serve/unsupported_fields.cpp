#include "serve/unsupported_fields.h"

namespace kiln::serve {
namespace {

// Neutral values.
bool is_off(const json& v) { return v.is_null() || v == false || (v.is_number() && v.get<double>() == 0); }
bool is_empty(const json& v) {
  return v.is_null() || (v.is_array() && v.empty()) || (v.is_object() && v.empty()) ||
         (v.is_string() && v.get_ref<const std::string&>().empty());
}
bool is_one(const json& v) { return v.is_null() || (v.is_number() && v.get<double>() == 1); }
bool is_minus_one(const json& v) { return v.is_null() || (v.is_number() && v.get<double>() == -1); }
bool is_text_format(const json& v) {
  return v.is_null() || (v.is_object() && v.size() == 1 && v.value("type", json()) == "text");
}
bool is_no_tool_choice(const json& v) { return v.is_null() || v == "none" || v == "auto"; }
bool is_text_only(const json& v) { return v.is_null() || v == json::array({"text"}); }
bool is_no_reasoning_format(const json& v) { return v.is_null() || v == "none"; }

// Where kiln lacks a field.
enum class Lacking : uint8_t {
  Everywhere,
  OutsideChat,  // implemented by /v1/chat/completions only
  Native,       // implemented by the OpenAI routes, not by /completion
};

struct UnsupportedField {
  const char* name;
  const char* feature;             // what the message says kiln lacks
  bool (*neutral)(const json& v);  // the value of a client that does not use it
  Lacking where = Lacking::Everywhere;
};

// The list, grouped by kind.
constexpr UnsupportedField kUnsupported[] = {
    // Structured output and tools (grammar and json_schema are implemented on every route).
    {"tools", "tool calls outside /v1/chat/completions", is_empty, Lacking::OutsideChat},
    {"tool_choice", "tool calls outside /v1/chat/completions", is_no_tool_choice, Lacking::OutsideChat},
    {"functions", "function calls", is_empty},
    {"function_call", "function calls", is_no_tool_choice},
    {"response_format", "response_format on /completion (use grammar or json_schema)", is_text_format,
     Lacking::Native},
    // Samplers kiln lacks.
    {"mirostat", "mirostat sampling", is_off},
    {"dry_multiplier", "DRY sampling", is_off},
    {"xtc_probability", "XTC sampling", is_off},
    {"dynatemp_range", "dynamic temperature", is_off},
    {"top_n_sigma", "top-n-sigma sampling", is_minus_one},
    {"samplers", "a custom sampler order", is_empty},
    // Outputs and inputs kiln lacks.
    {"echo", "echoing the prompt", is_off},
    {"suffix", "suffixes (fill-in-the-middle)", is_empty},
    {"best_of", "best_of", is_one},
    {"n", "several choices on /completion (use /v1/completions)", is_one, Lacking::Native},
    {"post_sampling_probs", "post-sampling probabilities", is_off},
    {"response_fields", "response_fields", is_empty},
    {"timings_per_token", "per-token timings", is_off},
    {"n_indent", "n_indent", is_off},
    {"t_max_predict_ms", "a generation time limit", is_off},
    {"n_keep", "n_keep (no context shift in the server)", is_off},
    {"image_data", "images", is_empty},
    {"modalities", "outputs other than text", is_text_only},
    {"audio", "audio output", is_empty},
    {"reasoning_format", "reasoning_format outside /v1/chat/completions", is_no_reasoning_format,
     Lacking::OutsideChat},
    {"lora", "LoRA adapters", is_empty},
    {"id_slot", "choosing a slot", is_minus_one},
};

}  // namespace

std::optional<HttpError> refuse_unsupported_fields(const json& body, CompletionApi api) {
  for (const UnsupportedField& f : kUnsupported) {
    if (f.where == Lacking::OutsideChat && api == CompletionApi::Chat) continue;
    if (f.where == Lacking::Native && api != CompletionApi::Native) continue;
    auto it = body.find(f.name);
    if (it == body.end() || f.neutral(*it)) continue;
    return HttpError{
        400, field_message(f.name, "is not supported: kiln does not implement " + std::string(f.feature))};
  }
  return std::nullopt;
}

}  // namespace kiln::serve
