// SimBackend: executes planned graphs whose arena, inputs and externals live on a SimDevice,
// computing with the host kernels on the persistent ThreadPool (runtime/host_backend.h). Memory
// that is not on the sim device (a host pointer bound as input) is refused with an Error before
// anything runs, as a GPU backend would.
#pragma once

#include "backends/sim/sim_device.h"
#include "runtime/host_backend.h"

namespace kiln {

class SimBackend : public HostKernelBackend {
 public:
  // Non-owning: device and pool must outlive the backend.
  SimBackend(SimDevice& device, ThreadPool& pool) : HostKernelBackend(device, pool) {}
};

}  // namespace kiln
