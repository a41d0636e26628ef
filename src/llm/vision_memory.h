// VisionMemory: what a vision encoder holds on its device, as residents of one owner of its own
// ("mmproj NAME": apart from the text model's, so the breakdown shows the encoder as its own
// owner and the manager can evict it alone, least recently used, when the decoder needs room):
//   weights  the mmproj's tensors, read in place in its mapped file (encoders run on host devices):
//            counted as the mapped tensor bytes while resident. Evicting drops their pages
//            (GgufFile::drop_tensor_pages: they leave the process and stay in the page cache);
//            restoring counts them again, and the next read faults the file's bytes back in: the
//            same bytes. An mmproj parsed from memory (not a mapping) keeps its bytes, uncounted
//            while evicted (as the text model's weights).
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
#include "llm/vision_model.h"
#include "runtime/device.h"
#include "runtime/residency.h"

namespace kiln {

class VisionMemory {
 public:
  // Registers both residents on `device` (its manager makes room for them first) and allocates
  // the input buffer of `input_bytes`. An Error with the manager's numbers when they do not fit.
  static Result<std::unique_ptr<VisionMemory>> create(std::shared_ptr<const VisionModel> model, Device& device,
                                                      size_t input_bytes);
  VisionMemory(const VisionMemory&) = delete;
  VisionMemory& operator=(const VisionMemory&) = delete;

  // The owner of both residents (0 on a device without a residency manager).
  OwnerId owner() const { return weights_.resident.owner(); }
  // Keeps both on the device (restoring them first); an empty pin without a manager.
  Result<ResidencyManager::Pin> pin() const;
  // The input buffer; valid while pinned.
  Buffer& inputs() const { return *inputs_.buffer; }

 private:
  VisionMemory() = default;
  struct Weights final : Evictable {
    Status evict() override;
    Status restore() override;
    std::shared_ptr<const VisionModel> model;
    Resident resident;
  };
  struct Inputs final : Evictable {
    Status evict() override;
    Status restore() override;
    size_t bytes = 0;
    std::string name;
    Resident resident;  // declared before the buffer: outlives it
    std::unique_ptr<Buffer> buffer;
  };
  Device* device_ = nullptr;
  Weights weights_;
  Inputs inputs_;
};

}  // namespace kiln
