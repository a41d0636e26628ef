#include "diffusion/vae_decoder.h"

#include "diffusion/plane_graph.h"

namespace kiln::diffusion {

Result<std::unique_ptr<VaeDecoder>> VaeDecoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                       const std::string& prefix, const NetworkPlacement& placement) {
  std::unique_ptr<VaeDecoder> d(new VaeDecoder());
  const std::string top = prefix.empty() ? "" : prefix + ".";
  KILN_ASSIGN_OR_RETURN(d->net_, bind_network("sd vae decoder", std::move(file), sd::bind_vae_decoder, prefix, {top + "decoder.", top + "post_quant_conv."}, placement));
  return d;
}

Result<std::vector<float>> VaeDecoder::decode_raw(std::span<const float> vae_z, int64_t width,
                                                  int64_t height) {
  return run_on_planes(*net_.net, vae_z, width, height, 4, body());
}

Result<size_t> VaeDecoder::graph_bytes(int64_t width, int64_t height) {
  return planes_graph_bytes(width, height, 4, body());
}

GridBody VaeDecoder::body() const {
  return [this](Graph& g, Tensor grid) { return sd::vae_decoder_graph(g, net_.weights, grid); };
}

}  // namespace kiln::diffusion
