// Models on a device that is not the host (the sim device): logits equal the CPU's bit for bit
// on every path (prompt, generation, KV compaction and shift, state files, embeddings), weights
// that are released and rebuilt give the same bytes, and a model that does not fit is refused with
// nothing left allocated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "backends/device_registry.h"
#include "llm/context.h"
#include "llm/device_weights.h"
#include "llm/embeddings.h"
#include "models/modules.h"
#include "ops/weight_prep.h"
#include "llm/model_test_util.h"
#include "test_data.h"

namespace kiln {
namespace {

using namespace kiln::test;

size_t allocated(const Device& d) {
  size_t total = 0;
  for (MemoryKind k : {MemoryKind::Weights, MemoryKind::Kv, MemoryKind::Compute, MemoryKind::Scratch})
    total += d.allocated_bytes(k);
  return total;
}

struct Variant {
  DType kv;
  FlashAttention fa;
};

class SimMatchesCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SimMatchesCpu, LogitsAreBitIdentical) {
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  auto devices = make_devices(size_t{256} << 20);
  ASSERT_TRUE(devices);
  for (const Variant v :
       {Variant{DType::F32, FlashAttention::Off}, Variant{DType::F32, FlashAttention::On},
        Variant{DType::F16, FlashAttention::Off}, Variant{DType::F16, FlashAttention::On}}) {
    const ContextOptions opt{
        .n_ctx = 64, .n_batch = 64, .n_ubatch = 8, .type_k = v.kv, .type_v = v.kv, .flash_attention = v.fa};
    const std::string what =
        "kv " + std::string(dtype_name(v.kv)) + (v.fa == FlashAttention::On ? ", flash" : "");
    OnDevice cpu = place(*devices, "cpu", model, opt);
    OnDevice sim = place(*devices, "sim0", model, opt);
    ASSERT_TRUE(cpu.ctx && sim.ctx) << what;
    // On the CPU, every matrix the kernels multiply takes buffer bytes, in a kernel layout
    // (ops/weight_prep.h) or plain (a tied LM head: its tensor, the token embedding, copied once);
    // the other tensors are read from the mapping.
    std::vector<const GgufTensorInfo*> read_plain, multiplied;
    for_each_weight(model->weights(), [&](const Weight& w, WeightUse use) {
      if (use != WeightUse::MatMul) read_plain.push_back(w.info);
    });
    size_t copied = 0;
    for_each_weight(model->weights(), [&](const Weight& w, WeightUse use) {
      if (use != WeightUse::MatMul ||
          std::find(multiplied.begin(), multiplied.end(), w.info) != multiplied.end())
        return;
      multiplied.push_back(w.info);
      const bool tied = std::find(read_plain.begin(), read_plain.end(), w.info) != read_plain.end();
      copied += tied ? w.view.span_bytes() : choose_weight_layout(w.view).bytes;
    });
    EXPECT_GE(cpu.weights->buffer_bytes(), copied);
    EXPECT_LT(cpu.weights->mapped_bytes(), model->weight_bytes()) << "the matrices are copied";
    EXPECT_GE(sim.weights->buffer_bytes(), model->weight_bytes());
    EXPECT_GT(sim_of(*devices).allocated_bytes(MemoryKind::Weights), 0u);
    const auto want = prompt_and_generation(*cpu.ctx);
    const auto got = prompt_and_generation(*sim.ctx);
    EXPECT_TRUE(same_bits(want, got)) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SimMatchesCpu, ::testing::ValuesIn(fixture_models()), model_param_name);

TEST(SimDevice, EditsStateFilesAndShiftsMatchTheCpu) {
  auto model = load(std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/llama-ropefreqs.gguf");
  ASSERT_TRUE(model && model->weights().blocks[0].rope_freqs);
  auto devices = make_devices(size_t{256} << 20);
  ASSERT_TRUE(devices);
  for (const DType kv : {DType::F32, DType::F16}) {
    const ContextOptions opt{.n_ctx = 40, .n_ubatch = 8, .type_k = kv, .type_v = kv};
    OnDevice cpu = place(*devices, "cpu", model, opt);
    OnDevice sim = place(*devices, "sim0", model, opt);
    ASSERT_TRUE(cpu.ctx && sim.ctx);
    const std::string path = std::string(KILN_BINARY_DIR) + "/device_test_state.bin";
    const auto want = edits_and_state(*cpu.ctx, path);
    const auto got = edits_and_state(*sim.ctx, path);
    std::remove(path.c_str());
    EXPECT_TRUE(same_bits(want, got)) << dtype_name(kv);
  }
}

TEST(SimDevice, EmbeddingsMatchTheCpu) {
  auto model = load(model_path("qwen3-e64-Q8_0.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(size_t{256} << 20);
  ASSERT_TRUE(devices);
  const ContextOptions opt{.n_ctx = 32, .n_ubatch = 8, .embeddings = true};
  OnDevice cpu = place(*devices, "cpu", model, opt);
  OnDevice sim = place(*devices, "sim0", model, opt);
  ASSERT_TRUE(cpu.ctx && sim.ctx);
  const auto toks = spread_tokens(*cpu.ctx, 20);
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Last}) {
    auto want = embed_tokens(*cpu.ctx, toks, p);
    auto got = embed_tokens(*sim.ctx, toks, p);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_TRUE(same_bits(*want, *got)) << pooling_name(p);
  }
}

// The bytes of every placed tensor on the device, read back through explicit copies (none for a
// tensor read in place from the mapped file).
std::vector<std::vector<uint8_t>> device_bytes(const DeviceWeights& w) {
  std::vector<std::vector<uint8_t>> out;
  for (const DeviceWeights::Placement& p : w.placements()) {
    std::vector<uint8_t> bytes;
    if (p.offset != DeviceWeights::kMapped) {
      bytes.resize(p.prepared.bytes);
      EXPECT_TRUE(w.buffer()->read(p.offset, bytes.data(), bytes.size()).ok());
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

TEST(DeviceWeights, EveryTensorIsPlacedAsPreparedFromTheFile) {
  auto devices = make_devices(size_t{256} << 20);
  ASSERT_TRUE(devices);
  for (const std::string& path : fixture_models()) {
    auto model = load(path);
    ASSERT_TRUE(model);
    auto w = DeviceWeights::create(model, **devices->find("sim0"));
    ASSERT_TRUE(w.ok()) << w.error().message;
    std::set<const GgufTensorInfo*> placed;
    for (const auto& p : (*w)->placements()) placed.insert(p.info);
    EXPECT_EQ(placed.size(), model->file().tensors().size()) << path;  // the fixtures use every tensor
    const auto bytes = device_bytes(**w);
    for (size_t i = 0; i < bytes.size(); ++i) {
      const DeviceWeights::Placement& p = (*w)->placements()[i];
      std::vector<uint8_t> want(p.prepared.bytes);
      ASSERT_TRUE(prepare_weight(model->file().tensor_view(*p.info), p.prepared, want.data()).ok());
      EXPECT_EQ(bytes[i], want) << path << ": " << p.info->name;
    }
    // Views point into the device buffer; the token embedding stays plain for get_rows.
    const DecoderWeights& dw = (*w)->weights();
    EXPECT_EQ(dw.tok_embd.view.layout, TensorLayout::Plain);
    EXPECT_NE(sim_of(*devices).host_address(dw.tok_embd.view.data, dw.tok_embd.view.span_bytes()), nullptr);
    EXPECT_NE(sim_of(*devices).host_address(dw.output.view.data, 1), nullptr);
  }
}

WeightOptions weight_options(bool copy_all, int prepare_threads) {
  WeightOptions o;
  o.copy_all = copy_all;
  o.prepare_threads = prepare_threads;
  return o;
}

// Prepared on several threads (largest tensors first, each claimed by whichever thread is free),
// every tensor of every fixture is placed where one thread places it, with the bytes one thread
// writes, at load and after a release and rebuild. --no-mmap copies every tensor, so plain ones
// take the threaded path too.
TEST(DeviceWeights, PreparingOnManyThreadsWritesWhatOneThreadWrites) {
  for (const std::string& path : fixture_models()) {
    auto model = load(path);
    ASSERT_TRUE(model);
    auto devices = make_devices(size_t{512} << 20);
    ASSERT_TRUE(devices);
    for (bool copy_all : {false, true}) {
      auto one = DeviceWeights::create(model, devices->cpu(), weight_options(copy_all, 1));
      auto many = DeviceWeights::create(model, devices->cpu(), weight_options(copy_all, 5));
      ASSERT_TRUE(one.ok() && many.ok()) << path;
      ASSERT_EQ((*many)->placements().size(), (*one)->placements().size()) << path;
      for (size_t i = 0; i < (*one)->placements().size(); ++i) {
        const DeviceWeights::Placement &a = (*one)->placements()[i], &b = (*many)->placements()[i];
        EXPECT_EQ(b.info, a.info) << path;
        EXPECT_EQ(b.prepared.layout, a.prepared.layout) << path << ": " << a.info->name;
        EXPECT_EQ(b.offset, a.offset) << path << ": " << a.info->name;
      }
      const auto want = device_bytes(**one);
      if (copy_all) {
        EXPECT_GT((*many)->buffer_bytes(), 0u) << path;
      }
      EXPECT_EQ(device_bytes(**many), want) << path;
      (*many)->release();
      ASSERT_TRUE((*many)->rebuild().ok()) << path;
      EXPECT_EQ(device_bytes(**many), want) << path << " after a rebuild";
    }
  }
}

// Released and rebuilt in the middle of a generation, with a spacer allocation in the way so the
// weights come back at another address: the same bytes, the same logits at every step.
TEST(DeviceWeights, ReleaseAndRebuildMidGenerationGiveIdenticalLogits) {
  auto model = load(model_path("llama-spm-e256-Q4_K_M.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(size_t{256} << 20);
  ASSERT_TRUE(devices);
  SimDevice& sim = sim_of(*devices);
  const ContextOptions opt{.n_ctx = 64, .n_ubatch = 8};
  OnDevice steady = place(*devices, "sim0", model, opt);
  OnDevice moved = place(*devices, "sim0", model, opt);
  ASSERT_TRUE(steady.ctx && moved.ctx);
  const auto before = device_bytes(*moved.weights);
  const size_t weight_bytes = moved.weights->buffer_bytes();

  const auto toks = spread_tokens(*steady.ctx, 20);
  std::vector<float> want, got;
  decode(*steady.ctx, toks, 0, 0, false, want);
  decode(*moved.ctx, toks, 0, 0, false, got);
  int32_t pos = static_cast<int32_t>(toks.size());
  std::vector<std::unique_ptr<Buffer>> spacers;
  for (int step = 0; step < 6; ++step, ++pos) {
    ASSERT_TRUE(same_bits(want, got)) << "step " << step;
    const void* old_base = moved.weights->buffer()->base();
    moved.weights->release();
    EXPECT_FALSE(moved.weights->resident());
    EXPECT_EQ(moved.weights->buffer(), nullptr);
    EXPECT_EQ(sim.allocated_bytes(MemoryKind::Weights), steady.weights->buffer_bytes());
    Batch b;
    b.add(toks.front(), pos, 0, true);
    const Status refused = moved.ctx->decode(b);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("released"), std::string::npos) << refused.error().message;

    auto spacer = sim.allocate({.bytes = weight_bytes, .kind = MemoryKind::Scratch, .owner = "spacer"});
    ASSERT_TRUE(spacer.ok()) << spacer.error().message;
    spacers.push_back(std::move(*spacer));
    const Status rebuilt = moved.weights->rebuild();
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().message;
    EXPECT_NE(moved.weights->buffer()->base(), old_base);
    EXPECT_EQ(device_bytes(*moved.weights), before) << "step " << step;

    const int32_t next = argmax({want.end() - model->hparams().n_vocab, want.end()});
    want.clear();
    got.clear();
    decode(*steady.ctx, {next}, pos, 0, true, want);
    decode(*moved.ctx, {next}, pos, 0, true, got);
  }
  EXPECT_TRUE(same_bits(want, got));
}

// Q6_K matrices and F32 norms: no tensor of this model takes a prepared layout, but the matrices are
// copied in their plain layout (the buffer's 2 MiB pages stream faster than the file's); the token
// embedding (unless the head shares it) and the norms are read in place. Released, the copies go and
// the views into the mapping stay; rebuilt, the copies hold the file's bytes.
TEST(DeviceWeights, OnTheCpuTheMatricesAreCopiedPlainAndTheRestReadInPlace) {
  auto model = load(model_path("llama-spm-e256-Q6_K.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(size_t{1} << 20);
  ASSERT_TRUE(devices);
  auto w = DeviceWeights::create(model, devices->cpu());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_GT((*w)->buffer_bytes(), 0u);
  EXPECT_GT((*w)->mapped_bytes(), 0u);
  for (const DeviceWeights::Placement& p : (*w)->placements())
    EXPECT_EQ(p.prepared.layout, TensorLayout::Plain);
  const Weight& wq = (*w)->weights().blocks[0].attn.wq;
  const Weight& file_wq = model->weights().blocks[0].attn.wq;
  EXPECT_NE(wq.view.data, file_wq.view.data);
  EXPECT_EQ(std::memcmp(wq.view.data, file_wq.view.data, file_wq.view.span_bytes()), 0);
  EXPECT_EQ((*w)->weights().blocks[0].attn_norm.view.data, model->weights().blocks[0].attn_norm.view.data);
  if (!model->weights().tied_output) {
    EXPECT_EQ((*w)->weights().tok_embd.view.data, model->weights().tok_embd.view.data);  // zero copy
  }
  (*w)->release();
  EXPECT_FALSE((*w)->resident());
  EXPECT_EQ(wq.view.data, nullptr);
  EXPECT_EQ((*w)->weights().blocks[0].attn_norm.view.data, model->weights().blocks[0].attn_norm.view.data);
  EXPECT_EQ(allocated(devices->cpu()), 0u);
  ASSERT_TRUE((*w)->rebuild().ok());
  EXPECT_EQ(std::memcmp(wq.view.data, file_wq.view.data, file_wq.view.span_bytes()), 0);
}

// Whether the page holding `addr` is mapped into this process now (/proc/self/pagemap: one 64-bit
// entry per page, bit 63 "present"). Not mincore(), which answers for the page cache.
bool page_in_process(const void* addr) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::FILE* f = std::fopen("/proc/self/pagemap", "rb");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return true;
  uint64_t entry = 0;
  const long at = static_cast<long>(reinterpret_cast<uintptr_t>(addr) / page * sizeof entry);
  const bool read = std::fseek(f, at, SEEK_SET) == 0 && std::fread(&entry, sizeof entry, 1, f) == 1;
  std::fclose(f);
  EXPECT_TRUE(read);
  return (entry >> 63) != 0;
}

// Preparing on the CPU reads the Q4_0 matrices from the mapped file into their interleaved copy;
// then their file pages leave the process (the copy is resident, not the copy and its source),
// except the pages of tensors that are also read in place.
// A rebuild prepares the same bytes again from the file.
TEST(DeviceWeights, PreparedTensorsLeaveTheirFilePagesAfterPreparing) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->file().mapped());
  auto devices = make_devices(size_t{1} << 20);
  ASSERT_TRUE(devices);
  auto w = DeviceWeights::create(model, devices->cpu());
  ASSERT_TRUE(w.ok()) << w.error().message;
  if ((*w)->buffer_bytes() == 0) GTEST_SKIP() << "this CPU prepares no tensor (Q4_0x8 needs AVX2)";
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  size_t dropped = 0, kept = 0;
  for (const DeviceWeights::Placement& p : (*w)->placements()) {
    if (p.offset == DeviceWeights::kMapped) continue;
    const bool read_in_place =
        std::any_of((*w)->placements().begin(), (*w)->placements().end(), [&](const DeviceWeights::Placement& q) {
          return q.info == p.info && q.offset == DeviceWeights::kMapped;
        });
    const std::span<const uint8_t> bytes = model->file().tensor_data(*p.info);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(bytes.data()), hi = lo + bytes.size();
    for (uintptr_t at = (lo + page - 1) / page * page; at + page <= hi; at += page) {
      EXPECT_EQ(page_in_process(reinterpret_cast<const void*>(at)), read_in_place) << p.info->name;
      ++(read_in_place ? kept : dropped);
    }
  }
  EXPECT_GT(dropped, 0u);
  const auto before = device_bytes(**w);
  (*w)->release();
  ASSERT_TRUE((*w)->rebuild().ok());
  EXPECT_EQ(device_bytes(**w), before);
}

TEST(DeviceWeights, AModelThatDoesNotFitIsRefusedWithNothingAllocated) {
  auto model = load(model_path("llama-spm-e256-Q4_0.gguf"));
  ASSERT_TRUE(model);
  auto devices = make_devices(size_t{4} << 20);  // below the model's 12 MiB of weights
  ASSERT_TRUE(devices);
  SimDevice& sim = sim_of(*devices);
  auto w = DeviceWeights::create(model, sim);
  ASSERT_FALSE(w.ok());
  const std::string& msg = w.error().message;
  EXPECT_NE(msg.find("weights of 'random-llama-2x256' do not fit: sim0: out of memory"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("4.00 MiB available (no budget; 4.00 MiB free of 4.00 MiB)"), std::string::npos) << msg;
  EXPECT_EQ(allocated(sim), 0u);
  EXPECT_EQ(sim.memory_info().free, sim.memory_info().total);

  // Weights that fit with no room left for the context: the context is refused, only the weights
  // stay, and they go with their last holder.
  auto roomy = make_devices(size_t{14} << 20);
  ASSERT_TRUE(roomy);
  SimDevice& sim14 = sim_of(*roomy);
  auto fits = DeviceWeights::create(model, sim14);
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  auto ctx = Context::create(*fits, roomy->backend(sim14), {.n_ctx = 4096});
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.error().message.find("sim0: out of memory"), std::string::npos) << ctx.error().message;
  EXPECT_EQ(allocated(sim14), (*fits)->buffer_bytes());
  fits->reset();
  EXPECT_EQ(allocated(sim14), 0u);
}

}  // namespace
}  // namespace kiln
