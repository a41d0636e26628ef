// Attention (plain and flash paths) against a double-precision softmax(q k^T * scale + mask) v,
// with grouped-query heads, K/V as views into a larger cache, F32/F16/Q8_0 caches, masks, ALiBi,
// causal masking without a mask tensor and a permuted [d, h, n_q] output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "op_harness.h"
#include "ops/quant/attention_vec.h"
#include "ops/quant/quant.h"
#include "ops/softmax_row.h"

namespace kiln::test {
namespace {

struct AttnCase {
  std::string name;
  int64_t dk, dv, n_q, n_kv, h, h_kv, seqs;
  DType kv_type;
  int mask;  // 0: none, 1: F32 tensor, 2: F16 tensor
  bool causal;
  int32_t q_pos0;
  float max_bias;
  AttentionPath path;
  double tol;
};

// Reads element (i0, row) of a K/V view (any type with to_float) as double.
double kv_get(const HostTensor& t, const TensorView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
              std::vector<float>& tmp) {
  if (v.type == DType::F32 || v.type == DType::F16) return t.get(i0, i1, i2, i3);
  tmp.resize(static_cast<size_t>(v.ne[0]));
  quant_traits(v.type)->to_float(t.row(i1, i2, i3), tmp.data(), v.ne[0]);
  return tmp[static_cast<size_t>(i0)];
}

void run_case(const AttnCase& c, std::mt19937& rng) {
  SCOPED_TRACE(c.name);
  const int64_t kCacheSlots = c.n_kv + 5;  // K/V are views of the first n_kv slots of a bigger cache
  HostTensor q(DType::F32, {c.dk, c.n_q, c.h, c.seqs}, Layout::Padded);
  const bool quant = info(c.kv_type).quantized;
  const Layout cache_layout = quant ? Layout::Padded : Layout::Permuted;
  HostTensor kc(c.kv_type, {c.dk, kCacheSlots, c.h_kv, c.seqs}, cache_layout);
  HostTensor vc(c.kv_type, {c.dv, kCacheSlots, c.h_kv, c.seqs}, cache_layout);
  HostTensor m(c.mask == 2 ? DType::F16 : DType::F32, {c.n_kv, c.n_q + 3, 1, c.seqs}, Layout::Padded);
  HostTensor d(DType::F32, {c.dv, c.n_q, c.h, c.seqs}, Layout::Permuted);  // memory [dv, h, n_q]
  q.fill_uniform(rng, -1, 1);
  if (quant) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> kv(static_cast<size_t>(c.dk * kCacheSlots * c.h_kv * c.seqs));
    for (float& x : kv) x = dist(rng);
    kc.set_quantized(kv);
    std::vector<float> vv(static_cast<size_t>(c.dv * kCacheSlots * c.h_kv * c.seqs));
    for (float& x : vv) x = dist(rng);
    vc.set_quantized(vv);
  } else {
    kc.fill_uniform(rng, -1, 1);
    vc.fill_uniform(rng, -1, 1);
  }
  m.fill_uniform(rng, -2, 0.5);
  for (int64_t s = 0; s < c.seqs; ++s)
    for (int64_t i = 0; i < c.n_q + 3; ++i)
      for (int64_t j = 0; j < c.n_kv; ++j) {
        if ((j + 2 * i + s) % 3 == 0) m.set(j, i, 0, s, -INFINITY);
      }
  for (int64_t s = 0; s < c.seqs; ++s)  // query 1 of each sequence sees one key only
    for (int64_t j = 0; j < c.n_kv; ++j) m.set(j, 1, 0, s, j == c.n_kv - 1 ? 0.25 : -INFINITY);

  OpParams p;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
  p.max_bias = c.max_bias;
  p.causal = c.causal;
  p.q_pos0 = c.q_pos0;
  p.attn_path = c.path;
  std::vector<const HostTensor*> srcs{&q, &kc, &vc};
  if (c.mask) srcs.push_back(&m);
  OpCall call = make_call(OpKind::Attention, d, srcs, p);
  call.src[1].ne[1] = c.n_kv;
  call.src[2].ne[1] = c.n_kv;
  run_checked(call, d);

  const int64_t n_head_log2 = int64_t{1} << static_cast<int>(std::floor(std::log2(double(c.h))));
  auto slope = [&](int64_t h) {
    if (c.max_bias <= 0) return 1.0;
    const double m0 = std::pow(2.0, -c.max_bias / double(n_head_log2));
    const double m1 = std::pow(2.0, -(c.max_bias / 2.0) / double(n_head_log2));
    return h < n_head_log2 ? std::pow(m0, double(h + 1)) : std::pow(m1, double(2 * (h - n_head_log2) + 1));
  };
  std::vector<float> tmp;
  for (int64_t s = 0; s < c.seqs; ++s) {
    for (int64_t h = 0; h < c.h; ++h) {
      const int64_t hk = h / (c.h / c.h_kv);
      for (int64_t i = 0; i < c.n_q; ++i) {
        std::vector<double> w(static_cast<size_t>(c.n_kv));
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.n_kv; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.dk; ++e)
            dot += q.get(e, i, h, s) * kv_get(kc, call.src[1], e, j, hk, s, tmp);
          double mask = 0;
          if (c.mask) {
            mask = m.get(j, i, 0, s);
          } else if (c.causal && j > c.q_pos0 + i) {
            mask = -INFINITY;
          }
          w[j] = dot * double(p.scale) + slope(h) * mask;
          mx = std::max(mx, w[j]);
        }
        double sum = 0;
        for (double& x : w) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));
        for (int64_t e = 0; e < c.dv; ++e) {
          double want = 0;
          for (int64_t j = 0; j < c.n_kv; ++j) {
            if (sum > 0) want += w[j] / sum * kv_get(vc, call.src[2], e, j, hk, s, tmp);
          }
          const double got = d.get(e, i, h, s);
          ASSERT_NEAR(got, want, c.tol) << "at dim " << e << " query " << i << " head " << h << " seq " << s;
        }
      }
    }
  }
}

TEST(OpsAttention, PlainAndFlashPathsOverCaches) {
  std::mt19937 rng(30);
  const AttentionPath kPlain = AttentionPath::Plain, kFlash = AttentionPath::Flash;
  const AttnCase cases[] = {
      {"f32 plain mask", 64, 64, 5, 9, 4, 2, 1, DType::F32, 1, true, 0, 0.0f, kPlain, 2e-5},
      {"f32 flash mask", 64, 64, 5, 9, 4, 2, 1, DType::F32, 1, true, 0, 0.0f, kFlash, 2e-5},
      {"f16 plain f16 mask", 64, 64, 5, 9, 4, 2, 1, DType::F16, 2, true, 0, 0.0f, kPlain, 2e-3},
      {"f16 flash f16 mask", 64, 64, 5, 9, 4, 2, 1, DType::F16, 2, true, 0, 0.0f, kFlash, 5e-3},
      {"f16 plain causal", 32, 32, 5, 9, 2, 1, 1, DType::F16, 0, true, 4, 0.0f, kPlain, 2e-3},
      {"f16 flash causal", 32, 32, 5, 9, 2, 1, 1, DType::F16, 0, true, 4, 0.0f, kFlash, 5e-3},
      {"f32 plain full", 16, 16, 3, 11, 3, 3, 1, DType::F32, 0, false, 0, 0.0f, kPlain, 2e-5},
      {"f32 flash decode", 128, 128, 1, 13, 8, 2, 1, DType::F32, 0, true, 12, 0.0f, kFlash, 2e-5},
      {"dv != dk alibi plain", 64, 48, 4, 7, 6, 3, 2, DType::F32, 1, true, 0, 8.0f, kPlain, 2e-5},
      {"dv != dk alibi flash", 64, 48, 4, 7, 6, 3, 2, DType::F16, 1, true, 0, 8.0f, kFlash, 5e-3},
      {"q8_0 cache flash", 64, 64, 3, 10, 4, 4, 1, DType::Q8_0, 2, true, 0, 0.0f, kFlash, 2e-2},
      // One query on the plain path (ggml_vec_dot_f32's four accumulators for kq v).
      {"f32 plain decode", 64, 64, 1, 37, 4, 2, 1, DType::F32, 0, true, 36, 0.0f, kPlain, 2e-5},
      // >= 64 queries with K and V of one float type: ggml's tiled flash kernel, tiles of 64 keys.
      {"f16 flash tiled", 32, 32, 70, 150, 2, 1, 1, DType::F16, 2, true, 0, 0.0f, kFlash, 3e-3},
      {"f32 flash tiled causal", 32, 48, 66, 140, 2, 2, 1, DType::F32, 0, true, 74, 0.0f, kFlash, 2e-5},
      // A vision encoder's attention: no mask, every key visible; blocks of 64 queries, the last partial.
      {"f16 flash tiled unmasked", 64, 64, 150, 151, 3, 1, 2, DType::F16, 0, false, 0, 0.0f, kFlash, 3e-3},
      {"f32 flash tiled causal alibi", 32, 32, 65, 70, 2, 2, 1, DType::F32, 0, true, 5, 8.0f, kFlash, 2e-5},
      // SigLIP's 72-value heads: the tiled kernel on AVX2 CPUs (a V row of whole 8-float vectors,
      // the last not a whole 16-value chunk), the one-query kernel with AVX-512.
      {"f16 flash 72-value heads", 72, 72, 130, 131, 2, 1, 1, DType::F16, 0, false, 0, 0.0f, kFlash, 3e-3},
  };
  for (const AttnCase& c : cases) run_case(c, rng);
}

TEST(OpsAttention, FullyMaskedQueryGivesZerosOnBothPaths) {
  for (AttentionPath path : {AttentionPath::Plain, AttentionPath::Flash}) {
    HostTensor q(DType::F32, {8, 2, 1, 1}), k(DType::F16, {8, 3, 1, 1}), v(DType::F16, {8, 3, 1, 1});
    HostTensor m(DType::F32, {3, 2, 1, 1}), d(DType::F32, {8, 2, 1, 1});
    std::mt19937 rng(31);
    q.fill_uniform(rng, -1, 1);
    k.fill_uniform(rng, -1, 1);
    v.fill_uniform(rng, -1, 1);
    for (int64_t j = 0; j < 3; ++j) m.set(j, 1, 0, 0, -INFINITY);
    OpParams p;
    p.attn_path = path;
    run_checked(make_call(OpKind::Attention, d, {&q, &k, &v, &m}, p), d);
    for (int64_t e = 0; e < 8; ++e) EXPECT_EQ(d.get(e, 1), 0.0);
  }
}

// Cells past the visible ones, masked (a KV cache padded to a multiple of 256 cells, as a decode
// step's graph reads it), change no bit of the output on any path: one query, a few, and the
// tiled flash kernel's 64 and more.
TEST(OpsAttention, MaskedPaddingCellsChangeNoBits) {
  std::mt19937 rng(32);
  const int64_t d_head = 32, n_kv = 37, n_pad = 100;
  for (AttentionPath path : {AttentionPath::Plain, AttentionPath::Flash}) {
    for (DType t : {DType::F32, DType::F16}) {
      for (int64_t n_q : {1, 3, 70}) {
        SCOPED_TRACE(std::string(path == AttentionPath::Plain ? "plain " : "flash ") +
                     std::string(dtype_name(t)) + " " + std::to_string(n_q) + " queries");
        HostTensor q(DType::F32, {d_head, n_q, 4, 1});
        HostTensor k(t, {d_head, n_pad, 2, 1}), v(t, {d_head, n_pad, 2, 1});
        q.fill_uniform(rng, -1, 1);
        k.fill_uniform(rng, -1, 1);
        v.fill_uniform(rng, -1, 1);
        HostTensor m_short(DType::F32, {n_kv, n_q, 1, 1}), m_pad(DType::F32, {n_pad, n_q, 1, 1});
        for (int64_t i = 0; i < n_q; ++i) {
          for (int64_t j = 0; j < n_pad; ++j) {
            const bool hidden = j >= n_kv || (j * 7 + i * 3) % 5 == 0;
            const double mv = hidden ? -INFINITY : 0.0;
            m_pad.set(j, i, 0, 0, mv);
            if (j < n_kv) m_short.set(j, i, 0, 0, mv);
          }
        }
        OpParams p;
        p.scale = 0.2f;
        p.attn_path = path;
        HostTensor d_short(DType::F32, {d_head, n_q, 4, 1}), d_pad(DType::F32, {d_head, n_q, 4, 1});
        OpCall call = make_call(OpKind::Attention, d_short, {&q, &k, &v, &m_short}, p);
        call.src[1].ne[1] = call.src[2].ne[1] = n_kv;
        run_checked(call, d_short);
        run_checked(make_call(OpKind::Attention, d_pad, {&q, &k, &v, &m_pad}, p), d_pad);
        int differing = 0;
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t i = 0; i < n_q; ++i)
            for (int64_t e = 0; e < d_head; ++e) {
              const float a = static_cast<float>(d_short.get(e, i, h));
              const float b = static_cast<float>(d_pad.get(e, i, h));
              differing += std::memcmp(&a, &b, sizeof a) != 0;
            }
        EXPECT_EQ(differing, 0) << "outputs that differ once the cache is padded";
      }
    }
  }
}

// The plain path over a batch of query rows, bit for bit as ggml computes it, the row's
// arithmetic written out here key by key: the scores by K's vec_dot (q converted to K's
// vec_dot_type), times scale plus slope * mask; ggml_vec_soft_max_f32; and mul_mat(v, kq) as
// tinyBLAS<16> sums it (key j into lane j % 16 by FMA, in key order, the lanes reduced as
// _mm512_reduce_add_ps). Odd key counts, rows in groups that do not fill, 40- to 160-value heads,
// masks that hide different keys per row and whole rows, ALiBi and grouped heads.
TEST(OpsAttention, PlainPathBatchFollowsGgmlKeyByKey) {
  struct Case {
    int64_t dk, dv, n_q, n_kv;
    DType k_type;
    int mask;  // 0: none, 1: F32 tensor, 2: causal
    float max_bias;
  };
  const Case cases[] = {
      {40, 40, 13, 77, DType::F32, 0, 0.0f},   {40, 40, 100, 37, DType::F32, 1, 0.0f},
      {64, 64, 7, 130, DType::F32, 2, 0.0f},   {80, 80, 20, 53, DType::F32, 0, 0.0f},
      {160, 160, 9, 130, DType::F32, 1, 8.0f}, {24, 40, 11, 19, DType::F32, 0, 0.0f},
      {64, 48, 9, 45, DType::F16, 1, 0.0f},    {64, 64, 8, 33, DType::Q8_0, 0, 0.0f},
  };
  std::mt19937 rng(33);
  for (const Case& c : cases) {
    SCOPED_TRACE("dk " + std::to_string(c.dk) + " n_q " + std::to_string(c.n_q) + " n_kv " +
                 std::to_string(c.n_kv) + " k " + std::string(dtype_name(c.k_type)) + " mask " +
                 std::to_string(c.mask));
    const int64_t h = 2;
    HostTensor q(DType::F32, {c.dk, c.n_q, h, 1}), k(c.k_type, {c.dk, c.n_kv, 1, 1});
    HostTensor v(DType::F32, {c.dv, c.n_kv, 1, 1}), m(DType::F32, {c.n_kv, c.n_q, 1, 1});
    HostTensor d(DType::F32, {c.dv, c.n_q, h, 1});
    q.fill_uniform(rng, -1, 1);
    v.fill_uniform(rng, -1, 1);
    std::vector<float> kv(static_cast<size_t>(c.dk * c.n_kv));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : kv) x = dist(rng);
    if (c.k_type == DType::F32 || c.k_type == DType::F16) {
      for (int64_t j = 0; j < c.n_kv; ++j)
        for (int64_t e = 0; e < c.dk; ++e) k.set(e, j, 0, 0, kv[static_cast<size_t>(j * c.dk + e)]);
    } else {
      k.set_quantized(kv);
    }
    m.fill_uniform(rng, -2, 0.5);
    for (int64_t i = 0; i < c.n_q; ++i)
      for (int64_t j = 0; j < c.n_kv; ++j)
        if ((j * 5 + i * 3) % 4 == 0 || j > c.n_kv - 1 - i % 7 || i == 2) m.set(j, i, 0, 0, -INFINITY);
    OpParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    p.max_bias = c.max_bias;
    p.causal = c.mask == 2;
    p.q_pos0 = 3;
    std::vector<const HostTensor*> srcs{&q, &k, &v};
    if (c.mask == 1) srcs.push_back(&m);
    const OpCall call = make_call(OpKind::Attention, d, srcs, p);
    run_checked(call, d);

    const QuantTraits* kt = quant_traits(c.k_type);
    std::vector<char> q_conv(row_size(kt->vec_dot_type, c.dk));
    int differing = 0;
    for (int64_t hi = 0; hi < h; ++hi) {
      const float slope = ops::AlibiSlopes(c.max_bias, static_cast<uint32_t>(h))(static_cast<uint32_t>(hi));
      for (int64_t i = 0; i < c.n_q; ++i) {
        kt->act_from_float(reinterpret_cast<const float*>(q.row(i, hi)), q_conv.data(), c.dk);
        std::vector<float> w;
        for (int64_t j = 0; j < c.n_kv; ++j) {
          const float mv = c.mask == 1 ? static_cast<float>(m.get(j, i)) : c.mask == 2 && j > 3 + i ? -INFINITY : 0.0f;
          float s;
          kt->vec_dot(c.dk, &s, k.row(j), q_conv.data());
          w.push_back(s * p.scale + slope * mv);
        }
        while (!w.empty() && w.back() == -INFINITY) w.pop_back();  // ggml's padding: no effect
        float max = -INFINITY;
        for (float x : w) max = std::fmax(max, x);
        if (max != -INFINITY) {
          quant::exp_shifted_ggml(static_cast<int64_t>(w.size()), w.data(), max);
          const float inv = static_cast<float>(1.0 / quant::sum_chunks16(static_cast<int64_t>(w.size()), w.data()));
          for (float& x : w) x *= inv;
        } else {
          w.assign(w.size(), 0.0f);
        }
        for (int64_t e = 0; e < c.dv; ++e) {
          float lanes[16] = {};
          for (size_t j = 0; j < w.size(); ++j)
            lanes[j % 16] = std::fma(static_cast<float>(v.get(e, static_cast<int64_t>(j))), w[j], lanes[j % 16]);
          const float want = quant::reduce_add_16(lanes);
          const float got = static_cast<float>(d.get(e, i, hi));
          differing += std::memcmp(&want, &got, sizeof want) != 0;
        }
      }
    }
    EXPECT_EQ(differing, 0) << "outputs that differ from ggml's order";
  }
}

TEST(OpsAttention, RejectsBadShapes) {
  HostTensor q(DType::F32, {8, 2, 3, 1}), k(DType::F16, {8, 4, 2, 1}), v(DType::F16, {8, 4, 2, 1});
  HostTensor d(DType::F32, {8, 2, 3, 1});
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Attention, d, {&q, &k, &v})));  // 3 heads over 2 kv heads
  HostTensor q4(DType::F32, {8, 2, 4, 1}), d4(DType::F32, {8, 2, 4, 1});
  EXPECT_TRUE(kernel_supported(make_call(OpKind::Attention, d4, {&q4, &k, &v})));
  HostTensor short_mask(DType::F32, {3, 2, 1, 1});  // 3 of 4 keys
  EXPECT_FALSE(kernel_supported(make_call(OpKind::Attention, d4, {&q4, &k, &v, &short_mask})));
  HostTensor vq(DType::Q8_0, {32, 4, 2, 1}), kq(DType::F16, {8, 4, 2, 1});
  HostTensor d32(DType::F32, {32, 2, 4, 1});
  OpParams p;
  EXPECT_FALSE(
      kernel_supported(make_call(OpKind::Attention, d32, {&q4, &kq, &vq}, p)));  // plain needs F32/F16 V
  p.attn_path = AttentionPath::Flash;
  EXPECT_TRUE(kernel_supported(make_call(OpKind::Attention, d32, {&q4, &kq, &vq}, p)));
}

}  // namespace
}  // namespace kiln::test
