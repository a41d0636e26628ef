// Helpers of the tests that run fixture models on devices: loading, decoding a run of tokens,
// greedy choice, bitwise comparison of logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/layer_split.h"
#include "llm/device_weights.h"
#include "test_data.h"

namespace kiln::test {

// A test model (tests/test_data.h: build/test-data/models).
inline std::string model_path(const std::string& name) { return test_data::path("models/" + name); }

inline std::shared_ptr<const Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

// Decodes `toks` of sequence `seq` from position pos0 and appends the logits of the marked tokens
// (every token, or the last) to `out`.
inline void decode(Context& c, const std::vector<int32_t>& toks, int32_t pos0, int32_t seq, bool all,
                   std::vector<float>& out) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i)
    b.add(toks[i], pos0 + static_cast<int32_t>(i), seq, all || i + 1 == toks.size());
  const Status st = c.decode(b);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < toks.size(); ++i) {
    const auto l = c.logits(i);
    out.insert(out.end(), l.begin(), l.end());
  }
}

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every test model, and kiln's rope-variant models (frequency factors, YaRN).
inline std::vector<std::string> fixture_models() {
  std::vector<std::string> paths;
  for (const auto& p : test_data::files("models", ".gguf")) paths.push_back(p.string());
  for (const char* m : {"llama-ropefreqs", "qwen2-yarn"})
    paths.push_back(std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/" + m + ".gguf");
  return paths;
}

// A test name for a model path parameter: its file stem, other characters than [A-Za-z0-9] as '_'.
inline std::string model_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = std::filesystem::path(info.param).stem().string();
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

// `n` token ids spread over the vocabulary (the same for any tokenizer).
inline std::vector<int32_t> spread_tokens(const Context& c, size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + 11) % static_cast<size_t>(c.n_vocab())));
  return t;
}

// A registry with the CPU and a sim0 of `sim_capacity` bytes, two threads, and `budgets`; with
// `vulkan`, the Vulkan devices too.
inline std::unique_ptr<DeviceRegistry> make_devices(size_t sim_capacity, std::vector<DeviceBudget> budgets = {},
                                                    std::string swap_dir = {}, bool vulkan = false) {
  auto r = DeviceRegistry::create({.n_threads = 2,
                                   .sim = {{.name = "sim0", .capacity = sim_capacity}},
                                   .budgets = std::move(budgets),
                                   .swap_dir = std::move(swap_dir),
                                   .vulkan = vulkan});
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : nullptr;
}

inline SimDevice& sim_of(DeviceRegistry& r) { return static_cast<SimDevice&>(**r.find("sim0")); }

// A model placed on one device of `devices`, with a context there.
struct OnDevice {
  std::shared_ptr<DeviceWeights> weights;
  std::unique_ptr<Context> ctx;
};

inline OnDevice place(DeviceRegistry& devices, const std::string& device, std::shared_ptr<const Model> model,
                      const ContextOptions& opt) {
  OnDevice o;
  Device& dev = **devices.find(device);
  auto w = DeviceWeights::create(std::move(model), dev);
  EXPECT_TRUE(w.ok()) << w.error().message;
  if (!w.ok()) return o;
  o.weights = *w;
  auto c = Context::create(o.weights, devices.backend(dev), opt);
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (c.ok()) o.ctx = std::move(*c);
  return o;
}

// Logits of a prompt (every position, in micro-batches of 8) and of 8 greedy steps after it.
inline std::vector<float> prompt_and_generation(Context& c) {
  std::vector<float> out;
  const auto toks = spread_tokens(c, 20);
  decode(c, toks, 0, 0, true, out);
  int32_t pos = static_cast<int32_t>(toks.size());
  for (int step = 0; step < 8; ++step)
    decode(c, {argmax({out.end() - c.n_vocab(), out.end()})}, pos++, 0, true, out);
  return out;
}

// Sequence edits that move KV rows or rewrite keys: a hole, compaction at the cache's end, a
// context shift (re-roped keys, with frequency factors on this model), and a saved sequence
// loaded into another one. Returns every logit the context output.
inline std::vector<float> edits_and_state(Context& c, const std::string& state_path) {
  std::vector<float> out;
  const auto toks = spread_tokens(c, 9);
  const int32_t n = static_cast<int32_t>(toks.size());
  decode(c, std::vector<int32_t>(8, toks.front()), 0, 3, false, out);  // cells 0..7
  decode(c, toks, 0, 0, true, out);
  c.seq_rm(3, -1, -1);  // a hole in front of the prompt
  EXPECT_TRUE(c.save_sequence(0, toks, state_path).ok());
  int32_t pos = n;
  for (; pos < 24; ++pos) decode(c, {argmax({out.end() - c.n_vocab(), out.end()})}, pos, 0, false, out);
  c.seq_rm(0, 0, 8);  // drop the oldest 8 positions and shift the rest down
  EXPECT_TRUE(c.seq_add(0, 8, -1, -8).ok());
  decode(c, {toks.back()}, pos - 8, 0, false, out);
  auto restored = c.load_sequence(2, state_path);
  EXPECT_TRUE(restored.ok()) << restored.error().message;
  decode(c, {toks.back()}, n, 2, false, out);
  return out;
}

// A model placed as `so` says over the devices of `r` (llm/layer_split.h), with a context of `opt`
// over them (each device's own arena); empty on failure (reported).
struct SplitContext {
  std::vector<std::shared_ptr<DeviceWeights>> weights;
  std::unique_ptr<Context> ctx;
};

// `model` placed as `so` says (with `segments`: streamed there, llm/context.h) and a context over it.
inline SplitContext place_split_context(DeviceRegistry& r, std::shared_ptr<const Model> model,
                                        const SplitOptions& so, const ContextOptions& opt,
                                        const SegmentLayers& segments = {}) {
  SplitContext s;
  auto split = LayerSplit::make(model->hparams(), so, r.cpu());
  EXPECT_TRUE(split.ok()) << split.error().message;
  if (!split.ok()) return s;
  auto placed = place_split(model, *split, {}, segments);
  EXPECT_TRUE(placed.ok()) << placed.error().message;
  if (!placed.ok()) return s;
  s.weights = *placed;
  std::vector<ContextDevice> devices;
  for (const auto& w : s.weights) devices.push_back({w, &r.backend(w->device()), nullptr});
  auto c = Context::create(std::move(devices), opt);
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (c.ok()) s.ctx = std::move(*c);
  return s;
}

}  // namespace kiln::test
