#include "llm/vision_memory.h"

#include <vector>

namespace kiln {

Result<std::unique_ptr<VisionMemory>> VisionMemory::create(std::shared_ptr<const VisionModel> model, Device& device,
                                                           size_t input_bytes) {
  std::unique_ptr<VisionMemory> m(new VisionMemory());
  m->device_ = &device;
  const OwnerId owner = new_owner_id();
  const std::string owner_name = "mmproj " + model->name();
  m->weights_.model = std::move(model);
  m->weights_.resident.attach(device, owner, owner_name, MemoryKind::Weights, "read again from the mapped file",
                              &m->weights_);
  if (const Status st = m->weights_.resident.set_external_bytes(m->weights_.model->weight_bytes()); !st.ok())
    return make_error("the weights of ", owner_name, " do not fit: ", st.error().message);
  m->inputs_.bytes = input_bytes;
  m->inputs_.name = owner_name + ":inputs";
  m->inputs_.resident.attach(device, owner, owner_name, MemoryKind::Compute, "allocated again", &m->inputs_);
  KILN_TRY(m->inputs_.restore());
  return m;
}

Result<ResidencyManager::Pin> VisionMemory::pin() const {
  ResidencyManager* manager = device_->residency();
  if (manager == nullptr || owner() == 0) return ResidencyManager::Pin();
  return manager->pin(owner());
}

// The manager stops counting the mapped bytes when the weights leave and counts them again when
// they come back (Resident::set_external_bytes declared them once): the hooks only move pages.
Status VisionMemory::Weights::evict() {
  const GgufFile& file = model->file();
  std::vector<const GgufTensorInfo*> tensors;
  for (const GgufTensorInfo& t : file.tensors()) tensors.push_back(&t);
  file.drop_tensor_pages(tensors);
  return ok_status();
}

Status VisionMemory::Weights::restore() { return ok_status(); }  // the next read faults the pages in

Status VisionMemory::Inputs::evict() {
  buffer.reset();
  return ok_status();
}

Status VisionMemory::Inputs::restore() {
  KILN_ASSIGN_OR_RETURN(buffer, resident.allocate({bytes, MemoryKind::Compute, name}));
  return ok_status();
}

}  // namespace kiln
