// Writes ggml_iq4_xs_golden.json (read by tests/quant/ggml_golden_test.cpp): IQ4_XS inputs and the
// outputs of llama.cpp's own functions in node-llama-cpp 3.22.1's prebuilt CPU backend, loaded with
// dlopen. Not part of the build; runs on any AVX2 CPU:
//   - quantize_iq4_xs (with and without importance weights), quantize_row_iq4_xs_ref and
//     dequantize_row_iq4_xs from libggml-base.so (plain C, the same on every CPU variant);
//   - ggml_vec_dot_iq4_xs_q8_K from libggml-cpu-haswell.so. Its AVX2 branch is the code the AVX-512
//     variants (zen4, the reference build of ggml_avx512_golden.json) compile as well: quants.c has
//     no AVX-512 branch for this function, and its arithmetic is explicit intrinsics.
//   g++ -std=c++20 -O2 -o gen tests/quant/data/gen_ggml_iq4_xs_golden.cpp -ldl
//   LD_LIBRARY_PATH=<node_modules>/@node-llama-cpp/linux-x64/bins/linux-x64 ./gen > tests/quant/data/ggml_iq4_xs_golden.json
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

typedef size_t (*quant_t)(const float*, void*, int64_t, int64_t, const float*);
typedef void (*qrow_t)(const float*, void*, int64_t);
typedef void (*deq_t)(const void*, float*, int64_t);
typedef void (*vdot_t)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
constexpr size_t kIQ4XS = 136, kQ8K = 292;

std::string hex(const void* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, 3, "%02x", static_cast<const uint8_t*>(p)[i]);
    s += b;
  }
  return s;
}
std::string fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  char b[16];
  snprintf(b, 16, "%08x", u);
  return b;
}

int main() {
  void* base = dlopen("libggml-base.so", RTLD_NOW | RTLD_GLOBAL);
  void* cpu = dlopen("libggml-cpu-haswell.so", RTLD_NOW);
  if (!base || !cpu) return fprintf(stderr, "%s\n", dlerror()), 1;
  reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))();
  auto quant = reinterpret_cast<quant_t>(dlsym(base, "quantize_iq4_xs"));
  auto qref = reinterpret_cast<qrow_t>(dlsym(base, "quantize_row_iq4_xs_ref"));
  auto deq = reinterpret_cast<deq_t>(dlsym(base, "dequantize_row_iq4_xs"));
  auto q8k = reinterpret_cast<qrow_t>(dlsym(base, "quantize_row_q8_K_ref"));
  auto dot = reinterpret_cast<vdot_t>(dlsym(cpu, "ggml_vec_dot_iq4_xs_q8_K"));
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_real_distribution<float> ud(0.1f, 3.0f);
  printf("{\"source\": \"libggml-base.so and libggml-cpu-haswell.so of node-llama-cpp 3.22.1, called directly\",\n");
  printf("\"quantize\": [\n");
  // Cases: 0-3 normal rows of 1 or 2 super-blocks at scales 0.01..10; 4: an all-zero super-block
  // before a normal one; 5: one zero sub-block and one outlier; 6: tiny values near
  // GROUP_MAX_EPS; 7: all values equal.
  bool first = true;
  std::vector<std::vector<uint8_t>> weights;
  for (int c = 0; c < 8; ++c) {
    const int nb = c == 0 || c == 2 ? 1 : 2, n = 256 * nb;
    std::vector<float> x(n), qw(n);
    const float scale = c < 4 ? std::pow(10.0f, static_cast<float>(c) - 2) : 0.05f;
    for (auto& v : x) v = nd(rng) * scale;
    for (auto& v : qw) v = ud(rng);
    if (c == 4) std::fill(x.begin(), x.begin() + 256, 0.0f);
    if (c == 5) {
      std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
      x[300] = 4.0f;
    }
    if (c == 6) for (auto& v : x) v *= 1e-14f;
    if (c == 7) std::fill(x.begin(), x.end(), 0.25f);
    std::vector<uint8_t> q(nb * kIQ4XS), qi(nb * kIQ4XS), qr(nb * kIQ4XS);
    quant(x.data(), q.data(), 1, n, nullptr);
    quant(x.data(), qi.data(), 1, n, qw.data());
    qref(x.data(), qr.data(), n);
    std::vector<float> y(n);
    deq(qi.data(), y.data(), n);
    printf("%s{\"n\":%d,\"x\":\"%s\",\"qw\":\"%s\",\"q\":\"%s\",\"q_imatrix\":\"%s\",\"q_ref\":\"%s\",\"deq_imatrix\":\"%s\"}",
           first ? "" : ",\n", n, hex(x.data(), 4 * n).c_str(), hex(qw.data(), 4 * n).c_str(), hex(q.data(), q.size()).c_str(),
           hex(qi.data(), qi.size()).c_str(), hex(qr.data(), qr.size()).c_str(), hex(y.data(), 4 * n).c_str());
    first = false;
    if (c < 4) weights.push_back(q);
  }
  printf("],\n\"dots\": [\n");
  first = true;
  for (const auto& w : weights) {
    const int nb = static_cast<int>(w.size() / kIQ4XS), n = 256 * nb;
    for (int r = 0; r < 2; ++r) {
      std::vector<float> a(n);
      for (auto& v : a) v = nd(rng) * (r ? 30.0f : 1.0f);
      std::vector<uint8_t> a8(nb * kQ8K);
      q8k(a.data(), a8.data(), n);
      float s;
      dot(n, &s, 0, w.data(), 0, a8.data(), 0, 1);
      printf("%s{\"n\":%d,\"w\":\"%s\",\"a\":\"%s\",\"out\":\"%s\"}", first ? "" : ",\n", n, hex(w.data(), w.size()).c_str(),
             hex(a8.data(), a8.size()).c_str(), fbits(s).c_str());
      first = false;
    }
  }
  printf("]}\n");
  return 0;
}
