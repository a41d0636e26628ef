// CpuBackend: executes planned graphs in host RAM with the kernels of src/ops on the process's
// persistent ThreadPool (runtime/host_backend.h).
#pragma once

#include "backends/cpu/cpu_device.h"
#include "runtime/host_backend.h"

namespace kiln {

class CpuBackend : public HostKernelBackend {
 public:
  // Non-owning: device and pool must outlive the backend.
  CpuBackend(CpuDevice& device, ThreadPool& pool) : HostKernelBackend(device, pool) {}
};

}  // namespace kiln
