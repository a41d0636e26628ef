// Planner: places every intermediate of a Graph in one compute arena by liveness.
//
// Walking the op nodes in execution order, each result that owns its memory gets a block from a
// best-fit BlockAllocator, or takes over the block of a source that dies at this node (in place:
// an element-wise op, the source an arena result itself and not a view, same type and bytes, no
// other source sharing its memory, not an output). A block returns to the free list after the
// last node that reads its tensor or any view of it; outputs keep theirs to the end. The arena
// size is the allocator's high-water mark.
//
// Usage (the whole API a model needs):
//   Graph g;                                   // build once per shape (runtime/graph.h)
//   Tensor x = g.input("x", DType::F32, {n_embd, n_tokens, 1, 1});
//   Tensor y = g.silu(g.mul_mat(g.external("w", w_view), g.rms_norm(x, 1e-5f)));
//   g.mark_output(y);
//   KILN_TRY(g.status());
//   ComputeArena arena(backend.device(), "llama");  // one per device, shared by graphs
//   KILN_TRY(arena.reserve(g));                // each graph that will share the arena...
//   KILN_TRY(arena.allocate());                // ...then allocate once, sized to the largest
//   KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena.plan(g));
//   KILN_TRY(backend.prepare(plan));           // backend scratch; execute() allocates nothing
//   KILN_TRY(plan.bind(x, x_view));            // inputs: memory on the backend's device
//   KILN_TRY(backend.execute(plan));
//   KILN_TRY(backend.device().download(plan.view(y), out.data(), out_bytes));
// Plans of several graphs may be kept over one arena: each execution uses the whole arena, so
// switching graphs needs no re-plan; only one execution may use an arena at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "ops/op.h"
#include "runtime/device.h"
#include "runtime/graph.h"
#include "runtime/residency.h"

namespace kiln {

inline constexpr size_t kNotInArena = SIZE_MAX;

// The alignment of every offset a compute arena on `d` hands out (and of transfer memory there).
inline size_t arena_alignment(const Device& d) { return std::max<size_t>(d.alignment(), 64); }

struct PlannerOptions {
  size_t alignment = 64;  // a power of two; every arena offset is a multiple of it
  // false: every intermediate gets a block of its own for the whole execution (no reuse, no in
  // place); a reference placement for tests and debugging.
  bool reuse = true;
};

struct MemoryPlan {
  size_t arena_bytes = 0;    // bytes the arena needs (high-water mark of the placement)
  size_t naive_bytes = 0;    // the sum of every intermediate's block (what no reuse would need)
  size_t scratch_bytes = 0;  // the largest kernel scratch of any node
  // Per tensor id: the arena offset of tensors that own arena memory (op results not written into
  // another tensor), else kNotInArena. Views and cpy_into results live at their storage's offset
  // plus GraphTensor::offset.
  std::vector<size_t> offset;
  // Per tensor id: the op result whose block this one took over in place, or -1.
  std::vector<int32_t> inplace_of;
  // Per op node, in execution order: its kernel's phases, units and scratch (ops/op.h).
  std::vector<KernelPlan> kernels;
};

// Places `graph` (which must have an ok status). Allocates no device memory.
Result<MemoryPlan> plan_memory(const Graph& graph, const PlannerOptions& options = {});

class ComputeArena;

// A Graph placed in a ComputeArena, with per-node kernel plans and bound inputs. Backends execute
// it (runtime/backend.h). Non-owning: the Graph and the arena must outlive it. Not thread-safe:
// one execution at a time.
class ExecPlan {
 public:
  const Graph& graph() const { return *graph_; }
  ComputeArena& arena() const { return *arena_; }
  const MemoryPlan& memory() const { return memory_; }

  // Binds input `t` to memory on the executing device: same type and sizes, contiguous. Stays
  // bound for every execution until bound again.
  Status bind(Tensor t, const TensorView& memory);
  // The view of any tensor at its device address (data null while its input is unbound or the
  // arena is not allocated). On a device that is not host-visible, read it with
  // Device::download.
  TensorView view(Tensor t) const;

  // For backends: fills the data of every call with host addresses on `device` (see
  // Device::host_address); an Error naming the tensor when an input is unbound, the arena is not
  // allocated or too small, or memory is not on `device`. Allocates nothing.
  Status resolve_host_calls(const Device& device);
  // The same checks for a backend with kernels of its own (a GPU): the data of every call is its
  // device address (Device::holds must accept it).
  Status resolve_device_calls(const Device& device);
  const std::vector<OpCall>& calls() const { return calls_; }  // per op node, execution order
  const std::vector<KernelPlan>& kernels() const { return memory_.kernels; }

 private:
  friend class ComputeArena;
  ExecPlan() = default;
  void* address(int32_t id) const;  // device address of tensor id, or null
  Status resolve_calls(const Device& device, bool host);

  const Graph* graph_ = nullptr;
  ComputeArena* arena_ = nullptr;
  MemoryPlan memory_;
  std::vector<void*> bound_;  // per tensor id: the memory of bound inputs
  std::vector<OpCall> calls_;
};

// One compute buffer on a device, sized to the largest graph reserved in it and shared by the
// plans of all of them: of one owner (a context's prefill and decode graphs) or of several owners
// that take turns on the device (a text decoder and a vision encoder: the arena is then the larger
// of their worst cases, not their sum).
// Thread-safety: none inside; owners that share an arena hold take_turn() at their API boundary
// while they reserve, allocate, plan or execute in it.
class ComputeArena {
 public:
  // resident: allocates through it (counted by the device's residency manager), else directly
  // from the device; non-owning, must outlive the arena's buffer.
  ComputeArena(Device& device, std::string owner, Resident* resident = nullptr)
      : device_(&device), owner_(std::move(owner)), resident_(resident) {}

  Device& device() const { return *device_; }
  const std::string& owner() const { return owner_; }
  // The owner whose resident the buffer is (users pin it while they compute here); 0: unmanaged.
  OwnerId resident_owner() const { return resident_ != nullptr ? resident_->owner() : 0; }
  // The lock owners sharing this arena take turns by.
  [[nodiscard]] std::unique_lock<std::mutex> take_turn() { return std::unique_lock<std::mutex>(turn_); }

  // Raises the arena's requirement to fit `graph` and returns the bytes that graph needs.
  // Allocates no device memory.
  Result<size_t> reserve(const Graph& graph);
  size_t reserved_bytes() const { return reserved_; }
  // Allocates the buffer (kind Compute) when it is missing or smaller than the reservation.
  Status allocate();
  // Frees the buffer; plans stay valid and run again after allocate().
  void release() { buffer_.reset(); }
  // Bytes allocated now (0 when released), and the buffer itself (null when released).
  size_t allocated_bytes() const { return buffer_ ? buffer_->size() : 0; }
  const Buffer* buffer() const { return buffer_.get(); }

  // Places `graph` in this arena (reserving it too). The plan runs once allocated_bytes() covers
  // plan.memory().arena_bytes.
  Result<ExecPlan> plan(const Graph& graph);

 private:
  PlannerOptions options() const;
  Device* device_;
  std::string owner_;
  Resident* resident_;
  size_t reserved_ = 0;
  std::unique_ptr<Buffer> buffer_;
  std::mutex turn_;
};

}  // namespace kiln
