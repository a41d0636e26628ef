// Activations rounded as the CPU rounds them before its dot products: to the vec_dot type of the
// weights (ggml's type_traits_cpu[type].vec_dot_type), through the x86 quantizers kiln's CPU uses,
// so that the shaders lose the same information (the remaining difference is float order).
//   ACT_F16:  F16 weights: x -> F16.  ACT_BF16: BF16 weights: x -> BF16 (nearest even).
//   ACT_Q8_0: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (Q8_0/Q8_1 blocks of 32): q = round-half-even(x *
//             127 / amax), value q * F16(amax / 127). ref: quantize_row_q8_0 (x86).
//   ACT_Q8_K: K-quants, IQ4_XS (Q8_K blocks of 256): max the first value of largest magnitude,
//             iscale = -127 / max, q = min(127, round-half-even(iscale * x)), value q / iscale.
//             ref: quantize_row_q8_K_ref.
// round_act32(x, xa, stride, u): x holds the 32 values of unit u of a row at device address xa
// (element stride `stride` bytes); rounds them in place (Q8_K reads the unit's whole block of 256).

float bf16_round(float x) {
  uint u = floatBitsToUint(x);
  uint r = ((u & 0x7fffffffu) > 0x7f800000u) ? ((u >> 16) | 64u) : ((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
  return uintBitsToFloat(r << 16);
}

void round_act32(inout float x[32], uint64_t xa, uint stride, uint u) {
#if defined(ACT_F16)
  for (uint j = 0; j < 32; ++j) x[j] = float(float16_t(x[j]));
#elif defined(ACT_BF16)
  for (uint j = 0; j < 32; ++j) x[j] = bf16_round(x[j]);
#elif defined(ACT_Q8_0)
  float amax = 0.0;
  for (uint j = 0; j < 32; ++j) amax = max(amax, abs(x[j]));
  float id = amax != 0.0 ? 127.0 / amax : 0.0;
  float d = float(float16_t(amax / 127.0));
  for (uint j = 0; j < 32; ++j) x[j] = roundEven(x[j] * id) * d;
#elif defined(ACT_Q8_K)
  uint64_t block = xa + uint64_t(256 * (u / 8)) * stride;
  float amax = 0.0;
  for (uint j = 0; j < 256; ++j) amax = max(amax, abs(F32s(block + uint64_t(j) * stride).v[0]));
  if (amax == 0.0) {
    for (uint j = 0; j < 32; ++j) x[j] = 0.0;
    return;
  }
  float mx = 0.0;
  for (uint j = 0; j < 256; ++j) {
    float v = F32s(block + uint64_t(j) * stride).v[0];
    if (abs(v) == amax) { mx = v; break; }
  }
  float iscale = -127.0 / mx, d = 1.0 / iscale;
  for (uint j = 0; j < 32; ++j) x[j] = min(127.0, roundEven(iscale * x[j])) * d;
#endif
}
