#include "diffusion/unet_model.h"

namespace kiln::diffusion {

Result<std::unique_ptr<UnetModel>> UnetModel::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                     const std::string& prefix, const sd::UnetArch& arch,
                                                     const NetworkPlacement& placement) {
  std::unique_ptr<UnetModel> m(new UnetModel());
  KILN_ASSIGN_OR_RETURN(m->weights_, sd::bind_unet(file->gguf(), prefix, arch));
  KILN_ASSIGN_OR_RETURN(
      m->net_, DeviceNetwork::create("sd unet", file, {prefix + "."},
                                     placement));
  m->file_ = std::move(file);
  return m;
}

Result<std::vector<float>> UnetModel::eval(std::span<const float> x, int64_t width, int64_t height,
                                           float timestep, std::span<const float> context) {
  const sd::UnetHParams& hp = weights_.hp;
  // Three halvings (stride-2 convs, then x2 upsamples) must come back to the same size.
  if (width < 8 || height < 8 || width % 8 != 0 || height % 8 != 0 || width > 16384 || height > 16384)
    return make_error("sd unet: a latent of ", width, " x ", height,
                      ": each side must be a multiple of 8 in [8, 16384]");
  const int64_t plane = width * height;
  if (static_cast<int64_t>(x.size()) != hp.in_channels * plane)
    return make_error("sd unet: the latent holds ", x.size(), " floats, not ", hp.in_channels, " x ", width,
                      " x ", height);
  if (context.empty() || static_cast<int64_t>(context.size()) % hp.context_dim != 0)
    return make_error("sd unet: the conditioning holds ", context.size(), " floats, not rows of ",
                      hp.context_dim);
  const int64_t n_ctx = static_cast<int64_t>(context.size()) / hp.context_dim;

  Graph g;
  const Tensor in_x = g.input("x", DType::F32, {width, height, hp.in_channels, 1});
  const Tensor in_t = g.input("t_emb", DType::F32, {hp.model_channels, 1, 1, 1});
  const Tensor in_c = g.input("context", DType::F32, {hp.context_dim, n_ctx, 1, 1});
  const Tensor grid = g.cast(g.permute(in_x, {1, 2, 0, 3}), DType::F32, "x_grid");  // [c, w, h, 1]
  const Tensor eps = sd::unet_graph(g, weights_, grid, in_t, in_c);
  const Tensor out = g.cast(g.permute(eps, {2, 0, 1, 3}), DType::F32, "out_planes");  // [w, h, c, 1]
  g.mark_output(out);
  std::vector<float> t_emb = sd::timestep_embedding(timestep, hp.model_channels);
  std::vector<float> host_x(x.begin(), x.end()), host_c(context.begin(), context.end());
  const PassInput inputs[] = {{in_x, host_x.data()}, {in_t, t_emb.data()}, {in_c, host_c.data()}};
  return net_->run(g, inputs, out);
}

}  // namespace kiln::diffusion
