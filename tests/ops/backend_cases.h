// Op cases run through the runtime on a backend: each case is a one-op Graph with contiguous host
// inputs, planned in a compute arena on the backend's device, its inputs uploaded and its result
// downloaded. Shared by the CPU/sim test (tests/ops/backend_test.cpp, bit for bit) and the device
// backends' tests (tests/vulkan, by normalized error).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "op_harness.h"
#include "runtime/backend.h"

namespace kiln::test {

struct BackendCase {
  std::string name;
  OpKind kind;
  std::vector<std::shared_ptr<HostTensor>> srcs;  // contiguous
  OpParams params;
  std::shared_ptr<HostTensor> dst;  // contiguous
};

// Runs the case as a graph on `backend` and downloads the result bytes.
Status run_on(Backend& backend, const BackendCase& c, std::vector<uint8_t>& out);
// A contiguous tensor of uniform values in [lo, hi) (quantized types: quantized from them).
std::shared_ptr<HostTensor> random_tensor(DType t, Shape4 ne, std::mt19937& rng, double lo = -1, double hi = 1);
// One case of every op (the op table's kinds and the types models use).
std::vector<BackendCase> make_cases();
// Computes the case with the direct kernel into c.dst.
void run_direct(const BackendCase& c);

}  // namespace kiln::test
