#include "diffusion/taesd_decoder.h"

namespace kiln::diffusion {

Result<std::unique_ptr<TaesdDecoder>> TaesdDecoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                           const std::string& prefix, const NetworkPlacement& placement) {
  std::unique_ptr<TaesdDecoder> d(new TaesdDecoder());
  KILN_ASSIGN_OR_RETURN(d->net_, bind_network("taesd decoder", std::move(file), sd::bind_taesd_decoder, prefix, {prefix + "."}, placement));
  return d;
}

Result<std::vector<float>> TaesdDecoder::decode_raw(std::span<const float> z, int64_t width, int64_t height) {
  return run_on_planes(*net_.net, z, width, height, 4, body());
}

Result<size_t> TaesdDecoder::graph_bytes(int64_t width, int64_t height) {
  return planes_graph_bytes(width, height, 4, body());
}

GridBody TaesdDecoder::body() const {
  return [this](Graph& g, Tensor grid) { return sd::taesd_decoder_graph(g, net_.weights, grid); };
}

}  // namespace kiln::diffusion
