// Dequantization of weight rows, 32 values at a time, for every weight type kiln runs.
// ref: ggml's block layouts and dequantize_row_* (ggml-quants.c); kiln's scalar references in
// src/ops/quant are the ground truth these agree with.
//
// deq32_T(row, u, k, w): w[j] = value 32 * u + j of the row at device address `row` (k values in
// the row; positions at or past k read as 0, for float rows whose length is not a multiple of 32).
// Quantized rows have k a multiple of their block size. Blocks are 2-byte aligned (every block
// size is even and rows start at even addresses), so halves are read as 16-bit words.

float half_at(uint64_t a) { return unpackHalf2x16(uint(U16s(a).v[0])).x; }
uint byte_at(uint64_t a) { return uint(U8s(a).v[0]); }

void deq32_f32(uint64_t row, uint u, uint k, out float w[32]) {
  for (uint j = 0; j < 32; ++j) {
    uint i = 32 * u + j;
    w[j] = i < k ? F32s(row + 4 * uint64_t(i)).v[0] : 0.0;
  }
}
void deq32_f16(uint64_t row, uint u, uint k, out float w[32]) {
  for (uint j = 0; j < 32; ++j) {
    uint i = 32 * u + j;
    w[j] = i < k ? float(F16s(row + 2 * uint64_t(i)).v[0]) : 0.0;
  }
}
void deq32_bf16(uint64_t row, uint u, uint k, out float w[32]) {
  for (uint j = 0; j < 32; ++j) {
    uint i = 32 * u + j;
    w[j] = i < k ? uintBitsToFloat(uint(U16s(row + 2 * uint64_t(i)).v[0]) << 16) : 0.0;
  }
}

// Q4_0: half d, 16 bytes of nibbles (low: values 0-15, high: 16-31), value = d * (q - 8). 18 bytes.
void deq32_q4_0(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 18 * uint64_t(u);
  float d = half_at(b);
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(b + 2 + j);
    w[j] = d * (float(q & 15u) - 8.0);
    w[j + 16] = d * (float(q >> 4) - 8.0);
  }
}
// Q4_1: half d, half m, 16 bytes of nibbles; value = d * q + m. 20 bytes.
void deq32_q4_1(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 20 * uint64_t(u);
  float d = half_at(b), m = half_at(b + 2);
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(b + 4 + j);
    w[j] = d * float(q & 15u) + m;
    w[j + 16] = d * float(q >> 4) + m;
  }
}
// Q5_0: half d, 32 high bits, 16 bytes of nibbles; value = d * (q - 16). 22 bytes.
void deq32_q5_0(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 22 * uint64_t(u);
  float d = half_at(b);
  uint qh = uint(U16s(b + 2).v[0]) | (uint(U16s(b + 4).v[0]) << 16);
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(b + 6 + j);
    uint h0 = ((qh >> j) << 4) & 16u;
    uint h1 = (qh >> (j + 12)) & 16u;
    w[j] = d * (float((q & 15u) | h0) - 16.0);
    w[j + 16] = d * (float((q >> 4) | h1) - 16.0);
  }
}
// Q5_1: half d, half m, 32 high bits, 16 bytes of nibbles; value = d * q + m. 24 bytes.
void deq32_q5_1(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 24 * uint64_t(u);
  float d = half_at(b), m = half_at(b + 2);
  uint qh = uint(U16s(b + 4).v[0]) | (uint(U16s(b + 6).v[0]) << 16);
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(b + 8 + j);
    uint h0 = ((qh >> j) << 4) & 16u;
    uint h1 = (qh >> (j + 12)) & 16u;
    w[j] = d * float((q & 15u) | h0) + m;
    w[j + 16] = d * float((q >> 4) | h1) + m;
  }
}
// Q8_0: half d, 32 signed bytes; value = d * q. 34 bytes.
void deq32_q8_0(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 34 * uint64_t(u);
  float d = half_at(b);
  for (uint j = 0; j < 32; ++j) w[j] = d * float(I8s(b + 2 + j).v[0]);
}
const float kIq4nlValues[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0,
                                         25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
// IQ4_NL: half d, 16 bytes of nibbles indexing a fixed table of 16 values. 18 bytes.
void deq32_iq4_nl(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 18 * uint64_t(u);
  float d = half_at(b);
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(b + 2 + j);
    w[j] = d * kIq4nlValues[q & 15u];
    w[j + 16] = d * kIq4nlValues[q >> 4];
  }
}

// The K-quants: super-blocks of 256 values; unit u is sub-block s = u % 8 of block u / 8.

// Q4_K/Q5_K's 6-bit scale and min of sub-block s from their 12 scale bytes at sc.
// ref: get_scale_min_k4.
void scale_min_k4(uint s, uint64_t sc, out float scale, out float mn) {
  if (s < 4) {
    scale = float(byte_at(sc + s) & 63u);
    mn = float(byte_at(sc + s + 4) & 63u);
  } else {
    scale = float((byte_at(sc + s + 4) & 15u) | ((byte_at(sc + s - 4) >> 6) << 4));
    mn = float((byte_at(sc + s + 4) >> 4) | ((byte_at(sc + s) >> 6) << 4));
  }
}
// Q4_K: half d, half dmin, 12 scale bytes, 128 bytes of nibbles (sub-blocks 2p, 2p + 1 share
// bytes 32p..32p+31: low then high nibbles); value = d * scale * q - dmin * min. 144 bytes.
void deq32_q4_k(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 144 * uint64_t(u / 8);
  uint s = u % 8;
  float d = half_at(b), dmin = half_at(b + 2), sc, mn;
  scale_min_k4(s, b + 4, sc, mn);
  float a = d * sc, c = dmin * mn;
  uint64_t qs = b + 16 + 32 * (s / 2);
  uint shift = 4 * (s % 2);
  for (uint j = 0; j < 32; ++j) w[j] = a * float((byte_at(qs + j) >> shift) & 15u) - c;
}
// Q5_K: half d, half dmin, 12 scale bytes, 32 bytes of high bits (bit s of byte j: value j of
// sub-block s), 128 bytes of nibbles as Q4_K's. 176 bytes.
void deq32_q5_k(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 176 * uint64_t(u / 8);
  uint s = u % 8;
  float d = half_at(b), dmin = half_at(b + 2), sc, mn;
  scale_min_k4(s, b + 4, sc, mn);
  float a = d * sc, c = dmin * mn;
  uint64_t qh = b + 16, qs = b + 48 + 32 * (s / 2);
  uint shift = 4 * (s % 2);
  for (uint j = 0; j < 32; ++j) {
    uint q = ((byte_at(qs + j) >> shift) & 15u) | (((byte_at(qh + j) >> s) & 1u) << 4);
    w[j] = a * float(q) - c;
  }
}
// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 signed scales, half d; value =
// d * scale * (q - 32). Halves of 128 values; in a half, quarter r reads low bytes l (r even) or
// l + 32 (r odd), low (r < 2) or high nibbles, and high bits 2r of byte l. 210 bytes.
void deq32_q6_k(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 210 * uint64_t(u / 8);
  uint s = u % 8, half_ = s / 4, r = s % 4;
  float d = half_at(b + 208);
  uint64_t ql = b + 64 * half_ + 32 * (r % 2), qh = b + 128 + 32 * half_, sc = b + 192 + 8 * half_;
  uint nshift = 4 * (r / 2), hshift = 2 * r;
  for (uint j = 0; j < 32; ++j) {
    int q = int(((byte_at(ql + j) >> nshift) & 15u) | (((byte_at(qh + j) >> hshift) & 3u) << 4)) - 32;
    float scale = float(I8s(sc + j / 16 + 2 * r).v[0]);
    w[j] = d * scale * float(q);
  }
}
// Q3_K: 32 bytes of high-bit masks, 64 bytes of 2-bit lows, 12 bytes packing 16 6-bit scales,
// half d; value = d * (scale - 32) * (low - (high bit ? 0 : 4)). ref: dequantize_row_q3_K. 110 bytes.
int q3_k_scale(uint64_t sc, uint i) {
  uint v;
  if (i < 4) v = (byte_at(sc + i) & 15u) | ((byte_at(sc + 8 + i) & 3u) << 4);
  else if (i < 8) v = (byte_at(sc + i) & 15u) | (((byte_at(sc + 4 + i) >> 2) & 3u) << 4);
  else if (i < 12) v = (byte_at(sc + i - 8) >> 4) | (((byte_at(sc + i) >> 4) & 3u) << 4);
  else v = (byte_at(sc + i - 8) >> 4) | (((byte_at(sc + i - 4) >> 6) & 3u) << 4);
  return int(v) - 32;
}
void deq32_q3_k(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 110 * uint64_t(u / 8);
  uint s = u % 8, n = s / 4, j4 = s % 4;
  float d = half_at(b + 108);
  uint64_t hm = b, qs = b + 32 + 32 * n, sc = b + 96;
  uint shift = 2 * j4, m = 1u << (4 * n + j4);
  float d0 = d * float(q3_k_scale(sc, 8 * n + 2 * j4)), d1 = d * float(q3_k_scale(sc, 8 * n + 2 * j4 + 1));
  for (uint j = 0; j < 32; ++j) {
    int q = int((byte_at(qs + j) >> shift) & 3u) - ((byte_at(hm + j) & m) != 0u ? 0 : 4);
    w[j] = (j < 16 ? d0 : d1) * float(q);
  }
}
// Q2_K: 16 scale bytes (low nibble: scale, high: min), 64 bytes of 2-bit values, half d, half dmin;
// value = d * scale * q - dmin * min. 84 bytes.
void deq32_q2_k(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 84 * uint64_t(u / 8);
  uint s = u % 8, n = s / 4, j4 = s % 4;
  float d = half_at(b + 80), dmin = half_at(b + 82);
  uint64_t qs = b + 16 + 32 * n;
  uint shift = 2 * j4;
  uint sc0 = byte_at(b + 8 * n + 2 * j4), sc1 = byte_at(b + 8 * n + 2 * j4 + 1);
  for (uint j = 0; j < 32; ++j) {
    uint sc = j < 16 ? sc0 : sc1;
    w[j] = d * float(sc & 15u) * float((byte_at(qs + j) >> shift) & 3u) - dmin * float(sc >> 4);
  }
}
// IQ4_XS: half d, 16 bits of scale highs, 4 bytes of scale lows, 128 bytes of nibbles indexing
// IQ4_NL's table; sub-block scale (6 bits) - 32. 136 bytes.
void deq32_iq4_xs(uint64_t row, uint u, uint k, out float w[32]) {
  uint64_t b = row + 136 * uint64_t(u / 8);
  uint s = u % 8;
  float d = half_at(b);
  uint sh = uint(U16s(b + 2).v[0]);
  uint ls = ((byte_at(b + 4 + s / 2) >> (4 * (s % 2))) & 15u) | (((sh >> (2 * s)) & 3u) << 4);
  float dl = d * (float(ls) - 32.0);
  uint64_t qs = b + 8 + 16 * s;
  for (uint j = 0; j < 16; ++j) {
    uint q = byte_at(qs + j);
    w[j] = dl * kIq4nlValues[q & 15u];
    w[j + 16] = dl * kIq4nlValues[q >> 4];
  }
}

// The variant a shader is compiled for: -DWTYPE=<name> picks deq32_<name> as DEQ32.
#define DEQ32_CAT2(a, b) a##b
#define DEQ32_CAT(a, b) DEQ32_CAT2(a, b)
#ifdef WTYPE
#define DEQ32 DEQ32_CAT(deq32_, WTYPE)
#endif
