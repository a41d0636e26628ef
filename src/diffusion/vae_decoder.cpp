#include "diffusion/vae_decoder.h"

#include "diffusion/plane_graph.h"

namespace kiln::diffusion {

Result<std::unique_ptr<VaeDecoder>> VaeDecoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                       const std::string& prefix, const NetworkPlacement& placement) {
  std::unique_ptr<VaeDecoder> d(new VaeDecoder());
  KILN_ASSIGN_OR_RETURN(d->weights_, sd::bind_vae_decoder(file->gguf(), prefix));
  const std::string top = prefix.empty() ? "" : prefix + ".";
  KILN_ASSIGN_OR_RETURN(d->net_, DeviceNetwork::create("sd vae decoder", file, {top + "decoder.", top + "post_quant_conv."}, placement));
  d->file_ = std::move(file);
  return d;
}

Result<std::vector<float>> VaeDecoder::decode_raw(std::span<const float> vae_z, int64_t width,
                                                  int64_t height) {
  return run_on_planes(*net_, vae_z, width, height, 4, body());
}

Result<size_t> VaeDecoder::graph_bytes(int64_t width, int64_t height) {
  return planes_graph_bytes(width, height, 4, body());
}

GridBody VaeDecoder::body() const {
  return [this](Graph& g, Tensor grid) { return sd::vae_decoder_graph(g, weights_, grid); };
}

}  // namespace kiln::diffusion
