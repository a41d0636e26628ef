// The Slaney-scale triangular mel filter bank (librosa's default: `htk=False, norm="slaney"`), as
// llama.cpp's mtmd computes it at load for Whisper-style encoders: n_mel + 2 points evenly spaced
// on the mel scale from 0 Hz to sample_rate / 2, each filter a triangle over its neighbours scaled
// by 2 / (right - left) Hz (equal area), sampled at the n_fft / 2 + 1 FFT bin frequencies.
// ref: Slaney, "Auditory Toolbox" (1998), tech. report 1998-010; librosa.filters.mel.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::audio {

// [n_mel][n_fft / 2 + 1], row-major. Requires n_mel > 0, n_fft > 1, sample_rate > 0 (checked).
std::vector<float> slaney_mel_filters(int32_t n_mel, int32_t n_fft, int32_t sample_rate);

}  // namespace kiln::audio
