// Writes ggml_avx512_golden.json (read by tests/quant/ggml_golden_test.cpp): inputs and the outputs
// of the reference build's own kernels (libggml-cpu-zen4.so, the AVX-512 variant in node-llama-cpp
// 3.22.1's prebuilt CPU backend), loaded with dlopen. Not part of the build; needs an AVX-512 CPU.
// The weight repacking below restates ggml's make_block_q4_0x8 / make_block_q4_Kx8 (repack.cpp).
//   g++ -std=c++20 -O2 -ffp-contract=off -Isrc -o gen tests/quant/data/gen_ggml_avx512_golden.cpp \
//       src/ops/quant/*.cpp src/core/{half,check,dtype}.cpp -ldl
//   LD_LIBRARY_PATH=<node_modules>/@node-llama-cpp/linux-x64/bins/linux-x64 ./gen > tests/quant/data/ggml_avx512_golden.json
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "ops/quant/kernels.h"
#include "core/half.h"
using namespace kiln; using namespace kiln::quant;
typedef double (*softmax_t)(int, float*, const float*, float);
typedef void (*vdot_t)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
typedef void (*gemv_t)(int, float*, size_t, const void*, const void*, int, int);
typedef void (*qm_t)(const float*, void*, int64_t);
struct Q40x8 { uint16_t d[8]; uint8_t qs[128]; };
struct Q4Kx8 { uint16_t d[8]; uint16_t dmin[8]; uint8_t scales[96]; uint8_t qs[1024]; };
std::string hex(const void* p, size_t n) { std::string s; char b[3]; for (size_t i = 0; i < n; ++i) { snprintf(b, 3, "%02x", ((const uint8_t*)p)[i]); s += b; } return s; }
std::string fbits(float f) { uint32_t u; memcpy(&u, &f, 4); char b[16]; snprintf(b, 16, "%08x", u); return b; }
int main() {
  void* h = dlopen("libggml-cpu-zen4.so", RTLD_NOW);
  ((void (*)())dlsym(h, "ggml_cpu_init"))();
  auto sm = (softmax_t)dlsym(h, "ggml_vec_soft_max_f32");
  auto df32 = (vdot_t)dlsym(h, "ggml_vec_dot_f32");
  auto df16 = (vdot_t)dlsym(h, "ggml_vec_dot_f16");
  auto dq6 = (vdot_t)dlsym(h, "ggml_vec_dot_q6_K_q8_K");
  auto g40 = (gemv_t)dlsym(h, "ggml_gemv_q4_0_8x8_q8_0");
  auto gm40 = (gemv_t)dlsym(h, "ggml_gemm_q4_0_8x8_q8_0");
  auto g4k = (gemv_t)dlsym(h, "ggml_gemv_q4_K_8x8_q8_K");
  auto gm4k = (gemv_t)dlsym(h, "ggml_gemm_q4_K_8x8_q8_K");
  auto qm0 = (qm_t)dlsym(h, "ggml_quantize_mat_q8_0_4x8");
  auto qmk = (qm_t)dlsym(h, "ggml_quantize_mat_q8_K_4x8");
  std::mt19937 rng(7); std::normal_distribution<float> nd(0, 1);
  printf("{\"source\": \"libggml-cpu-zen4.so of node-llama-cpp 3.22.1 (llama.cpp's AVX-512 CPU build), called directly\",\n");
  // expf: x, e (ggml_v_expf through ggml_vec_soft_max_f32 with max 0)
  printf("\"expf\": [");
  for (int c = 0; c < 8; ++c) {
    float x[16], y[16]; for (int i = 0; i < 16; ++i) x[i] = nd(rng) * (c < 6 ? 4.0f * (c + 1) : 40.0f) - (c == 7 ? 80.0f : 0.0f);
    sm(16, y, x, 0.0f);
    for (int i = 0; i < 16; ++i) printf("%s[\"%s\",\"%s\"]", c || i ? "," : "", fbits(x[i]).c_str(), fbits(y[i]).c_str());
  }
  printf("],\n\"dots\": [\n");
  bool first = true;
  auto emit = [&](const char* kind, int n, const std::string& w, const std::string& a, float out) {
    printf("%s{\"kind\":\"%s\",\"n\":%d,\"w\":\"%s\",\"a\":\"%s\",\"out\":\"%s\"}", first ? "" : ",\n", kind, n, w.c_str(), a.c_str(), fbits(out).c_str());
    first = false;
  };
  for (int n : {16, 32, 40, 64, 100, 256}) {
    std::vector<float> a(n), b(n); for (auto& v : a) v = nd(rng); for (auto& v : b) v = nd(rng);
    float s; df32(n, &s, 0, a.data(), 0, b.data(), 0, 1); emit("f32", n, hex(a.data(), 4 * n), hex(b.data(), 4 * n), s);
    std::vector<uint16_t> ah(n), bh(n); for (int i = 0; i < n; ++i) { ah[i] = f32_to_f16(a[i]); bh[i] = f32_to_f16(b[i]); }
    df16(n, &s, 0, ah.data(), 0, bh.data(), 0, 1); emit("f16", n, hex(ah.data(), 2 * n), hex(bh.data(), 2 * n), s);
  }
  for (int nb : {1, 3}) {
    const int n = 256 * nb, nb0 = n / 32;
    std::vector<float> w(8 * n), a(4 * n); for (auto& v : w) v = nd(rng) * 0.02f; for (auto& v : a) v = nd(rng);
    // Q6_K vec_dot
    std::vector<BlockQ6_K> q6(nb); quantize_row_q6_K_ref(w.data(), q6.data(), n);
    std::vector<BlockQ8_K> a8(nb); quantize_row_q8_K_ref(a.data(), a8.data(), n);
    float s; dq6(n, &s, 0, q6.data(), 0, a8.data(), 0, 1); emit("q6_K", n, hex(q6.data(), sizeof(BlockQ6_K) * nb), hex(a8.data(), sizeof(BlockQ8_K) * nb), s);
    // Q4_0: 8 weight rows, 4 activation rows (gemm) and 1 (gemv)
    std::vector<BlockQ4_0> w40(8 * nb0); for (int r = 0; r < 8; ++r) quantize_row_q4_0_ref(w.data() + r * n, w40.data() + r * nb0, n);
    std::vector<Q40x8> rp(nb0);
    for (int x = 0; x < nb0; ++x) {
      for (int i = 0; i < 8; ++i) rp[x].d[i] = w40[i * nb0 + x].d;
      for (int i = 0; i < 16; ++i) { uint64_t e; memcpy(&e, &w40[(i % 8) * nb0 + x].qs[(i / 8) * 8], 8); e ^= 0x8888888888888888ULL; memcpy(&rp[x].qs[i * 8], &e, 8); }
    }
    std::vector<uint8_t> aq(4 * nb0 * 34); qm0(a.data(), aq.data(), n);
    float o4[32]; gm40(n, o4, 8, rp.data(), aq.data(), 4, 8);
    std::vector<BlockQ8_0> a80(nb0); quantize_row_q8_0_x86(a.data(), a80.data(), n);  // row 0
    float o1[8]; g40(n, o1, 8, rp.data(), a80.data(), 1, 8);
    for (int r = 0; r < 8; r += 3) {
      emit("q4_0_gemv", n, hex(w40.data() + r * nb0, 18 * nb0), hex(a80.data(), 34 * nb0), o1[r]);
      emit("q4_0_gemm", n, hex(w40.data() + r * nb0, 18 * nb0), hex(a80.data(), 34 * nb0), o4[r]);  // activation row 0
    }
    // Q4_K
    std::vector<BlockQ4_K> w4k(8 * nb); for (int r = 0; r < 8; ++r) quantize_row_q4_K_ref(w.data() + r * n, w4k.data() + r * nb, n);
    std::vector<Q4Kx8> rk(nb);
    for (int x = 0; x < nb; ++x) {
      BlockQ4_K in[8]; for (int i = 0; i < 8; ++i) in[i] = w4k[i * nb + x];
      Q4Kx8& o = rk[x];
      for (int i = 0; i < 8; ++i) { o.d[i] = in[i].d; o.dmin[i] = in[i].dmin; }
      for (int i = 0; i < 128; ++i) memcpy(&o.qs[i * 8], &in[i % 8].qs[(i / 8) * 8], 8);
      uint8_t sv[8], m[8];
      for (int half = 0; half < 2; ++half) for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 8; j++) {
          if (!half) { sv[j] = in[j].scales[i] & 63; m[j] = in[j].scales[i + 4] & 63; }
          else { sv[j] = ((in[j].scales[i] & 192) >> 2) | (in[j].scales[i+8] & 15); m[j] = ((in[j].scales[i + 4] & 192) >> 2) | ((in[j].scales[i+8] & 240) >> 4); }
        }
        uint8_t* sc = o.scales + i * 12 + half * 48;
        for (int j = 0; j < 4; ++j) { sc[j] = (sv[j] & 63) + ((sv[j + 4] & 48) << 2); sc[4 + j] = (m[j] & 63) + ((m[j + 4] & 48) << 2); sc[8 + j] = (sv[j + 4] & 15) + ((m[j + 4] & 15) << 4); }
      }
    }
    std::vector<uint8_t> akq(4 * nb * 292); qmk(a.data(), akq.data(), n);
    gm4k(n, o4, 8, rk.data(), akq.data(), 4, 8);
    g4k(n, o1, 8, rk.data(), a8.data(), 1, 8);
    for (int r = 0; r < 8; r += 3) {
      emit("q4_K_gemv", n, hex(w4k.data() + r * nb, sizeof(BlockQ4_K) * nb), hex(a8.data(), sizeof(BlockQ8_K) * nb), o1[r]);
      emit("q4_K_gemm", n, hex(w4k.data() + r * nb, sizeof(BlockQ4_K) * nb), hex(a8.data(), sizeof(BlockQ8_K) * nb), o4[r]);
    }
  }
  printf("\n]}\n");
}
