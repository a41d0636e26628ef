#include "diffusion/taesd_decoder.h"

#include "core/check.h"

namespace kiln::diffusion {

Result<std::unique_ptr<TaesdDecoder>> TaesdDecoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                           const std::string& prefix, Backend& backend,
                                                           ComputeArena* arena) {
  Device& dev = backend.device();
  if (!dev.is_host())
    return make_error("taesd decoder: runs on host devices only for now, not on '", dev.name(), "'");
  if (arena != nullptr && &arena->device() != &dev)
    return make_error("taesd decoder: the compute arena '", arena->owner(), "' is on device '",
                      arena->device().name(), "', the backend on '", dev.name(), "'");
  std::unique_ptr<TaesdDecoder> d(new TaesdDecoder());
  KILN_ASSIGN_OR_RETURN(d->weights_, sd::bind_taesd_decoder(file->gguf(), prefix));
  d->file_ = std::move(file);
  d->backend_ = &backend;
  if (arena == nullptr) {
    d->own_arena_ = std::make_unique<ComputeArena>(dev, "taesd decoder");
    arena = d->own_arena_.get();
  }
  d->arena_ = arena;
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
  KILN_TRY(g.status());
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena_->plan(g));
  KILN_TRY(backend_->prepare(plan));
  std::vector<float> host_z(z.begin(), z.end());
  KILN_TRY(plan.bind(in, contiguous_view(DType::F32, {width, height, 4, 1}, host_z.data())));
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();
  const TensorView v = plan.view(out);
  std::vector<float> result(static_cast<size_t>(v.nelements()));
  KILN_TRY(backend_->device().download(v, result.data(), v.span_bytes()));
  return result;
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
