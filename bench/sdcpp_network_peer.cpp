// stable-diffusion.cpp's side of bench/compare_sd_cpp.py: the evaluations bench/sd_network_speed.cpp
// times in kiln, timed the same way in stable-diffusion.cpp on ggml's CPU backend with its runners'
// defaults (flash attention off, im2col convolutions): UNetModelRunner::compute, and
// AutoEncoderKL::decode of a --vae file; and the conversion of a file to a GGUF of one weight type
// through its `convert` (so that both programs read the same F16 or Q8_0 bytes). Built by
// compare_sd_cpp.py against a stable-diffusion.cpp build; never in CI.
//
//   sdcpp_network_peer unet|vae FILE SIDE THREADS EVALS [OUT]  (prints load_ms, eval_ms per
//       evaluation and mean_abs; OUT: the last output's floats)
//   sdcpp_network_peer convert IN OUT TYPE  (TYPE: f16, q8_0 or q4_0; stable-diffusion.cpp's rules for
//       which tensors keep a wider type)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "ggml-cpu.h"
#include "model/diffusion/unet.hpp"
#include "model/vae/auto_encoder_kl.hpp"
#include "model_loader.h"
#include "model_manager.h"
#include "stable-diffusion.h"

#include "diffusion/oracle_inputs.h"  // kiln's tests/: the inputs sd_network_speed.cpp evaluates

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s unet|vae FILE SIDE THREADS EVALS [OUT] | convert IN OUT f16|q8_0|q4_0\n", argv0);
  return 2;
}

int convert_file(const char* in, const char* out, const std::string& type) {
  const sd_type_t t = type == "f16"    ? SD_TYPE_F16
                      : type == "q8_0" ? SD_TYPE_Q8_0
                      : type == "q4_0" ? SD_TYPE_Q4_0
                                       : SD_TYPE_COUNT;
  if (t == SD_TYPE_COUNT) return 2;
  return convert(in, "", out, t, "", false) ? 0 : 1;
}

// Writes `out`'s floats to `path` (when given); 1 on a failed write.
int write_floats(const char* path, const std::vector<float>& out) {
  if (!path) return 0;
  FILE* f = std::fopen(path, "wb");
  if (!f || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  return 0;
}

// Times `evals` runs of `eval` (each returning the network's output), prints them and the last
// output's mean |value|, writes it to out_path, and ends the process.
template <class Eval>
[[noreturn]] void time_evals(int evals, const char* out_path, Eval eval) {
  std::vector<float> out;
  for (int e = 0; e < evals; ++e) {
    const auto t0 = Clock::now();
    out = eval();
    std::printf("eval_ms %.1f\n", ms_since(t0));
  }
  double mean_abs = 0;
  for (float v : out) mean_abs += std::fabs(v);
  std::printf("mean_abs %.9f\n", mean_abs / static_cast<double>(out.size()));
  std::fflush(stdout);
  const int rc = write_floats(out_path, out);
  std::_Exit(rc);  // as the oracles: this version's teardown crashes after the work is done
}

bool load_params(ModelManager& manager, const char* what, std::map<std::string, ggml_tensor*>& tensors,
                 ggml_backend_t cpu) {
  if (!manager.register_param_tensors(what, tensors, ModelManager::ResidencyMode::ParamBackend, cpu, cpu) ||
      !manager.validate_registered_tensors() || !manager.load_all_params_eagerly()) {
    std::fprintf(stderr, "loading the %s failed\n", what);
    return false;
  }
  return true;
}

int time_network(const std::string& net, const char* path, int side, int threads, int evals, const char* out_path) {
  const auto t_load = Clock::now();
  auto manager = std::make_shared<ModelManager>();
  manager->set_n_threads(threads);
  ModelLoader& loader = manager->loader();
  // --vae files load under "vae." (as stable-diffusion.cpp loads --vae), the UNet as it is.
  if (!loader.init_from_file(path, net == "vae" ? "vae." : "")) return 1;
  loader.convert_tensors_name();
  ggml_backend_t cpu = ggml_backend_cpu_init();
  const int w = side / 8;
  std::map<std::string, ggml_tensor*> tensors;
  if (net == "unet") {
    const std::string prefix = "model.diffusion_model";
    auto unet =
        std::make_shared<UNetModelRunner>(cpu, loader.get_tensor_storage_map(), prefix, VERSION_SD1, manager);
    unet->get_param_tensors(tensors, prefix);
    if (!load_params(*manager, "UNet", tensors, cpu)) return 1;
    std::printf("load_ms %.1f\n", ms_since(t_load));
    sd::Tensor<float> x({w, w, 4, 1});
    for (size_t i = 0; i < x.values().size(); ++i) x.values()[i] = oracle_inputs::hashed_input(i, 1) * 1.5f;
    sd::Tensor<float> context({768, 77, 1});
    for (size_t i = 0; i < context.values().size(); ++i) context.values()[i] = oracle_inputs::hashed_input(i, 101);
    const auto t = sd::Tensor<float>::from_vector({500.0f});
    time_evals(evals, out_path, [&] { return unet->compute(threads, x, t, context).values(); });
  }
  auto vae = std::make_shared<AutoEncoderKL>(cpu, loader.get_tensor_storage_map(), "first_stage_model", false, false,
                                             VERSION_SD1, manager);
  vae->get_param_tensors(tensors);
  if (!load_params(*manager, "VAE", tensors, cpu)) return 1;
  std::printf("load_ms %.1f\n", ms_since(t_load));
  sd::Tensor<float> z({w, w, 4, 1});
  for (size_t i = 0; i < z.values().size(); ++i) z.values()[i] = oracle_inputs::hashed_input(i, 11) * 1.5f;
  const sd::Tensor<float> latents = vae->diffusion_to_vae_latents(z);
  sd_tiling_params_t whole{};
  time_evals(evals, out_path, [&] { return vae->decode(threads, latents, whole).values(); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "convert") == 0) return convert_file(argv[2], argv[3], argv[4]);
  if ((argc == 6 || argc == 7) && (std::strcmp(argv[1], "unet") == 0 || std::strcmp(argv[1], "vae") == 0)) {
    const int side = std::atoi(argv[3]), threads = std::atoi(argv[4]), evals = std::atoi(argv[5]);
    if (side <= 0 || side % 64 != 0 || threads <= 0 || evals <= 0) return usage(argv[0]);
    return time_network(argv[1], argv[2], side, threads, evals, argc == 7 ? argv[6] : nullptr);
  }
  return usage(argv[0]);
}
