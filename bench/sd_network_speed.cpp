// The time of one evaluation of a Stable Diffusion network on kiln's runtime, for
// bench/compare_sd_cpp.py (its peer is bench/sdcpp_network_peer.cpp, the same inputs through
// stable-diffusion.cpp).
//
//   build/release/sd_network_speed unet|vae FILE SIDE THREADS EVALS [OUT]
//
// unet: the SD 1.x UNet of FILE (a single-file checkpoint's names, model.diffusion_model.*), at a
// SIDE x SIDE image (a SIDE / 8 latent), timestep 500, under one 77-token context. vae: the decode
// of a SIDE / 8 latent by the AutoencoderKL of FILE (a standalone VAE file, decoder.*), whole, as
// stable-diffusion.cpp's decode_first_stage runs it (its scaling and clamp included). Inputs are
// the hashed values of tests/diffusion/oracle_inputs.h, so both programs evaluate the same numbers.
// Prints the load time, then each evaluation's wall time (the first plans the graph and sizes the
// arena; later ones are the steps of a generation), then the output's mean absolute value; OUT, when
// given, receives the last output's floats (raw, native order) for compare_sd_cpp.py to check that
// the two programs agree.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "diffusion/oracle_inputs.h"
#include "diffusion/unet_model.h"
#include "diffusion/vae_decoder.h"
#include "runtime/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s unet|vae FILE SIDE THREADS EVALS [OUT]\n", argv0);
  return 2;
}

// One evaluation of the loaded network on the fixed inputs.
using Evaluation = std::function<kiln::Result<std::vector<float>>()>;

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 6 && argc != 7) return usage(argv[0]);
  const std::string net = argv[1];
  const int64_t side = std::atoll(argv[3]);
  const int threads = std::atoi(argv[4]);
  const int evals = std::atoi(argv[5]);
  if ((net != "unet" && net != "vae") || side <= 0 || side % 64 != 0 || threads <= 0 || evals <= 0)
    return usage(argv[0]);

  const auto t_load = Clock::now();
  auto opened = sd::SdWeightFile::open(argv[2]);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.error().message.c_str());
    return 1;
  }
  std::shared_ptr<const sd::SdWeightFile> file = std::move(*opened);
  CpuDevice device;
  ThreadPool pool(threads);
  CpuBackend backend(device, pool);
  const int64_t w = side / 8;  // the latent's side
  std::unique_ptr<diffusion::UnetModel> unet;
  std::unique_ptr<diffusion::VaeDecoder> vae;
  std::vector<float> x, context;
  Evaluation eval;
  if (net == "unet") {
    auto m = diffusion::UnetModel::create(file, sd::kSdUnetPrefix, {}, {&backend});
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.error().message.c_str());
      return 1;
    }
    unet = std::move(*m);
    const auto& hp = unet->hparams();
    x = oracle_inputs::hashed(static_cast<size_t>(hp.in_channels * w * w), 1, 1.5f);
    context = oracle_inputs::hashed(static_cast<size_t>(77 * hp.context_dim), 101, 1.0f);
    eval = [&] { return unet->eval(x, w, w, 500.0f, context); };
  } else {
    auto d = diffusion::VaeDecoder::create(file, "", {&backend});
    if (!d.ok()) {
      std::fprintf(stderr, "%s\n", d.error().message.c_str());
      return 1;
    }
    vae = std::move(*d);
    x = oracle_inputs::hashed(static_cast<size_t>(4 * w * w), 11, 1.5f);
    eval = [&] { return vae->decode(x, w, w); };
  }
  std::printf("load_ms %.1f\n", ms_since(t_load));

  double mean_abs = 0;
  std::vector<float> last;
  for (int e = 0; e < evals; ++e) {
    const auto t0 = Clock::now();
    auto out = eval();
    const double ms = ms_since(t0);
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.error().message.c_str());
      return 1;
    }
    std::printf("eval_ms %.1f\n", ms);
    mean_abs = 0;
    for (float v : *out) mean_abs += std::fabs(v);
    mean_abs /= static_cast<double>(out->size());
    last = std::move(*out);
  }
  std::printf("mean_abs %.9f\n", mean_abs);
  if (argc == 7) {
    FILE* f = std::fopen(argv[6], "wb");
    if (!f || std::fwrite(last.data(), sizeof(float), last.size(), f) != last.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", argv[6]);
      return 1;
    }
  }
  return 0;
}
