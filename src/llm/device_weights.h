// DeviceWeights: a Model's weights placed on one Device, in the layouts that device's kernels read.
// One object per (model, device); every Context of that model on that device shares it. An mmproj's
// encoder (llm/media_encoder.h) is placed the same way, as an owner of its own: the tensors its
// encoder graphs read only as mul_mat weights as a model's matrices are, the others plain (read as
// the file holds them); tensors(): their views.
//
// Placement (create()): each weight tensor goes through ops/weight_prep.h. Matrices the graph
// multiplies (attention and MLP projections, the LM head) take choose_weight_layout()'s layout;
// every other tensor is plain: the token embedding (get_rows reads plain rows), norms, biases and
// rope frequency factors. A tied LM head is multiplied in the token embedding's plain layout and
// shares its bytes (no prepared copy: the bytes are held once, as llama.cpp holds them).
//
// States, and the memory each holds:
//   resident  after create() or rebuild(). One buffer (MemoryKind::Weights, owner: the model's
//             name) holds every tensor that is copied, each at an offset aligned for the device
//             and its kernels, buffer_bytes() in all; weights() views point into it.
//             - On a device that is not host-visible every tensor is copied: prepared in host
//               staging (one tensor at a time: the largest prepared tensor's bytes), then uploaded.
//             - On a host device a tensor that the kernels do not multiply (the token embedding,
//               norms, biases) is not copied: its view stays in the model's mapped file
//               (mapped_bytes() in all). Every matrix they multiply is copied, prepared or plain:
//               the buffer's 2 MiB pages (cpu_device.cpp) stream faster through the one-token
//               kernels than the file's 4 KiB pages (Q6_K decode 1.09x on the Zen 4 machine of
//               docs/performance.md, issue 38). When nothing is copied there is no buffer
//               (buffer_bytes() == 0).
//             - After preparing, the mapped pages of tensors that are only copied (no placement
//               reads them in place) leave the process (madvise(MADV_DONTNEED), page-aligned
//               inward): the resident memory is the buffer plus the pages read in place, not the
//               file and its copy. A model that is not a file mapping keeps its bytes.
//   released  after release(). No buffer: the device holds nothing for these weights. Views of
//             copied tensors are null (decoding with them is refused); views into the mapping stay
//             (the mapping is the Model's; its pages are the residency manager's to drop).
// Preparing is a pure function of the mapped bytes, so rebuild() puts the same bytes back
// (bit-identical results), possibly at another device address: generation() rises whenever the
// views change, and contexts that keep weight addresses from one decode to the next (their cached
// plans) compare it at every decode. The mapped file is the shadow of the copies: releasing needs
// no copy out.
//
// Residency: on a device with a residency manager (runtime/residency.h) the weights are one
// resident of their own owner (owner(): the contexts over them share it), counted as the buffer's
// bytes plus, on a host device, the mapped bytes (the file's pages the kernels read). Evicting
// releases the buffer and, for a model mapped from a file, drops the mapped pages with
// madvise(MADV_DONTNEED) (they stay in the page cache: coming back is a re-fault); restoring
// rebuilds. With a manager, evict and restore through it (ResidencyManager::evict_owner / pin), not
// with release() / rebuild(), which it calls.
//
// Ownership: shares the Model; the Device must outlive the object.
// Thread-safety: const methods may run concurrently with each other. release() and rebuild() must
// not run while any context decodes with these weights (callers serialize: the residency manager
// pins weights for the length of a request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/model.h"
#include "models/modules.h"
#include "ops/weight_prep.h"
#include "runtime/device.h"
#include "runtime/residency.h"

namespace kiln {

// How weights are held on a host device (llama.cpp's --no-mmap and --mlock); no effect elsewhere.
struct WeightOptions {
  // Every tensor is copied into the buffer (private anonymous memory), none read in place from the
  // mapped file (--no-mmap): eviction frees that memory for real, restoring reads the file again.
  bool copy_all = false;
  // The weights' host pages (the buffer and the mapped pages read in place) are locked in RAM
  // (mlock) while resident, unlocked before eviction drops them (--mlock).
  bool lock = false;
  // Called (on the locking thread) at the first lock that fails (RLIMIT_MEMLOCK), with what failed
  // and why; the weights stay usable, unlocked. Null: silent.
  std::function<void(const std::string&)> on_lock_failure;
  // Threads that prepare the copied tensors on a host-visible device, at load and at every restore
  // (the calling thread and threads started for it; 0 or less: every hardware thread). Each
  // prepares whole tensors, largest first; the bytes do not depend on the count. The commands pass
  // their -t (to the model's draft model and mmproj too).
  int prepare_threads = 1;
  // Which of a text model's weight slots this placement holds (a model split over devices,
  // llm/layer_split.h): fn(layer, tensor) as for_each_weight_slot numbers layers; the others' views
  // are null. For a file's tensors (the second create()), fn(-1, tensor) keeps those of one network
  // of several in the file (a checkpoint's UNet); the others are not placed (tensor() is null).
  // Null: every weight.
  std::function<bool(int64_t layer, const GgufTensorInfo& tensor)> holds = {};
  // Appended to the owner's name ("llama (layers 4-7)"): tells apart several shares of one model
  // on one device (segments). Empty: the model's name.
  std::string name_suffix = {};
};

class DeviceWeights : private Evictable {
 public:
  // Where one tensor of the model's file sits on the device.
  struct Placement {
    const GgufTensorInfo* info = nullptr;  // the tensor in the model's file
    WeightPlacement prepared;              // its layout there and the bytes it takes
    size_t offset = 0;                     // byte offset in the buffer, or kMapped
  };
  static constexpr size_t kMapped = SIZE_MAX;  // read in place from the mapped file (host devices)

  // Places every weight of `model` on `device` (resident state). An Error, with nothing left
  // allocated, when the device cannot hold them (the device's or the residency manager's message
  // with the bytes needed and the budget) or a tensor cannot be prepared.
  static Result<std::shared_ptr<DeviceWeights>> create(std::shared_ptr<const Model> model, Device& device,
                                                       WeightOptions options = {});
  // The same for the tensors of a file (an mmproj's, a diffusion model's), under the owner name
  // `name` (the name in messages; the encoders use "mmproj NAME" and "mmproj NAME (audio)"). `mmproj` keeps the file
  // alive (an aliasing pointer into the model that owns the mapping). Those named in `matmul` (read
  // only as mul_mat weights by the encoder's graphs: Graph::read_only_as_weights) take the kernels'
  // layouts; the others are placed plain.
  static Result<std::shared_ptr<DeviceWeights>> create(std::shared_ptr<const GgufFile> mmproj,
                                                       std::string name, Device& device,
                                                       const std::vector<std::string>& matmul = {},
                                                       WeightOptions options = {});
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  // The text model (placements of a text model only).
  const Model& model() const { return *model_; }
  // The owner's name: the model's, or the mmproj's as create() was given it.
  const std::string& name() const { return name_; }
  Device& device() const { return *device_; }
  // The owner of these weights and of the contexts over them in the device's residency manager.
  OwnerId owner() const { return owner_; }
  // The model's weights as views on device(): shapes of Model::weights(), layouts and addresses of
  // this placement. Copied tensors' views are null while released.
  const DecoderWeights& weights() const { return weights_; }
  // An mmproj's tensor `name` as a view on device() (null data while released); nullptr for a
  // name that is not one of its file's tensors (or the weights of a text model).
  const Weight* tensor(std::string_view name) const;
  bool resident() const { return resident_; }
  // Raised each time weights() views change (release, rebuild): addresses taken from weights()
  // hold while it stays the same.
  uint64_t generation() const { return generation_; }
  // Bytes of the buffer while resident (the same after every rebuild; 0: nothing is copied).
  size_t buffer_bytes() const { return buffer_bytes_; }
  // Bytes of the tensors read in place from the mapped file (host devices only).
  size_t mapped_bytes() const { return mapped_bytes_; }
  // One entry per distinct (tensor, layout), in placement order.
  const std::vector<Placement>& placements() const { return placements_; }
  // The buffer (null when released or when nothing is copied); read it with Buffer::read.
  const Buffer* buffer() const { return buffer_.get(); }
  // Segmented execution (llm/context.h): shares of the same model on the same device, each holding
  // a run of consecutive layers as an owner of its own, resident only while a pass computes with
  // them. These weights then hold the rest of the device's share. Empty: none.
  const std::vector<std::shared_ptr<const DeviceWeights>>& segments() const { return segments_; }
  // Sets the segments (by the placement, before any context uses these weights).
  void set_segments(std::vector<std::shared_ptr<const DeviceWeights>> segments) { segments_ = std::move(segments); }

  // The bytes a placement of `weights` (a text model's, whole or as WeightOptions::holds filters it)
  // on `device` takes, computed as create() lays it out, without allocating: the buffer, and on a
  // host device the tensors read in place from the mapping. `cache` (may be null) keeps the layouts
  // chosen per tensor across calls (choosing a Q8_0 matrix's reads it whole).
  struct Footprint {
    size_t buffer_bytes = 0, mapped_bytes = 0;
    size_t total() const { return buffer_bytes + mapped_bytes; }
  };
  using LayoutCache = std::unordered_map<const GgufTensorInfo*, WeightPlacement>;
  static Footprint footprint(const DecoderWeights& weights, const Device& device, const WeightOptions& options,
                             LayoutCache* cache);

  // Frees the buffer (released state). Nothing to do when already released or nothing is copied.
  void release();
  // Allocates the buffer again and prepares every copied tensor from the mapped file (resident
  // state, the same bytes as before). Nothing to do when resident. An Error when the device has
  // no room: the object then stays released with nothing allocated.
  Status rebuild();

 private:
  DeviceWeights() = default;
  // Where each visited weight goes: one placement per distinct (tensor, layout), copies at aligned
  // buffer offsets, plain tensors on a host device read from the mapping (see the header).
  struct Layout {
    std::vector<Placement> placements;
    std::vector<size_t> placement_of;  // per visit
    size_t buffer_bytes = 0, mapped_bytes = 0;
  };
  // The layout of every visit (a weight and its use): a matrix takes the CPU kernels' layout, on a
  // device whose kernels read it (Device::reads_host_weight_layouts), unless the same tensor is also
  // read plain (a tied LM head, whose bytes are the token embedding's): then it is multiplied in its
  // plain layout too, so its bytes are held once (as llama.cpp, which repacks no tensor that
  // get_rows reads). The plain and prepared kernels give the same bits.
  static std::vector<WeightPlacement> choose(std::span<const std::pair<const Weight*, WeightUse>> visits,
                                             const Device& device, int threads, LayoutCache* cache);
  static Layout lay_out(std::span<const std::pair<const Weight*, WeightUse>> visits,
                        std::span<const WeightPlacement> chosen, const Device& device, const WeightOptions& options);
  // Places the weights visit_weights() reaches (weights_ and tensors_, set by the caller) on
  // `device`: the body of both create()s.
  static Result<std::shared_ptr<DeviceWeights>> place(std::shared_ptr<DeviceWeights> dw, Device& device);
  // Calls fn(weight, use) for weights_ (for_each_weight) and then every entry of tensors_.
  template <class Fn>
  void visit_weights(Fn&& fn) {
    for_each_weight(weights_, fn);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i]) fn(tensors_[i], tensor_is_matmul_[i] ? WeightUse::MatMul : WeightUse::Elementwise);
    }
  }
  // Points the views of copied tensors at the buffer (or at null when released).
  void bind_views();
  // Takes the mapped file pages of placed tensors out of the process (GgufFile::drop_tensor_pages):
  // of every placed tensor (evicting), or of those that are only copied, which nothing reads until
  // a rebuild (after preparing). A no-op for a model that is not a file mapping.
  void drop_file_pages(bool also_read_in_place) const;
  // With options_.lock: locks (or unlocks) the buffer and the mapped pages read in place.
  void lock_pages(bool lock);
  // Evictable: unlock, release() and drop the mapped pages; rebuild() and lock.
  Status evict() override;
  Status restore() override;

  std::shared_ptr<const Model> model_;         // a text model's placement, or
  std::shared_ptr<const GgufFile> mmproj_;     // an mmproj's
  const GgufFile* file_ = nullptr;             // the mapped file of either
  std::string name_;
  Device* device_ = nullptr;
  WeightOptions options_;
  bool locked_ = false, lock_failed_ = false;
  OwnerId owner_ = 0;
  Resident residency_;                  // before buffer_: outlives it
  DecoderWeights weights_;              // a text model's
  std::vector<Weight> tensors_;         // a file's, in file order (null: not held)
  std::vector<bool> tensor_is_matmul_;  // per tensors_ entry: read only as mul_mat weights
  std::vector<Placement> placements_;
  std::vector<size_t> placement_of_;  // per weight in for_each_weight order: its placements_ index
  size_t buffer_bytes_ = 0, mapped_bytes_ = 0;
  std::unique_ptr<Buffer> buffer_;
  std::vector<std::shared_ptr<const DeviceWeights>> segments_;
  bool resident_ = false;
  uint64_t generation_ = 0;  // bind_views() calls
};

}  // namespace kiln
