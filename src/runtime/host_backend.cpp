#include "runtime/host_backend.h"

#include <algorithm>

namespace kiln {
namespace {

constexpr int64_t kChunksPerThread = 8;

}  // namespace

HostKernelBackend::HostKernelBackend(Device& device, ThreadPool& pool)
    : device_(&device), pool_(&pool), scratch_name_(device.name() + " scratch") {
  scratch_resident_.attach(device, new_owner_id(), scratch_name_, MemoryKind::Scratch,
                           "allocated again by prepare()", this);
}

void HostKernelBackend::set_scratch_owner_name(std::string name) {
  scratch_name_ = std::move(name);
  scratch_resident_.rename_owner(scratch_name_);
}

Status HostKernelBackend::evict() {
  return make_error(device_->name(), ": backend scratch is not evictable");
}

Status HostKernelBackend::prepare(const ExecPlan& plan) {
  const size_t need = plan.memory().scratch_bytes;
  if (need == 0 || scratch_bytes() >= need) return ok_status();
  scratch_.reset();
  KILN_ASSIGN_OR_RETURN(scratch_,
                        scratch_resident_.allocate(BufferDesc{need, MemoryKind::Scratch, scratch_name_}));
  return ok_status();
}

Status HostKernelBackend::execute(ExecPlan& plan) {
  if (&plan.arena().device() != device_) {
    return make_error(device_->name(), ": plan's arena '", plan.arena().owner(), "' is on device '",
                      plan.arena().device().name(), "'");
  }
  const size_t need = plan.memory().scratch_bytes;
  if (scratch_bytes() < need) {
    return make_error(device_->name(), ": plan needs ", need, " bytes of scratch, the backend holds ",
                      scratch_bytes(), ": call prepare()");
  }
  KILN_TRY(plan.resolve_host_calls(*device_));
  void* scratch = need == 0 ? nullptr : device_->host_address(scratch_->base(), scratch_->size());
  const std::vector<OpCall>& calls = plan.calls();
  const std::vector<KernelPlan>& kernels = plan.kernels();
  const int64_t n_threads = pool_->n_threads();
  pool_->run([&](const WorkerContext& ctx) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const KernelPlan& kp = kernels[i];
      for (int phase = 0; phase < kp.n_phases; ++phase) {
        const int64_t units = kp.units[phase];
        if (units == 0) continue;  // the same on every thread: no work, no barrier
        // About kChunksPerThread claims per thread: enough to even out threads the machine delays,
        // few enough that claiming costs nothing next to the work.
        const int64_t grain = std::max<int64_t>(1, units / (kChunksPerThread * n_threads));
        ctx.for_each_chunk(units, grain, [&](int64_t begin, int64_t end) {
          run_kernel(calls[i], phase, begin, end, scratch);
        });
        ctx.barrier();
      }
    }
  });
  return ok_status();
}

}  // namespace kiln
