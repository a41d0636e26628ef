// GET /slots, /metrics, /v1/memory. These routes only look: they never wake a sleeping server.
// With many models /slots and /metrics take ?model=NAME; /v1/memory shows
// the devices all the models share.
//
// /metrics: Prometheus text exposition (text/plain; version=0.0.4) with llama-server's metric
// names, so dashboards made for it work: llamacpp:prompt_tokens_total, prompt_seconds_total,
// tokens_predicted_total, tokens_predicted_seconds_total, n_decode_total (counters);
// n_busy_slots_per_decode, prompt_tokens_seconds, predicted_tokens_seconds (averages since the
// engine started; llama-server resets its throughput buckets at each scrape), kv_cache_usage_ratio,
// kv_cache_tokens, requests_processing, requests_deferred (gauges); spec_decode_num_draft_tokens_total,
// spec_decode_num_accepted_tokens_total, spec_decode_num_drafts_total (speculative decoding); plus
// kiln:requests_total, kiln:requests_rejected_total (503 because the queue was full),
// kiln:generations_parked_total and kiln:idle_caches_cleared_total (a full KV pool), with an
// mmproj kiln:media_encoded_total{modality} and kiln:media_cache_hits_total{modality} (images and
// audio chunks encoded, and served from the encoders' embedding caches), and the
// memory breakdown as gauges (kiln:memory_device_bytes{device,what} and
// kiln:memory_owner_bytes{device,owner,kind}, the figures of /v1/memory); with --arbiter,
// kiln:arbiter_holding (gauge) and kiln:arbiter_yields_total. The counters belong to
// the engine: while the model first loads (or, with many models, is unloaded) there is none, and
// /metrics answers 503; a sleeping model's engine answers.
//
// /v1/memory: the residency manager's breakdown (runtime/memory_breakdown.h) as JSON, in bytes:
// {"devices": [{"device", "total", "free", "budget" (null: none), "counted", "unaccounted",
//   "owners": [{"id", "name", "weights", "kv", "compute", "scratch", "evicted_residents",
//   "pinned"}]}]}; an owner is a model on the device, the device's compute arena ("compute
//   (sim0)": one per device, shared by every model there) or a backend's kernel scratch; a
//   sleeping model shows its evicted residents; while the one model first loads "devices" is
//   empty.
#include <optional>
#include <sstream>
#include <utility>

#include "serve/api_json.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

class Exposition {
 public:
  void add(const char* name, const char* type, const char* help, double value) {
    describe(name, type, help);
    sample(name, "", value);
  }
  // A metric's HELP and TYPE lines; its samples follow (sample()).
  void describe(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  // One sample; `labels` is empty or `{a="x",b="y"}` (values escaped by label()).
  void sample(const char* name, const std::string& labels, double value) {
    out_ << name << labels << " ";
    if (value == static_cast<double>(static_cast<int64_t>(value)))
      out_ << static_cast<int64_t>(value);
    else
      out_ << value;
    out_ << "\n";
  }
  // `key="value"` with the value escaped as the text format wants (backslash, quote, newline).
  static std::string label(const char* key, const std::string& value) {
    std::string out = std::string(key) + "=\"";
    for (char c : value) {
      if (c == '\\' || c == '"') out += '\\';
      out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out + "\"";
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string metrics_text(const EngineMetrics& m) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  Exposition e;
  e.add("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
        static_cast<double>(m.prompt_tokens));
  e.add("llamacpp:prompt_seconds_total", "counter", "Prompt process time", m.prompt_seconds);
  e.add("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
        static_cast<double>(m.predicted_tokens));
  e.add("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", m.predicted_seconds);
  e.add("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls",
        static_cast<double>(m.n_decode));
  e.add("llamacpp:n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call",
        ratio(static_cast<double>(m.n_busy_slots), static_cast<double>(m.n_decode)));
  e.add("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
        ratio(static_cast<double>(m.prompt_tokens), m.prompt_seconds));
  e.add("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
        ratio(static_cast<double>(m.predicted_tokens), m.predicted_seconds));
  e.add("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
        ratio(static_cast<double>(m.kv_tokens), static_cast<double>(m.kv_size)));
  e.add("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.", static_cast<double>(m.kv_tokens));
  e.add("llamacpp:requests_processing", "gauge", "Number of requests processing.", m.requests_processing);
  e.add("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", m.requests_deferred);
  e.add("llamacpp:spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated",
        static_cast<double>(m.draft_tokens));
  e.add("llamacpp:spec_decode_num_accepted_tokens_total", "counter",
        "Speculative: Total draft tokens accepted by the target model", static_cast<double>(m.draft_accepted));
  e.add("llamacpp:spec_decode_num_drafts_total", "counter",
        "Speculative: Total speculative decoding verification steps", static_cast<double>(m.drafts));
  e.add("kiln:requests_total", "counter", "Generation requests submitted to the engine (each choice counts).",
        static_cast<double>(m.requests_total));
  e.add("kiln:requests_rejected_total", "counter", "Generation requests refused with 503 (queue full).",
        static_cast<double>(m.requests_rejected));
  e.add("kiln:generations_parked_total", "counter",
        "Generations parked (cells copied to host memory) for want of room in the KV pool.",
        static_cast<double>(m.generations_parked));
  e.add("kiln:idle_caches_cleared_total", "counter",
        "Idle slots' cached prompts dropped for room in the KV pool.",
        static_cast<double>(m.idle_caches_cleared));
  return e.str();
}

// With an mmproj: per encoder (modality "image", "audio"), the inputs it encoded and those its
// embedding cache served.
std::string media_metrics_text(const ServerState& st) {
  Exposition e;
  const std::pair<const char*, std::optional<MediaEncoder::CacheStats>> encoders[] = {
      {"image", st.encoder ? std::optional(st.encoder->cache_stats()) : std::nullopt},
      {"audio", st.audio_encoder ? std::optional(st.audio_encoder->cache_stats()) : std::nullopt}};
  if (!st.encoder && !st.audio_encoder) return "";
  e.describe("kiln:media_encoded_total", "counter", "Images and audio chunks encoded (embedding cache misses).");
  for (const auto& [modality, s] : encoders)
    if (s) e.sample("kiln:media_encoded_total", "{" + Exposition::label("modality", modality) + "}", static_cast<double>(s->encoded));
  e.describe("kiln:media_cache_hits_total", "counter", "Images and audio chunks served from the embedding cache.");
  for (const auto& [modality, s] : encoders)
    if (s) e.sample("kiln:media_cache_hits_total", "{" + Exposition::label("modality", modality) + "}", static_cast<double>(s->hits));
  return e.str();
}

// With --arbiter: whether this process holds the device token now, and how often it yielded it.
std::string arbiter_metrics_text(const Arbiter* arbiter) {
  if (arbiter == nullptr) return "";
  Exposition e;
  e.describe("kiln:arbiter_holding", "gauge", "1 while this process holds the --arbiter device token.");
  e.sample("kiln:arbiter_holding", "", arbiter->held() ? 1 : 0);
  e.describe("kiln:arbiter_yields_total", "counter", "Times this process yielded the device to another.");
  e.sample("kiln:arbiter_yields_total", "", static_cast<double>(arbiter->yields()));
  return e.str();
}

size_t kind_bytes(const OwnerMemory& o, MemoryKind kind) { return o.bytes[static_cast<int>(kind)]; }

std::string memory_metrics_text(const std::vector<DeviceMemoryBreakdown>& devices) {
  Exposition e;
  e.describe("kiln:memory_device_bytes", "gauge",
             "Device memory in bytes: total and free (the device's), budget (--max-mem; absent without "
             "one), counted (what the residency manager counts), unaccounted (allocated outside it).");
  for (const DeviceMemoryBreakdown& d : devices) {
    auto add = [&](const char* what, size_t bytes) {
      e.sample("kiln:memory_device_bytes",
               "{" + Exposition::label("device", d.device) + "," + Exposition::label("what", what) + "}",
               static_cast<double>(bytes));
    };
    add("total", d.total);
    add("free", d.free);
    if (d.budget != kNoBudget) add("budget", d.budget);
    add("counted", d.counted);
    add("unaccounted", d.unaccounted);
  }
  e.describe("kiln:memory_owner_bytes", "gauge",
             "Bytes an owner (a model, the device's compute arena, kernel scratch) holds on a device now, by kind "
             "(weights, kv, compute, scratch).");
  for (const DeviceMemoryBreakdown& d : devices) {
    for (const OwnerMemory& o : d.owners) {
      for (int k = 0; k < kMemoryKindCount; ++k) {
        const auto kind = static_cast<MemoryKind>(k);
        e.sample("kiln:memory_owner_bytes",
                 "{" + Exposition::label("device", d.device) + "," +
                     Exposition::label("owner", o.name + " #" + std::to_string(o.owner)) + "," +
                     Exposition::label("kind", memory_kind_name(kind)) + "}",
                 static_cast<double>(kind_bytes(o, kind)));
      }
    }
  }
  return e.str();
}

json memory_json(const std::vector<DeviceMemoryBreakdown>& devices) {
  json out = json::array();
  for (const DeviceMemoryBreakdown& d : devices) {
    json owners = json::array();
    for (const OwnerMemory& o : d.owners) {
      owners.push_back({{"id", o.owner},
                        {"name", o.name},
                        {"weights", kind_bytes(o, MemoryKind::Weights)},
                        {"kv", kind_bytes(o, MemoryKind::Kv)},
                        {"compute", kind_bytes(o, MemoryKind::Compute)},
                        {"scratch", kind_bytes(o, MemoryKind::Scratch)},
                        {"evicted_residents", o.evicted_residents},
                        {"pinned", o.pinned}});
    }
    out.push_back({{"device", d.device},
                   {"total", d.total},
                   {"free", d.free},
                   {"budget", d.budget == kNoBudget ? json(nullptr) : json(d.budget)},
                   {"counted", d.counted},
                   {"unaccounted", d.unaccounted},
                   {"owners", std::move(owners)}});
  }
  return {{"object", "memory"}, {"devices", std::move(out)}};
}

}  // namespace

void add_info_routes(http::Router& r, const RouteContext& rc) {
  r.get("/slots", [rc](const http::Request& req, http::Exchange& ex) {
    const auto look = rc.look(req, ex);
    if (!look) return;
    json out = json::array();
    for (const SlotInfo& s : look->slots()) {
      json slot = {{"id", s.id},
                   {"is_processing", s.processing},
                   {"n_ctx", look->info->n_ctx_slot},
                   {"n_cached", s.n_cached}};
      if (s.processing) {
        slot["parked"] = s.parked;  // kiln: waiting for room in the KV pool
        slot["n_prompt_tokens"] = s.n_prompt;
        slot["params"] = {{"n_predict", s.n_predict}};
        slot["next_token"] = {{"n_decoded", s.n_decoded}};
      }
      out.push_back(std::move(slot));
    }
    send_json(ex, out);
  });

  r.get("/v1/memory", [rc](const http::Request&, http::Exchange& ex) {
    const std::shared_ptr<DeviceRegistry> devices = rc.devices();
    send_json(ex, memory_json(devices ? devices->memory_breakdown() : std::vector<DeviceMemoryBreakdown>{}));
  });

  r.get("/metrics", [rc](const http::Request& req, http::Exchange& ex) {
    const auto look = rc.look(req, ex);
    if (!look) return;
    const auto& st = look->st;
    if (!st) return send_error(ex, {503, "no model is loaded now: no metrics"});
    ex.respond({.status = 200,
                .content_type = "text/plain; version=0.0.4",
                .body = metrics_text(st->engine->metrics()) + media_metrics_text(*st) +
                        memory_metrics_text(st->devices->memory_breakdown()) + arbiter_metrics_text(rc.server.arbiter()),
                .headers = {}});
  });
}

}  // namespace kiln::serve
