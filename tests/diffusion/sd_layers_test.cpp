// The Stable Diffusion layers (models/sd/sd_layers.h) over gains and biases stored in another type
// than F32, as stable-diffusion.cpp's `convert` writes them (its F16 files hold the GroupNorm and
// LayerNorm gains in F16, its Q8_0 files in Q8_0): the networks compute with their F32 values,
// as stable-diffusion.cpp's loader converts them, so a layer over F16 or Q8_0 gains and biases gives
// exactly the bits of the same layer over F32 copies of their dequantized values.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "core/tensor_view.h"
#include "llm/graph_pass.h"
#include "runtime/planner.h"
#include "models/sd/sd_layers.h"
#include "ops/quant/quant.h"
#include "runtime/thread_pool.h"

namespace kiln::sd {
namespace {

// A weight over bytes the test owns, stored in `type` from `values` (which become the dequantized
// values the weight stands for: `values` is rewritten with them).
struct OwnedWeight {
  GgufTensorInfo info;
  std::vector<uint8_t> bytes;
  Weight weight() {
    Weight w;
    w.info = &info;
    w.view = contiguous_view(info.type, info.ne, bytes.data());
    return w;
  }
};

// `values` rounded through `round_type` (quantized and dequantized: the values a file of that type
// stands for), stored in `store_type` (the same type, or F32 for the reference).
std::unique_ptr<OwnedWeight> stored(const std::string& name, DType round_type, DType store_type,
                                    std::array<int64_t, 4> ne, std::vector<float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint8_t> rounded(row_size(round_type, n));
  if (round_type != DType::F32) {
    quant_traits(round_type)->from_float(values.data(), rounded.data(), n);
    quant_traits(round_type)->to_float(rounded.data(), values.data(), n);
  }
  auto w = std::make_unique<OwnedWeight>();
  w->info.name = name;
  w->info.type = store_type;
  w->info.ne = ne;
  if (store_type == DType::F32) {
    w->bytes.resize(values.size() * sizeof(float));
    std::memcpy(w->bytes.data(), values.data(), w->bytes.size());
  } else {
    w->bytes = rounded;
  }
  return w;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Marks y as the output of g, runs g on the CPU (two threads) with `in` as x, returns y's floats.
std::vector<float> run_graph(Graph& g, Tensor x, std::vector<float> in, Tensor y) {
  g.mark_output(y);
  EXPECT_TRUE(g.status().ok()) << g.status().error().message;
  if (!g.status().ok()) return {};
  CpuDevice device;
  ThreadPool pool(2);
  CpuBackend backend(device, pool);
  ComputeArena arena(device, "sd layers");
  const PassInput inputs[] = {{x, in.data()}};
  auto input_buffer = device.allocate(BufferDesc{pass_input_bytes(g, inputs), MemoryKind::Compute, "inputs"});
  EXPECT_TRUE(input_buffer.ok());
  if (!input_buffer.ok()) return {};
  auto plan = run_pass(g, inputs, **input_buffer, arena, backend);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  if (!plan.ok()) return {};
  const TensorView v = plan->view(y);
  std::vector<float> out(static_cast<size_t>(v.nelements()));
  EXPECT_TRUE(device.download(v, out.data(), v.span_bytes()).ok());
  return out;
}

// group_norm32, a 3x3 conv2d with a bias and a linear with a bias, in a row, over an input of
// [64 channels, 4, 4]. The norm's gain and offset and the two biases hold values rounded through
// `gain_type`, stored in `store_type` (gain_type, or F32 for the reference).
std::vector<float> run_layers(DType gain_type, DType store_type) {
  constexpr int64_t C = 64, W = 4;
  auto gain = [&](const char* name, uint32_t seed, float lo, float hi) {
    return stored(name, gain_type, store_type, {C, 1, 1, 1}, uniform(C, seed, lo, hi));
  };
  auto nw = gain("gn.weight", 1, 0.5f, 1.5f), nb = gain("gn.bias", 2, -0.2f, 0.2f);
  auto cb = gain("conv.bias", 4, -0.1f, 0.1f), lb = gain("lin.bias", 6, -0.1f, 0.1f);
  auto cw = stored("conv.weight", DType::F16, DType::F16, {3, 3, C, C}, uniform(3 * 3 * C * C, 3, -0.05f, 0.05f));
  auto lw = stored("lin.weight", DType::F16, DType::F16, {C, C, 1, 1}, uniform(C * C, 5, -0.1f, 0.1f));

  Graph g;
  const Tensor x = g.input("x", DType::F32, {C, W, W, 1});
  Tensor y = group_norm32(g, Norm{nw->weight(), nb->weight()}, x, "gn");
  y = conv2d(g, Conv2d{cw->weight(), cb->weight(), 3, 1, 1}, y, "conv");
  y = linear(g, Linear{lw->weight(), lb->weight()}, y, "lin");
  return run_graph(g, x, uniform(C * W * W, 7, -1.0f, 1.0f), y);
}

TEST(SdLayers, GainsAndBiasesInF16OrQ8_0ComputeAsTheirF32Values) {
  for (DType t : {DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<float> stored_as_t = run_layers(t, t);
    const std::vector<float> stored_as_f32 = run_layers(t, DType::F32);
    ASSERT_EQ(stored_as_t.size(), 64u * 4 * 4);
    EXPECT_EQ(stored_as_t, stored_as_f32);
    EXPECT_NE(stored_as_t, run_layers(DType::F32, DType::F32)) << "the rounding should show in the output";
  }
}

// A convolution whose columns exceed the budget runs in strips of output rows (here one row each,
// the budget being one byte): its output is the whole product's, bit for bit, for each kernel,
// stride and padding the SD networks use (the strips' top and bottom rows meet x's padding or the
// rows of the strips beside them).
TEST(SdLayers, ConvInStripsGivesTheWholeProductsBits) {
  constexpr int64_t C = 16, W = 13, H = 11;
  struct Case {
    int32_t k, stride, padding;
  };
  for (const Case c : {Case{3, 1, 1}, Case{3, 2, 1}, Case{3, 1, 0}, Case{1, 1, 0}}) {
    SCOPED_TRACE("kernel " + std::to_string(c.k) + " stride " + std::to_string(c.stride) + " padding " +
                 std::to_string(c.padding));
    auto w = stored("conv.weight", DType::F16, DType::F16, {c.k, c.k, C, 8}, uniform(c.k * c.k * C * 8, 1, -0.2f, 0.2f));
    auto b = stored("conv.bias", DType::F32, DType::F32, {8, 1, 1, 1}, uniform(8, 2, -0.1f, 0.1f));
    auto conv = [&](int64_t max_column_bytes, size_t* n_products) {
      Graph g;
      const Tensor x = g.input("x", DType::F32, {C, W, H, 1});
      const Tensor y = conv2d(g, Conv2d{w->weight(), b->weight(), c.k, c.stride, c.padding}, x, "conv",
                              max_column_bytes);
      *n_products = 0;
      for (int32_t id : g.op_nodes()) *n_products += g.tensors()[static_cast<size_t>(id)].op == OpKind::MulMat;
      return run_graph(g, x, uniform(C * W * H, 3, -1.0f, 1.0f), y);
    };
    size_t whole_products = 0, strip_products = 0;
    const std::vector<float> whole = conv(kConvColumnBytes, &whole_products);
    const std::vector<float> strips = conv(1, &strip_products);
    EXPECT_EQ(whole_products, 1u);
    EXPECT_EQ(strip_products, static_cast<size_t>((H + 2 * c.padding - c.k) / c.stride + 1));
    ASSERT_EQ(whole.size(), static_cast<size_t>(8 * ((W + 2 * c.padding - c.k) / c.stride + 1) *
                                                ((H + 2 * c.padding - c.k) / c.stride + 1)));
    EXPECT_EQ(strips, whole);
  }
}

// An input the im2col cannot take (here: already an error) leaves the error in the graph and
// gives an invalid tensor, as the graph's own ops do; nothing aborts.
TEST(SdLayers, ConvOverABadInputIsAGraphError) {
  auto w = stored("conv.weight", DType::F16, DType::F16, {3, 3, 4, 4}, uniform(3 * 3 * 4 * 4, 1, -0.1f, 0.1f));
  Graph g;
  const Tensor x = g.input("x", DType::F32, {4, 8, 8, 1});
  const Tensor bad = g.upscale(x, 0, "bad");  // a factor below 1: the graph's error
  const Tensor y = conv2d(g, Conv2d{w->weight(), Weight{}, 3, 1, 1}, bad, "conv");
  EXPECT_FALSE(y.valid());
  ASSERT_FALSE(g.status().ok());
  EXPECT_NE(g.status().error().message.find("upscale factor 0"), std::string::npos) << g.status().error().message;
}

}  // namespace
}  // namespace kiln::sd
