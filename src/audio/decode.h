// Decoding audio files from untrusted bytes into mono float samples at the rate a model takes.
//
// Formats: WAV (PCM 8/16/24/32-bit, IEEE float; RIFF, RF64), FLAC and MP3, through Debian's
// libsndfile (which decodes MP3 with libmpg123); Ogg is recognised and refused (libsndfile 1.2.0
// leaks memory on malformed Ogg Vorbis); integer samples become floats in
// [-1, 1) as llama.cpp's miniaudio makes them (x / 2^(bits-1)). Channels are averaged into one;
// another sample rate is converted by libsoxr (audio/resample.h).
//
// Untrusted input: the duration the header declares is checked against `max_seconds` before any
// sample memory is allocated, and decoding stops (with an error) once it passes it, whatever the
// header said (and sample memory is reserved by the file's size, not its header's claim); a WAV
// whose data chunk declares more bytes than the file holds is refused as
// truncated (libsndfile would quietly read what is there); so is a file with no samples, a rate or
// channel count out of range, and anything libsndfile calls malformed.
// Errors read "audio: what went wrong", naming the format and the numbers.
// Thread-safety: decode_audio is reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::audio {

struct DecodeOptions {
  int32_t sample_rate = 16000;  // the rate of the samples returned
  double max_seconds = 1800.0;  // longer audio is refused (`--max-audio-seconds`)
};

// The format the bytes announce by their signature: "wav", "flac", "ogg", "mp3", or "" when none.
std::string_view sniff_audio_format(std::span<const uint8_t> bytes);

// Mono samples at options.sample_rate.
Result<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& options = {});

}  // namespace kiln::audio
