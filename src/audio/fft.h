// RealFft: the forward discrete Fourier transform of n real samples, computed as llama.cpp's mtmd
// (after whisper.cpp) computes it, so that log-mel spectrograms agree to the last bits: radix-2
// decimation in time while the length is even, a direct O(n^2) DFT once it is odd, all in float,
// with twiddles read from one table of sinf/cosf at 2*pi*i/n for the full length n.
// ref: Cooley & Tukey, "An algorithm for the machine calculation of complex Fourier series" (1965).
// Thread-safety: const methods are reentrant (each caller passes its own scratch).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::audio {

class RealFft {
 public:
  explicit RealFft(int32_t n);  // n > 0
  int32_t size() const { return n_; }

  // out[2k], out[2k+1]: real and imaginary parts of bin k, for k in [0, n): 2n floats.
  // in: n floats. scratch: working memory, resized here (keep it between calls to avoid allocating).
  void forward(const float* in, float* out, std::vector<float>& scratch) const;

 private:
  void transform(const float* in, int32_t n, float* out, float* scratch) const;
  void direct_dft(const float* in, int32_t n, float* out) const;

  int32_t n_;
  std::vector<float> cos_;  // [n_]: cosf(2*pi*i/n_)
  std::vector<float> sin_;  // [n_]: sinf(2*pi*i/n_)
};

}  // namespace kiln::audio
