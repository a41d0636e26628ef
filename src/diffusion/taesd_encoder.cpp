#include "diffusion/taesd_encoder.h"

#include "diffusion/plane_graph.h"

namespace kiln::diffusion {

Result<std::unique_ptr<TaesdEncoder>> TaesdEncoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                           const std::string& prefix, const NetworkPlacement& placement) {
  std::unique_ptr<TaesdEncoder> e(new TaesdEncoder());
  KILN_ASSIGN_OR_RETURN(e->net_, bind_network("taesd encoder", std::move(file), sd::bind_taesd_encoder, prefix, {prefix + "."}, placement));
  return e;
}

Result<std::vector<float>> TaesdEncoder::encode(std::span<const float> image, int64_t width, int64_t height) {
  if (width % 8 != 0 || height % 8 != 0)
    return make_error("taesd encoder: an image of ", width, " x ", height,
                      ": each side must be a multiple of 8");
  const GridBody body = [this](Graph& g, Tensor grid) { return sd::taesd_encoder_graph(g, net_.weights, grid); };
  return run_on_planes(*net_.net, image, width, height, 3, body);
}

}  // namespace kiln::diffusion
