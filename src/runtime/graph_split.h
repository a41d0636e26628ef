// SplitPlan: one graph computed on several devices (a model whose layers lie on more than one).
//
// Where each op node runs: on the device that holds the memory outside the graph it touches (an
// external leaf it reads, directly or through a view: a weight, a KV cache; or the leaf it writes
// into: set_rows, cpy_into). Every such memory of one node must be on one device (an Error names
// the node and both devices otherwise). A node that touches none runs where its first source was
// computed, or, when every source is a graph input, where the node before it ran (the first node:
// the first device). Which device holds an external: the first device that is not the host's whose
// Device::holds accepts its bytes, else a host device (the CPU reads any host address).
//
// Parts: the maximal runs of consecutive op nodes on one device, in execution order. Each part is
// a Graph of its own, planned in its device's compute arena: its nodes copied with their sources
// mapped; externals stay externals, graph inputs become inputs of every part that reads them, and a
// tensor computed by an earlier part (a crossing: the storage tensor a view or node reads) becomes
// an input of this part. The producing part keeps a crossing as an output; after it runs, its
// bytes go to host staging (Device::download) and, before a consumer runs, onto the consumer's
// device (Device::upload into the caller's transfer memory there): data crosses only through the
// devices' copies. One device (every node there) makes one part that is the graph itself: no copy,
// nothing staged.
//
// Usage:
//   KILN_ASSIGN_OR_RETURN(SplitPlan sp, SplitPlan::create(graph, arenas));   // per device: its arena
//   for each device d: upload each input there, sp.bind(input, d, view_on_d);
//   KILN_TRY(sp.execute(devices));   // per device: backend and transfer memory
//   KILN_TRY(sp.download(output, host, bytes));
//
// Several indices may name one arena (parts that take turns on one device: a model whose weights
// stream through it in segments, llm/context.h): the parts then run one after the other in it, and
// a graph output computed by a part whose arena a later part reuses is kept in host staging after
// that part runs (download() reads it there).
//
// Moving memory (relocate()): a part's externals may be rebound to where their bytes are now (a
// segment of weights evicted and restored elsewhere) without cutting or planning again.
//
// Ownership: the Graph and the arenas must outlive the plan; the plan owns its parts' graphs and
// the host staging (sized at create(): execute() allocates nothing).
// Thread-safety: none; one execution at a time, holding the arenas' turns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "runtime/backend.h"
#include "runtime/function_ref.h"
#include "runtime/graph.h"
#include "runtime/planner.h"

namespace kiln {

inline constexpr size_t kNoDevice = SIZE_MAX;
// Which device (an index) holds an external leaf's memory, or kNoDevice.
using ExternalPlacement = std::function<size_t(const TensorView& memory)>;
// The rule above over `devices` (Device::holds).
ExternalPlacement placement_by_holds(std::span<Device* const> devices);
// Per op node of `g` (op_nodes() order): the index of the device it runs on, by the rule above
// (`names`: one per device, for messages). An Error names a node whose external memory lies on two
// devices, or an external on none.
Result<std::vector<size_t>> assign_devices(const Graph& g, const ExternalPlacement& where,
                                           std::span<const std::string> names);

// What each device needs to run a graph cut as above (SplitPlan::measure), without allocating.
struct SplitMeasure {
  std::vector<size_t> arena_bytes;     // per device: the largest of its parts' plans
  std::vector<size_t> transfer_bytes;  // per device: SplitPlan::transfer_bytes
  std::vector<size_t> scratch_bytes;   // per device: the largest kernel scratch of its parts
};


// One device's share of an execution.
struct SplitDevice {
  Backend* backend = nullptr;
  // Memory on backend->device() for the crossings a part there reads: transfer_bytes(d) bytes from
  // transfer_offset (null when transfer_bytes(d) is 0).
  Buffer* transfer = nullptr;
  size_t transfer_offset = 0;
};

class SplitPlan {
 public:
  // Splits `g` over the devices of `arenas` (one arena per device, in the order assign_devices
  // indexes) and plans every part in its device's arena (reserving and allocating it as
  // ComputeArena::plan requires).
  static Result<SplitPlan> create(const Graph& g, std::span<ComputeArena* const> arenas);
  // The same with the externals placed by `where` (indices into `arenas`; `names`: one per index,
  // for messages) instead of by the arenas' devices.
  static Result<SplitPlan> create(const Graph& g, std::span<ComputeArena* const> arenas,
                                  const ExternalPlacement& where, std::span<const std::string> names);
  // The bytes create() would plan on each device for `g`, with its externals placed by `where`
  // (any addresses: nothing is read) and each device's arena `alignments` (ComputeArena's:
  // arena_alignment()). For estimates before anything is allocated (llm/placement_fit.h).
  static Result<SplitMeasure> measure(const Graph& g, const ExternalPlacement& where,
                                      std::span<const std::string> names, std::span<const size_t> alignments);
  SplitPlan(SplitPlan&&) = default;
  SplitPlan& operator=(SplitPlan&&) = default;

  size_t part_count() const { return parts_.size(); }
  // The device index part p runs on (p < part_count()).
  size_t part_device(size_t p) const { return parts_[p]->device; }
  // Rebinds the externals of part p that the graph placed in [built, built + bytes) to the same
  // offsets from `now` (where that memory lies today); the plan remembers where it bound them, so
  // calling it again with the same `now` does nothing. A part that is the graph itself (one part)
  // cannot move: an Error.
  Status relocate(size_t p, const void* built, size_t bytes, void* now);
  // Bytes of transfer memory a part on device d reads its crossings from (the largest part's).
  size_t transfer_bytes(size_t d) const { return d < transfer_bytes_.size() ? transfer_bytes_[d] : 0; }
  // Whether a part on device d reads graph input `t` (the caller uploads it there).
  bool reads_on(Tensor t, size_t d) const;
  // Binds graph input `t` on device d (memory there) for every part on d that reads it.
  Status bind(Tensor t, size_t d, const TensorView& memory);
  // Makes each part's backend ready for it (Backend::prepare: before execute(), which allocates
  // nothing). `devices` indexes as the arenas did.
  Status prepare(std::span<const SplitDevice> devices);
  // Runs the parts in order, moving the crossings between them; every graph input bound. `before`
  // (when given) is called with each part's index before the part runs: an Error stops the run.
  Status execute(std::span<const SplitDevice> devices);
  Status execute(std::span<const SplitDevice> devices, FunctionRef<Status(size_t part)> before);
  // Copies graph output `t` (marked output in the graph) to host memory: n must be its bytes.
  Status download(Tensor t, void* dst, size_t n) const;

 private:
  struct Crossing {
    int32_t source = -1;  // tensor id in the original graph (a storage tensor)
    Tensor tensor;        // in the part: its input leaf (consumer) or the computed tensor (producer)
    size_t offset = 0;    // consumer: byte offset in the transfer memory
  };
  struct Part {
    size_t device = 0;
    std::unique_ptr<Graph> own;  // null for the one part that is the original graph
    const Graph* graph = nullptr;
    std::vector<std::pair<int32_t, Tensor>> inputs;  // original graph input id -> its leaf here
    std::vector<Crossing> reads;                     // crossings uploaded before the part runs
    std::vector<Crossing> writes;                    // crossings downloaded after it runs
    std::vector<std::pair<int32_t, Tensor>> outputs; // original graph output id -> its tensor here
    bool stage_outputs = false;  // a later part reuses this part's arena: outputs go to staging_
    std::optional<ExecPlan> plan;
    // relocate(): per range as built, where its externals are bound now.
    std::vector<std::pair<const void*, void*>> moved;
  };
  Status run(std::span<const SplitDevice> devices, const FunctionRef<Status(size_t part)>* before);
  SplitPlan() = default;
  // The parts of `g` for nodes on `device_of` (assign_devices), crossings aligned per device; not
  // planned.
  static Result<SplitPlan> cut(const Graph& g, const std::vector<size_t>& device_of, std::span<const size_t> alignments);

  std::vector<std::unique_ptr<Part>> parts_;  // by pointer: plans hold their graph's address
  std::vector<size_t> transfer_bytes_;        // per device
  std::vector<std::vector<uint8_t>> staging_; // per original tensor id that crosses (else empty)
};

}  // namespace kiln
