// EncoderMemory: what a network run over a file's tensors holds on its device, as residents of one
// owner of its own: an mmproj's encoder (llm/media_encoder.h: "mmproj NAME" for the vision encoder,
// "mmproj NAME (audio)" for the audio encoder) or a diffusion network (diffusion/device_network.h:
// "sd unet"). Apart from the text model's owner, so the breakdown shows each network as its own
// owner and the manager can evict it alone, least recently used, when another needs room:
//   weights  the mmproj's tensors placed on the device (llm/device_weights.h, whose owner is the
//            owner of both residents): on a host device read in place in the mapped file (counted
//            as the mapped tensor bytes; evicting drops their pages, the next read faults the same
//            bytes back in) or, for mul_mat weights in a kernel layout, prepared into a buffer;
//            elsewhere copied into a device buffer (freed on eviction, copied again from the
//            mapping at restore: the same bytes, possibly at another address).
//   inputs   one buffer for the inputs of the largest graph (patches and constants, a log-mel
//            chunk, a latent); freed on eviction and allocated again at restore (every pass writes
//            it anew). None while its size is 0.
// Callers pin() the owner while they encode; the pin restores what was evicted first.
//
// Ownership: shares the mmproj's file; the Device must outlive the object. Thread-safety: pin() from
// any thread; inputs() only while pinned (eviction frees the buffer; the hooks run under the
// manager's lock and touch only these residents' memory).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/result.h"
#include "llm/device_weights.h"
#include "runtime/device.h"
#include "runtime/residency.h"

namespace kiln {

class EncoderMemory {
 public:
  // Registers both residents on `device` under the owner `name` (its manager makes room for them
  // first) and allocates the input buffer of `input_bytes` (none for 0: grow_inputs later); the
  // tensors named in `matmul` take the kernels' layouts, and only those `weights.holds` keeps are
  // placed (DeviceWeights::create, with `weights`). An Error with the manager's numbers
  // when they do not fit.
  static Result<std::unique_ptr<EncoderMemory>> create(std::shared_ptr<const GgufFile> mmproj,
                                                       std::string name, Device& device, size_t input_bytes,
                                                       const std::vector<std::string>& matmul,
                                                       const WeightOptions& weights);
  EncoderMemory(const EncoderMemory&) = delete;
  EncoderMemory& operator=(const EncoderMemory&) = delete;

  // The owner of both residents (0 on a device without a residency manager).
  OwnerId owner() const { return weights_->owner(); }
  // The mmproj's tensors on the device (DeviceWeights::tensor); their views are valid while pinned.
  const DeviceWeights& weights() const { return *weights_; }
  // Keeps both on the device (restoring them first); an empty pin without a manager.
  Result<ResidencyManager::Pin> pin() const;
  // The input buffer; valid while pinned (and its size is not 0).
  Buffer& inputs() const { return *inputs_.buffer; }
  // Makes the input buffer at least `bytes` (allocated again, larger, when it is smaller); while
  // pinned. An Error with the manager's numbers when it does not fit.
  Status grow_inputs(size_t bytes);

 private:
  EncoderMemory() = default;
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
