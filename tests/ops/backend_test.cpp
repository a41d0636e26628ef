// The op table through the runtime: each case (backend_cases.h) is built as a one-op Graph,
// planned in a compute arena and executed by the CPU backend and by the sim backend (memory that is
// not host-visible, explicit uploads and downloads). Both must reproduce the direct kernel result
// bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "backend_cases.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/sim/sim_backend.h"
#include "runtime/thread_pool.h"

namespace kiln::test {
namespace {

TEST(OpsBackends, CpuAndSimReproduceTheDirectKernels) {
  ThreadPool pool(3);
  CpuDevice cpu_device;
  CpuBackend cpu(cpu_device, pool);
  auto sim_device = SimDevice::create(SimDeviceOptions{.name = "sim0", .capacity = size_t{64} << 20});
  ASSERT_TRUE(sim_device.ok()) << sim_device.error().message;
  SimBackend sim(**sim_device, pool);
  for (const BackendCase& c : make_cases()) {
    SCOPED_TRACE(c.name);
    run_direct(c);
    const auto* want = static_cast<const uint8_t*>(c.dst->view().data);
    const size_t bytes = c.dst->view().span_bytes();
    for (Backend* b : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&sim)}) {
      std::vector<uint8_t> got;
      const Status st = run_on(*b, c, got);
      ASSERT_TRUE(st.ok()) << b->device().name() << ": " << st.error().message;
      ASSERT_EQ(got.size(), bytes);
      EXPECT_EQ(std::memcmp(got.data(), want, bytes), 0)
          << b->device().name() << " differs from the direct kernel";
    }
  }
}

}  // namespace
}  // namespace kiln::test
