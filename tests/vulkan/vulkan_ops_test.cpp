// The op table on vulkan0 (lavapipe in CI) against the CPU's direct kernels, by normalized mean
// squared error as llama.cpp's test-backend-ops compares backends: below 1e-7 (the shaders round
// activations and queries as the CPU does, act_round.glsl), 5e-4 (test-backend-ops' bound for
// mul_mat and flash_attn_ext) where the CPU rounds in a way the shaders do not follow: Q4_1 and
// Q5_1 products (Q8_1's block sums stored as F16) and attention over an F16 V (accumulated in F16
// on the CPU). NaN never passes. The cases: every case of the CPU/sim table (tests/ops/backend_cases.h), every
// weight type's matrix product (one column and a prompt's many, weight rows and columns that do
// not fill a workgroup or a tile, broadcast batches; 70 columns take the tiled shader) and get_rows, attention over each KV cache type with a
// mask and causally, set_rows into F16 and quantized caches. An op the shaders lack is refused by
// prepare() with the op and the device named.
#include <gtest/gtest.h>

#include <cstring>

#include "backend_cases.h"
#include "ops/quant/quant.h"
#include "vulkan_test_util.h"

namespace kiln::test {
namespace {

// The values of a result as floats (quantized results dequantized).
std::vector<float> values(DType t, const uint8_t* bytes, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  if (t == DType::I32) {
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(reinterpret_cast<const int32_t*>(bytes)[i]);
  } else {
    quant_traits(t)->to_float(bytes, v.data(), n);
  }
  return v;
}

// Whether the CPU rounds in a way the shaders do not follow (see the opening comment).
bool cpu_rounds_otherwise(const BackendCase& c) {
  const DType t = c.srcs[c.kind == OpKind::Attention ? 2 : 0]->type();
  return (c.kind == OpKind::MulMat && (t == DType::Q4_1 || t == DType::Q5_1)) ||
         (c.kind == OpKind::Attention && t == DType::F16);
}

std::vector<BackendCase> more_cases() {
  std::mt19937 rng(31);
  std::vector<BackendCase> cs;
  auto f32 = [&](Shape4 ne) { return random_tensor(DType::F32, ne, rng); };
  auto out = [](DType t, Shape4 ne) { return std::make_shared<HostTensor>(t, ne); };
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                   DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                   DType::IQ4_XS}) {
    const std::string t(dtype_name(wt));
    const int64_t k = block_size(wt) == 256 ? 512 : 160;
    for (int64_t m : {1, 3, 19, 70}) {
      cs.push_back({"mul_mat " + t + " m=" + std::to_string(m),
                    OpKind::MulMat,
                    {random_tensor(wt, {k, 70, 1, 1}, rng), f32({k, m, 1, 1})},
                    {},
                    out(DType::F32, {70, m, 1, 1})});
    }
    auto ids = std::make_shared<HostTensor>(DType::I32, Shape4{3, 1, 1, 1});
    for (int64_t i = 0; i < 3; ++i) ids->set(i, 0, 0, 0, (4 * i + 1) % 5);
    cs.push_back({"get_rows " + t, OpKind::GetRows, {random_tensor(wt, {k, 5, 1, 1}, rng), ids}, {},
                  out(DType::F32, {k, 3, 1, 1})});
  }
  // Grouped batches: src0 [k, n, 2, 1] against src1 [k, m, 4, 3].
  cs.push_back({"mul_mat f16 broadcast", OpKind::MulMat,
                {random_tensor(DType::F16, {64, 9, 2, 1}, rng), f32({64, 5, 4, 3})}, {},
                out(DType::F32, {9, 5, 4, 3})});
  cs.push_back({"mul_mat q4_K tiled broadcast", OpKind::MulMat,
                {random_tensor(DType::Q4_K, {256, 70, 2, 1}, rng), f32({256, 40, 4, 3})}, {},
                out(DType::F32, {70, 40, 4, 3})});
  cs.push_back({"mul_mat f32 k=40", OpKind::MulMat, {f32({40, 33, 1, 1}), f32({40, 2, 1, 1})}, {},
                out(DType::F32, {33, 2, 1, 1})});
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    for (bool masked : {false, true}) {
      OpParams ap;
      ap.scale = 0.125f;
      ap.attn_path = AttentionPath::Flash;
      ap.q_pos0 = 90;
      std::vector<std::shared_ptr<HostTensor>> srcs = {f32({64, 3, 8, 1}), random_tensor(kv, {64, 100, 2, 1}, rng),
                                                       random_tensor(kv, {64, 100, 2, 1}, rng)};
      if (masked) {
        auto mask = std::make_shared<HostTensor>(DType::F16, Shape4{100, 3, 1, 1});
        for (int64_t q = 0; q < 3; ++q)
          for (int64_t j = 0; j < 100; ++j) mask->set(j, q, 0, 0, (j % 7 == 3 || j > 95 + q) ? -INFINITY : 0.0);
        srcs.push_back(mask);
      }
      cs.push_back({"attention " + std::string(dtype_name(kv)) + (masked ? " mask" : " causal"), OpKind::Attention,
                    srcs, ap, out(DType::F32, {64, 3, 8, 1})});
    }
  }
  for (DType kv : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    auto cells = std::make_shared<HostTensor>(DType::I32, Shape4{6, 1, 1, 1});
    for (int64_t i = 0; i < 6; ++i) cells->set(i, 0, 0, 0, (5 * i + 2) % 6);
    cs.push_back({"set_rows " + std::string(dtype_name(kv)), OpKind::SetRows, {f32({64, 6, 1, 1}), cells}, {},
                  out(kv, {64, 6, 1, 1})});
  }
  for (int64_t n_kv : {40, 43, 48, 56, 64}) {
    OpParams ap;
    ap.scale = 0.125f;
    ap.attn_path = AttentionPath::Plain;
    auto mask = std::make_shared<HostTensor>(DType::F32, Shape4{n_kv, 1, 1, 1});
    for (int64_t j = 0; j < n_kv; ++j) mask->set(j, 0, 0, 0, j < n_kv - 3 ? 0.0 : -INFINITY);
    cs.push_back({"attention plain f32 n_kv=" + std::to_string(n_kv), OpKind::Attention,
                  {random_tensor(DType::F32, {64, 1, 4, 1}, rng, -4, 4), random_tensor(DType::F32, {64, n_kv, 2, 1}, rng, -4, 4),
                   random_tensor(DType::F32, {64, n_kv, 2, 1}, rng, -4, 4), mask}, ap, out(DType::F32, {64, 1, 4, 1})});
  }
  OpParams ab;
  ab.scale = 0.5f;
  ab.max_bias = 8.0f;
  cs.push_back({"soft_max alibi", OpKind::SoftMax, {f32({33, 4, 6, 1}), random_tensor(DType::F32, {33, 4, 1, 1}, rng)},
                ab, out(DType::F32, {33, 4, 6, 1})});
  OpParams yarn;
  yarn.rope = {.n_dims = 32, .mode = RopeMode::Normal, .n_ctx_orig = 4096, .freq_base = 10000.0f, .freq_scale = 0.25f,
               .ext_factor = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
  auto pos = std::make_shared<HostTensor>(DType::I32, Shape4{3, 1, 1, 1});
  for (int64_t i = 0; i < 3; ++i) pos->set(i, 0, 0, 0, 1000 * i + 7);
  cs.push_back({"rope yarn partial", OpKind::Rope, {f32({48, 2, 3, 1}), pos}, yarn, out(DType::F32, {48, 2, 3, 1})});
  cs.push_back({"gelu_quick", OpKind::GeluQuick, {f32({300, 1, 1, 1})}, {}, out(DType::F32, {300, 1, 1, 1})});
  return cs;
}

TEST(VulkanOps, EveryCaseMatchesTheCpuByNormalizedError) {
  auto devices = vulkan_registry();
  ASSERT_TRUE(devices);
  Backend& gpu = devices->backend(**devices->find("vulkan0"));
  std::vector<BackendCase> cases = make_cases();
  for (BackendCase& c : more_cases()) cases.push_back(std::move(c));
  int ran = 0;
  for (const BackendCase& c : cases) {
    SCOPED_TRACE(c.name);
    run_direct(c);
    std::vector<uint8_t> got;
    const Status st = run_on(gpu, c, got);
    if (!st.ok()) {
      ADD_FAILURE() << st.error().message;
      continue;
    }
    const int64_t n = c.dst->view().nelements();
    const auto want = values(c.dst->type(), static_cast<const uint8_t*>(c.dst->view().data), n);
    const auto have = values(c.dst->type(), got.data(), n);
    const double limit = cpu_rounds_otherwise(c) ? 5e-4 : 1e-7;
    EXPECT_LT(nmse(want, have), limit);
    ++ran;
  }
  EXPECT_GT(ran, 60);
}

TEST(VulkanOps, AnOpWithoutAShaderIsRefusedNamingTheOpAndTheDevice) {
  auto devices = vulkan_registry();
  ASSERT_TRUE(devices);
  Backend& gpu = devices->backend(**devices->find("vulkan0"));
  std::mt19937 rng(5);
  // K and V of different types: the CPU runs it, the attention shader does not.
  OpParams ap;
  ap.scale = 0.125f;
  const BackendCase c{"attention f16 k, f32 v", OpKind::Attention,
                      {random_tensor(DType::F32, {64, 2, 2, 1}, rng), random_tensor(DType::F16, {64, 5, 2, 1}, rng),
                       random_tensor(DType::F32, {64, 5, 2, 1}, rng)},
                      ap, std::make_shared<HostTensor>(DType::F32, Shape4{64, 2, 2, 1})};
  std::vector<uint8_t> got;
  const Status st = run_on(gpu, c, got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("vulkan0"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("[attention]"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace kiln::test
