// CpuEngine: the host device, a persistent thread pool and the CPU backend, bundled for callers
// that run models on the CPU alone (tests, oracles). The commands and the server choose among
// devices through backends/device_registry.h. Not copyable or movable: contexts keep references
// into it, so it must outlive them.
#pragma once

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "runtime/thread_pool.h"

namespace kiln {

struct CpuEngine {
  // n_threads >= 1, or 0 for every hardware thread.
  explicit CpuEngine(int n_threads) : pool(n_threads), backend(device, pool) {}
  CpuEngine(const CpuEngine&) = delete;
  CpuEngine& operator=(const CpuEngine&) = delete;

  CpuDevice device;
  ThreadPool pool;
  CpuBackend backend;
};

}  // namespace kiln
