#include "diffusion/taesd_decoder.h"

#include "core/check.h"

namespace kiln::diffusion {

Result<std::unique_ptr<TaesdDecoder>> TaesdDecoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                           const std::string& prefix,
                                                           const NetworkPlacement& placement) {
  std::unique_ptr<TaesdDecoder> d(new TaesdDecoder());
  KILN_ASSIGN_OR_RETURN(d->weights_, sd::bind_taesd_decoder(file->gguf(), prefix));
  KILN_ASSIGN_OR_RETURN(
      d->net_, DeviceNetwork::create("taesd decoder", std::shared_ptr<const GgufFile>(file, &file->gguf()),
                                     prefix, placement));
  d->file_ = std::move(file);
  return d;
}

Result<std::vector<float>> TaesdDecoder::decode(std::span<const float> z, int64_t width, int64_t height) {
  if (width < 1 || height < 1 || width > 2048 || height > 2048)
    return make_error("taesd decoder: a latent of ", width, " x ", height,
                      ": each side must be in [1, 2048]");
  if (static_cast<int64_t>(z.size()) != 4 * width * height)
    return make_error("taesd decoder: the latent holds ", z.size(), " floats, not 4 x ", width, " x ",
                      height);
  Graph g;
  const Tensor in = g.input("z", DType::F32, {width, height, 4, 1});
  const Tensor grid = g.cast(g.permute(in, {1, 2, 0, 3}), DType::F32, "z_grid");  // [4, w, h, 1]
  const Tensor rgb = sd::taesd_decoder_graph(g, weights_, grid);
  const Tensor out = g.cast(g.permute(rgb, {2, 0, 1, 3}), DType::F32, "rgb_planes");  // [8w, 8h, 3, 1]
  g.mark_output(out);
  std::vector<float> host_z(z.begin(), z.end());
  const PassInput inputs[] = {{in, host_z.data()}};
  return net_->run(g, inputs, out);
}

std::vector<uint8_t> rgb_planes_to_pixels(std::span<const float> planes, int64_t width, int64_t height) {
  const size_t n = static_cast<size_t>(width * height);
  KILN_ASSERT(planes.size() == 3 * n, "rgb_planes_to_pixels: not 3 planes of width * height floats");
  std::vector<uint8_t> pixels(n * 3);
  for (size_t c = 0; c < 3; ++c) {
    for (size_t i = 0; i < n; ++i) {
      const float v = planes[c * n + i];
      pixels[i * 3 + c] = v <= 0.0f ? 0 : v >= 1.0f ? 255 : static_cast<uint8_t>(v * 255.0f + 0.5f);
    }
  }
  return pixels;
}

}  // namespace kiln::diffusion
