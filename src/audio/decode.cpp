#include "audio/decode.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "audio/resample.h"
#include "core/leading_bytes.h"

namespace kiln::audio {
namespace {

constexpr int kMaxChannels = 64;
constexpr int kMinRate = 1000;
constexpr int kMaxRate = 768000;
constexpr sf_count_t kBlockFrames = 4096;

bool starts_with(std::span<const uint8_t> b, std::string_view sig, size_t at = 0) {
  return b.size() >= at + sig.size() && std::memcmp(b.data() + at, sig.data(), sig.size()) == 0;
}

uint32_t read_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

std::string display_name(std::string_view format) {
  if (format == "ogg") return "Ogg";
  std::string s(format);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A RIFF WAV's data chunk must fit in the file: libsndfile reads a short one without complaint.
// The sizes 0 and 0xFFFFFFFF mean "to the end" (streamed WAVs, RF64).
Status check_wav_data_chunk(std::span<const uint8_t> b) {
  if (!starts_with(b, "RIFF")) return ok_status();
  size_t pos = 12;
  while (pos + 8 <= b.size()) {
    const uint64_t size = read_le32(b.data() + pos + 4);
    if (starts_with(b, "data", pos)) {
      if (size != 0 && size != 0xFFFFFFFFu && pos + 8 + size > b.size()) {
        return make_error("audio: truncated WAV: its data chunk declares ", size, " bytes, the file holds ",
                          b.size() - pos - 8);
      }
      return ok_status();
    }
    pos += 8 + size + (size & 1);
  }
  return ok_status();
}

// libsndfile's virtual I/O over the caller's bytes (read-only).
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};

sf_count_t mem_length(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size());
}

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const auto size = static_cast<sf_count_t>(f->bytes.size());
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : size;
  sf_count_t target = 0;
  if (__builtin_add_overflow(base, offset, &target) || target < 0) return -1;
  f->pos = target;  // past the end is allowed: reads there return nothing
  return f->pos;
}

sf_count_t mem_read(void* ptr, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const auto size = static_cast<sf_count_t>(f->bytes.size());
  const sf_count_t n = std::clamp<sf_count_t>(std::min(count, size - f->pos), 0, count);
  if (n > 0) std::memcpy(ptr, f->bytes.data() + f->pos, static_cast<size_t>(n));
  f->pos += n;
  return n;
}

sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }

sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// The file's samples, channels averaged, at its own rate.
Result<std::vector<float>> decode_mono(std::span<const uint8_t> bytes, std::string_view format,
                                       double max_seconds, int32_t& rate) {
  const std::string name = display_name(format);
  MemoryFile mem{bytes};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  std::unique_ptr<SNDFILE, SndfileCloser> file(sf_open_virtual(&io, SFM_READ, &info, &mem));
  if (!file) return make_error("audio: cannot read the ", name, " file: ", sf_strerror(nullptr));
  if (info.channels < 1 || info.channels > kMaxChannels) {
    return make_error("audio: ", name, " file has ", info.channels, " channels (kiln reads 1 to ",
                      kMaxChannels, ")");
  }
  if (info.samplerate < kMinRate || info.samplerate > kMaxRate) {
    return make_error("audio: ", name, " file's sample rate ", info.samplerate, " Hz is out of range (",
                      kMinRate, " to ", kMaxRate, " Hz)");
  }
  rate = info.samplerate;
  const auto max_frames = static_cast<sf_count_t>(std::floor(max_seconds * info.samplerate));
  const bool length_known = info.frames > 0 && info.frames < SF_COUNT_MAX;
  if (length_known && info.frames > max_frames) {
    return make_error("audio: ", name, " file of ", seconds_text(double(info.frames) / info.samplerate),
                      " is longer than the limit of ", seconds_text(max_seconds));
  }

  std::vector<float> mono;
  // A header can lie about the length: reserve no more than the file's bytes could hold as PCM.
  if (length_known) mono.reserve(static_cast<size_t>(std::min<sf_count_t>(info.frames, mem.bytes.size())));
  std::vector<float> block(static_cast<size_t>(kBlockFrames) * info.channels);
  for (;;) {
    const sf_count_t got = sf_readf_float(file.get(), block.data(), kBlockFrames);
    if (got <= 0) break;
    if (static_cast<sf_count_t>(mono.size()) + got > max_frames) {
      return make_error("audio: ", name, " file is longer than the limit of ", seconds_text(max_seconds));
    }
    for (sf_count_t i = 0; i < got; ++i) {
      const float* frame = block.data() + i * info.channels;
      float sum = 0.0f;
      for (int c = 0; c < info.channels; ++c) sum += frame[c];
      mono.push_back(info.channels == 1 ? sum : sum / static_cast<float>(info.channels));
    }
  }
  if (sf_error(file.get()) != SF_ERR_NO_ERROR) {
    return make_error("audio: corrupt ", name, " file: ", sf_strerror(file.get()));
  }
  if (mono.empty()) return make_error("audio: the ", name, " file holds no samples");
  // MP3's frame count is an estimate; the other formats' is exact.
  if (length_known && format != "mp3" && static_cast<sf_count_t>(mono.size()) < info.frames) {
    return make_error("audio: truncated ", name, " file: it declares ", info.frames, " frames, ", mono.size(),
                      " could be read");
  }
  return mono;
}

}  // namespace

std::string_view sniff_audio_format(std::span<const uint8_t> b) {
  if ((starts_with(b, "RIFF") || starts_with(b, "RF64")) && starts_with(b, "WAVE", 8)) return "wav";
  if (starts_with(b, "fLaC")) return "flac";
  if (starts_with(b, "OggS")) return "ogg";
  if (starts_with(b, "ID3")) return "mp3";
  // An MPEG audio frame header: 11 sync bits, a version that is not "reserved", layer III.
  if (b.size() >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && (b[1] & 0x18) != 0x08 &&
      (b[1] & 0x06) == 0x02) {
    return "mp3";
  }
  return "";
}

Result<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  KILN_ASSERT(options.sample_rate > 0 && options.max_seconds > 0, "decode_audio: bad options");
  if (bytes.empty()) return make_error("audio: no data (0 bytes)");
  const std::string_view format = sniff_audio_format(bytes);
  if (format.empty()) {
    return make_error("audio: unrecognised format (first bytes ", leading_bytes(bytes),
                      "); kiln reads WAV, FLAC and MP3");
  }
  // libsndfile 1.2.0's Ogg Vorbis reader leaks its codec state on malformed streams (found by
  // fuzz/audio_decode_fuzz.cpp): untrusted Ogg is not handed to it.
  if (format == "ogg") return make_error("audio: Ogg files are not supported (kiln reads WAV, FLAC and MP3)");
  if (format == "wav") {
    if (Status s = check_wav_data_chunk(bytes); !s.ok()) return s.error();
  }
  int32_t rate = 0;
  auto mono = decode_mono(bytes, format, options.max_seconds, rate);
  if (!mono.ok() || rate == options.sample_rate) return mono;
  auto out = resample(*mono, rate, options.sample_rate);
  if (out.ok() && out->empty()) {
    return make_error("audio: the ", display_name(format), " file's ", mono->size(), " samples at ", rate,
                      " Hz make no sample at ", options.sample_rate, " Hz");
  }
  return out;
}

}  // namespace kiln::audio
