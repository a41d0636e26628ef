// VisionMemory: what a vision encoder holds on its device, as residents of one owner of its own
// ("mmproj NAME": apart from the text model's, so the breakdown shows the encoder as its own
// owner and the manager can evict it alone, least recently used, when the decoder needs room):
//   weights  the mmproj's tensors placed on the device (llm/device_weights.h, whose owner is the
//            owner of both residents): on a host device read in place in the mapped file (counted
//            as the mapped tensor bytes; evicting drops their pages, the next read faults the same
//            bytes back in), elsewhere copied into a device buffer (freed on eviction, copied
//            again from the mapping at restore: the same bytes, possibly at another address).
//   inputs   one buffer for the patches and constant inputs of the largest graph (Compute);
//            freed on eviction and allocated again at restore (every encode writes it anew).
// Callers pin() the owner while they encode; the pin restores what was evicted first.
//
// Ownership: shares the VisionModel; the Device must outlive the object. Thread-safety: pin() from
// any thread; inputs() only while pinned (eviction frees the buffer; the hooks run under the
// manager's lock and touch only these residents' memory).
#pragma once

#include <cstddef>
#include <memory>

#include "core/result.h"
#include "llm/device_weights.h"
#include "llm/vision_model.h"
#include "runtime/device.h"
#include "runtime/residency.h"

namespace kiln {

class VisionMemory {
 public:
  // Registers both residents on `device` (its manager makes room for them first) and allocates
  // the input buffer of `input_bytes`; the tensors named in `matmul` take the kernels' layouts
  // (DeviceWeights::create, with `weights`). An Error with the manager's numbers when they do not fit.
  static Result<std::unique_ptr<VisionMemory>> create(std::shared_ptr<const VisionModel> model,
                                                      Device& device, size_t input_bytes,
                                                      const std::vector<std::string>& matmul,
                                                      const WeightOptions& weights);
  VisionMemory(const VisionMemory&) = delete;
  VisionMemory& operator=(const VisionMemory&) = delete;

  // The owner of both residents (0 on a device without a residency manager).
  OwnerId owner() const { return weights_->owner(); }
  // The mmproj's tensors on the device (DeviceWeights::tensor); their views are valid while pinned.
  const DeviceWeights& weights() const { return *weights_; }
  // Keeps both on the device (restoring them first); an empty pin without a manager.
  Result<ResidencyManager::Pin> pin() const;
  // The input buffer; valid while pinned.
  Buffer& inputs() const { return *inputs_.buffer; }

 private:
  VisionMemory() = default;
  struct Inputs final : Evictable {
    Status evict() override;
    Status restore() override;
    size_t bytes = 0;
    std::string name;
    Resident resident;  // declared before the buffer: outlives it
    std::unique_ptr<Buffer> buffer;
  };
  Device* device_ = nullptr;
  std::shared_ptr<DeviceWeights> weights_;
  Inputs inputs_;
};

}  // namespace kiln
