// Random graphs of element-wise ops, views and copies over F32 tensors, with the expected value
// of every tensor computed alongside by plain loops (independent of the kernels), and helpers
// that run a graph on a backend and read its outputs back.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend.h"
#include "runtime/graph.h"

namespace kiln::test {

// Host values as a device buffer of `kind`, plus a contiguous view of `ne` over it.
struct DeviceTensor {
  std::unique_ptr<Buffer> buffer;
  TensorView view;
};
DeviceTensor upload_f32(Device& device, const std::vector<float>& values, Shape ne, MemoryKind kind);
std::vector<float> download_f32(const Device& device, const TensorView& view);

struct RandomGraph {
  Graph graph;
  std::vector<Tensor> inputs;
  std::vector<std::vector<float>> input_values;
  std::vector<DeviceTensor> memory;  // externals (bound at build) and inputs (bound by bind_inputs)
  std::vector<Tensor> outputs;
  std::vector<std::vector<float>> expected;  // per output, contiguous in the output's sizes
  // Binds every input to its memory on the device.
  Status bind_inputs(ExecPlan& plan) const;
};

struct RandomGraphOptions {
  uint32_t seed = 1;
  int n_ops = 40;
  int64_t ne0 = 16;
  // Row counts of the tensor families (values of ne1); broadcasts use one row.
  std::vector<int64_t> row_counts{1, 8, 24};
};

// Builds a random graph whose externals and inputs live on `device`.
std::unique_ptr<RandomGraph> make_random_graph(Device& device, const RandomGraphOptions& options);

// Plans `rg` in `arena` (allocating it if needed), prepares `backend`, executes it once and
// returns every output's values.
std::vector<std::vector<float>> run_once(Backend& backend, ComputeArena& arena, RandomGraph& rg);

}  // namespace kiln::test
