#version 450
// Attention: dst [d_v, n_q, h, s] = softmax(q k^T * scale + slope * mask) v with the online softmax
// of the CPU's flash path (ops/attention.cpp, ggml's one-chunk kernel), whatever params.attn_path.
// One workgroup per query row of one head; thread t scores key c + t of each chunk of 64 keys and
// owns output values t, t + 64, ...
// Query head h reads K/V head h / (h_q / h_kv); sequences broadcast as ggml's (dim 3).
// K of type KTYPE (any deq32 type), V of type VTYPE (f32, f16, q8_0, q4_0); head sizes <= 256.
// Masking: src3 (F32/F16 [n_kv, >= n_q, a | h, b | s]) when i[2] != 0; else, when i[3] != 0
// (causal), query i sees keys j <= i[4] + i; else every key. Params: f = {scale, m0, m1} and
// i = {n_head_log2, alibi (0/1), has mask, causal, q_pos0} (ALiBi slopes as SoftMax's). Queries are
// rounded to K's vec_dot type first, as the CPU rounds them (ACT_*, act_round.glsl).
#include "common.glsl"
#include "dequant.glsl"
#include "act_round.glsl"

#define WG 64
#define DMAX 256
layout(local_size_x = WG) in;
shared float q_sh[DMAX];
shared float s_sh[WG];

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define KDEQ32 CAT(deq32_, KTYPE)

float v_at(uint64_t row, uint i) {
#if defined(VTYPE_F32)
  return F32s(row + 4 * uint64_t(i)).v[0];
#elif defined(VTYPE_F16)
  return float(F16s(row + 2 * uint64_t(i)).v[0]);
#elif defined(VTYPE_Q8_0)
  uint64_t b = row + 34 * uint64_t(i / 32);
  return half_at(b) * float(I8s(b + 2 + i % 32).v[0]);
#elif defined(VTYPE_Q4_0)
  uint64_t b = row + 18 * uint64_t(i / 32);
  uint j = i % 32, q = byte_at(b + 2 + j % 16);
  return half_at(b) * (float(j < 16 ? q & 15u : q >> 4) - 8.0);
#endif
}

void main() {
  TensorDesc dst = pc.p.t[0], q = pc.p.t[1], k = pc.p.t[2], v = pc.p.t[3], m = pc.p.t[4];
  uint g = wg_index();
  uint n_q = q.ne[1], n_head = q.ne[2];
  if (g >= n_q * n_head * q.ne[3]) return;
  uint iq = g % n_q, h = (g / n_q) % n_head, s = g / (n_q * n_head);
  uint hk = h / (n_head / k.ne[2]), sk = s / (q.ne[3] / k.ne[3]);
  uint hv = h / (n_head / v.ne[2]), sv = s / (q.ne[3] / v.ne[3]);
  uint dk = q.ne[0], dv = v.ne[0], n_kv = k.ne[1], tid = gl_LocalInvocationID.x;
  uint64_t qrow = row_addr(q, iq, h, s);
  for (uint i = tid; i < dk; i += WG) q_sh[i] = F32s(qrow + uint64_t(i) * q.nb[0]).v[0];
  barrier();
  if (32 * tid < dk) {
    float x[32];
    for (uint j = 0; j < 32; ++j) x[j] = 32 * tid + j < dk ? q_sh[32 * tid + j] : 0.0;
    round_act32(x, 0ul, 0u, tid);
    for (uint j = 0; j < 32 && 32 * tid + j < dk; ++j) q_sh[32 * tid + j] = x[j];
  }
  barrier();
  bool has_mask = pc.p.i[2] != 0, causal = pc.p.i[3] != 0;
  uint64_t mrow = has_mask ? row_addr(m, iq, h % m.ne[2], s % m.ne[3]) : 0ul;
  float slope = 1.0;
  if (pc.p.i[1] != 0) {
    uint nl2 = uint(pc.p.i[0]);
    slope = h < nl2 ? pow(pc.p.f[1], float(h + 1)) : pow(pc.p.f[2], float(2 * (h - nl2) + 1));
  }
  const float NEG_INF = -1.0 / 0.0;
  float M = NEG_INF, S = 0.0;
  float o[DMAX / WG];
  for (uint i = 0; i < DMAX / WG; ++i) o[i] = 0.0;
  for (uint c = 0; c < n_kv; c += WG) {
    // The chunk's scores in parallel (-inf: a key not seen)...
    uint j = c + tid;
    float score = NEG_INF;
    bool visible = j < n_kv && (has_mask || !causal || j <= uint(pc.p.i[4]) + iq);
    float mv = 0.0;
    if (visible && has_mask) {
      mv = slope * load_float(m.type, mrow + uint64_t(j) * m.nb[0]);
      visible = mv != NEG_INF;
    }
    if (visible) {
      uint64_t krow = row_addr(k, j, hk, sk);
      float dot_ = 0.0;
      for (uint u = 0; u < (dk + 31) / 32; ++u) {
        float w[32];
        KDEQ32(krow, u, dk, w);
        for (uint jj = 0; jj < 32 && 32 * u + jj < dk; ++jj) dot_ += w[jj] * q_sh[32 * u + jj];
      }
      score = dot_ * pc.p.f[0] + mv;
    }
    s_sh[tid] = score;
    barrier();
    // ...then the keys in order, as the CPU's one-chunk flash path takes them: a new maximum
    // rescales the accumulator and S by e^(M_old - M), another key weighs e^(s - M); an F16 V's
    // accumulator is rounded to F16 after each step (ggml_vec_scale_f16, ggml_vec_mad_f16). Every
    // thread keeps the same M and S.
    uint n_in = min(uint(WG), n_kv - c);
    for (uint jj = 0; jj < n_in; ++jj) {
      float s = s_sh[jj];
      if (s == NEG_INF) continue;
      float ms = 1.0, vs = 1.0;
      if (s > M) {
        ms = exp(M - s);
        M = s;
      } else {
        vs = exp(s - M);
      }
      uint64_t vrow = row_addr(v, c + jj, hv, sv);
      for (uint i = 0; i < DMAX / WG; ++i) {
        uint e = tid + i * WG;
        if (e >= dv) break;
#ifdef VTYPE_F16
        if (ms != 1.0) o[i] = float(float16_t(o[i] * ms));
        o[i] = float(float16_t(fma(v_at(vrow, e), vs, o[i])));
#else
        if (ms != 1.0) o[i] *= ms;
        o[i] = fma(v_at(vrow, e), vs, o[i]);
#endif
      }
      S = S * ms + vs;
    }
    barrier();
  }
  float inv = S == 0.0 ? 0.0 : 1.0 / S;
  for (uint i = 0; i < DMAX / WG; ++i) {
    uint e = tid + i * WG;
    if (e < dv) F32s(dst.addr + elem_offset(dst, e, iq, h, s)).v[0] = o[i] * inv;
  }
}
