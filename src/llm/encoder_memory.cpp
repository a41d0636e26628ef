#include "llm/encoder_memory.h"

namespace kiln {

Result<std::unique_ptr<EncoderMemory>> EncoderMemory::create(std::shared_ptr<const GgufFile> mmproj,
                                                             std::string name, Device& device,
                                                             size_t input_bytes,
                                                             const std::vector<std::string>& matmul,
                                                             const WeightOptions& weights) {
  std::unique_ptr<EncoderMemory> m(new EncoderMemory());
  m->device_ = &device;
  KILN_ASSIGN_OR_RETURN(m->weights_,
                        DeviceWeights::create(std::move(mmproj), std::move(name), device, matmul, weights));
  const OwnerId owner = m->weights_->owner();
  const std::string& owner_name = m->weights_->name();
  m->inputs_.bytes = input_bytes;
  m->inputs_.name = owner_name + ":inputs";
  m->inputs_.resident.attach(device, owner, owner_name, MemoryKind::Compute, "allocated again", &m->inputs_);
  KILN_TRY(m->inputs_.restore());
  return m;
}

Result<ResidencyManager::Pin> EncoderMemory::pin() const {
  ResidencyManager* manager = device_->residency();
  if (manager == nullptr || owner() == 0) return ResidencyManager::Pin();
  return manager->pin(owner());
}

Status EncoderMemory::grow_inputs(size_t bytes) {
  if (bytes <= inputs_.bytes) return ok_status();
  inputs_.buffer.reset();  // the old one first: the room is the larger one's, not both
  inputs_.bytes = bytes;
  const Status st = inputs_.restore();
  if (!st.ok()) inputs_.bytes = 0;  // none now: the next call tries again
  return st;
}

Status EncoderMemory::Inputs::evict() {
  buffer.reset();
  return ok_status();
}

Status EncoderMemory::Inputs::restore() {
  if (bytes == 0) return ok_status();
  KILN_ASSIGN_OR_RETURN(buffer, resident.allocate({bytes, MemoryKind::Compute, name}));
  return ok_status();
}

}  // namespace kiln
