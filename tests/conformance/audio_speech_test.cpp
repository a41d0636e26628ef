// Real and synthetic speech through the audio encoders against llama.cpp's libmtmd
// (tests/conformance/data/mtmd-audio/speech, made by make_speech_refs.sh there): a LibriVox clip
// of Debian's pocketsphinx-testdata (read where Debian installs it: a missing file fails the test
// and says to run scripts/deps.sh) and espeak-ng speech (tests/data/audio/espeak-16k.wav). Per
// clip, the log-mel of the speech frames within 1e-5 of mtmd's; per clip and fixture projector
// (ultravox, qwen2a, voxtral, glma, musicflamingo), the prompt's layout, every 8th embedding row within 1e-3 of the
// largest value, the last position's logits and the first token and 8-token greedy continuation
// equal to llama.cpp's (libmtmd's helper, as llama-mtmd-cli runs it), in llama.cpp's exact mode (F32
// attention without flash, F32 KV cache).
//
// Also: the same speech as a 44.1 kHz stereo MP3 (tests/data/audio/espeak-44k-stereo.mp3) gives the
// WAV's tokens (see MpegAtTheCdRateGivesTheWavsTokens for the tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "audio/decode.h"
#include "audio/log_mel.h"
#include "conformance/reference_check.h"
#include "llm/cpu_engine.h"
#include "llm/media_prompt.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kRoot = std::string(KILN_SOURCE_DIR) + "/";
const std::string kAudio = kRoot + "tests/conformance/data/mtmd-audio/";
const std::string kRefs = kAudio + "speech/";
const std::string kTextModel = test_data::path("models/llama-spm-e128-f32.gguf");

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<float> read_floats(const std::string& path) {
  const std::vector<uint8_t> b = read_file(path);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

// The clip's file: committed, or where Debian installs it. Empty (after failing the test with the
// remedy) when a Debian file is missing.
std::string clip_path(const nlohmann::json& clip) {
  if (clip.contains("file")) return kRoot + clip["file"].get<std::string>();
  const std::string path = clip["debian"];
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: install the test packages with scripts/deps.sh test "
                  << "(pocketsphinx-testdata)";
    return {};
  }
  return path;
}

const nlohmann::json& speech() {
  static const nlohmann::json s = testing::load_json(kRefs + "speech.json");
  return s;
}

std::vector<std::string> clip_names() {
  std::vector<std::string> out;
  for (const auto& c : speech()["clips"]) out.push_back(c["name"]);
  return out;
}

const nlohmann::json& clip_named(const std::string& name) {
  for (const auto& c : speech()["clips"])
    if (c["name"] == name) return c;
  static const nlohmann::json none;
  ADD_FAILURE() << "no clip " << name;
  return none;
}

class SpeechLogMel : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeechLogMel, EqualsMtmdWithinOneInHundredThousand) {
  const nlohmann::json& clip = clip_named(GetParam());
  const std::string path = clip_path(clip);
  if (path.empty()) return;  // failed above
  const int32_t n_mel = clip["n_mel"];
  auto samples = audio::decode_audio(read_file(path));
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  auto mel = audio::WhisperLogMel::create(n_mel);
  ASSERT_TRUE(mel.ok());
  auto chunks = mel->chunks(*samples);
  ASSERT_TRUE(chunks.ok()) << chunks.error().message;
  ASSERT_EQ(chunks->size(), 1u);
  const audio::MelChunk& got = chunks->front();
  const std::vector<float> want =
      read_floats(kRefs + "mel-" + GetParam() + "-" + std::to_string(n_mel) + ".f32");
  const size_t frames = want.size() / static_cast<size_t>(n_mel);
  ASSERT_GT(frames, 100u);  // the speech, not the padding
  ASSERT_LE(frames, static_cast<size_t>(got.n_frames));
  double max_err = 0;
  for (int32_t m = 0; m < n_mel; ++m)
    for (size_t f = 0; f < frames; ++f)
      max_err = std::max(max_err, std::fabs(double{got.data[static_cast<size_t>(m) * got.n_frames + f]} -
                                            want[static_cast<size_t>(m) * frames + f]));
  std::printf("[ %s ] %zu frames x %d bins: max |err| %.3g\n", GetParam().c_str(), frames, n_mel, max_err);
  EXPECT_LE(max_err, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Speech, SpeechLogMel, ::testing::ValuesIn(clip_names()), [](const auto& info) {
  return std::string(info.param == "espeak" ? "espeak" : "librivox");
});

// A text context and the mmproj's audio encoder in llama.cpp's exact mode, in one arena.
struct AudioRun {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const AudioModel> audio;
  CpuEngine engine{2};
  ComputeArena arena{engine.device, "shared"};
  std::unique_ptr<Context> ctx;
  std::unique_ptr<AudioEncoder> encoder;

  explicit AudioRun(const std::string& projector) {
    auto m = Model::load(kTextModel);
    EXPECT_TRUE(m.ok()) << m.error().message;
    if (!m.ok()) return;
    model = *m;
    auto a = AudioModel::load(kAudio + "mmproj-" + projector + ".gguf", *model);
    EXPECT_TRUE(a.ok()) << a.error().message;
    if (!a.ok()) return;
    audio = *a;
    ContextOptions co;
    co.n_ctx = 1024;
    co.type_k = co.type_v = DType::F32;
    co.flash_attention = FlashAttention::Off;
    co.input_embeddings = true;
    co.arena = &arena;
    auto c = Context::create(model, engine.backend, co);
    EXPECT_TRUE(c.ok()) << c.error().message;
    if (c.ok()) ctx = std::move(*c);
    auto e = AudioEncoder::create(audio, engine.backend,
                                  {.flash_attention = FlashAttention::Off, .arena = &arena});
    EXPECT_TRUE(e.ok()) << e.error().message;
    if (e.ok()) encoder = std::move(*e);
  }
  bool ok() const { return ctx && encoder; }

  // The prompt of `text` with the audio file's bytes at its marker.
  Result<MediaPrompt> prompt(const std::string& text, const std::vector<uint8_t>& bytes) const {
    KILN_ASSIGN_OR_RETURN(auto chunks, audio->prepare_audio(bytes));
    const MediaItem items[] = {{.image = nullptr, .audio = std::move(chunks)}};
    return tokenize_media_prompt(model->tokenizer(), {.audio = audio.get()}, text, items,
                                 {.add_special = true, .parse_special = true});
  }

  // Decodes `p` from an empty cache: the last position's logits, then `n` greedy tokens.
  std::vector<int32_t> greedy(const MediaPrompt& p, int n, std::vector<float>* last_logits = nullptr) {
    ctx->clear();
    auto last = decode_media_prompt(*ctx, nullptr, p, 0, {.audio = encoder.get()});
    EXPECT_TRUE(last.ok()) << last.error().message;
    if (!last.ok()) return {};
    std::vector<float> logits(ctx->logits(*last).begin(), ctx->logits(*last).end());
    if (last_logits) *last_logits = logits;
    std::vector<int32_t> out;
    for (auto pos = static_cast<int32_t>(p.n_positions()); static_cast<int>(out.size()) < n; ++pos) {
      out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      Batch b;
      b.add(out.back(), pos, 0, true);
      const Status st = ctx->decode(b);
      EXPECT_TRUE(st.ok()) << st.error().message;
      if (!st.ok()) return out;
      logits.assign(ctx->logits(0).begin(), ctx->logits(0).end());
    }
    return out;
  }
};

struct SpeechCase {
  std::string projector, clip;
};
void PrintTo(const SpeechCase& c, std::ostream* os) { *os << c.projector << "-" << c.clip; }

std::vector<SpeechCase> speech_cases() {
  std::vector<SpeechCase> out;
  for (const auto& clip : speech()["clips"])
    for (const auto& p : speech()["projectors"]) out.push_back({p, clip["name"]});
  return out;
}

class SpeechConformance : public ::testing::TestWithParam<SpeechCase> {};

TEST_P(SpeechConformance, MatchesLlamaCpp) {
  const SpeechCase& sc = GetParam();
  const std::string name = sc.projector + "-" + sc.clip;
  const auto ref = testing::load_json(kRefs + name + ".ref.json");
  const std::string path = clip_path(clip_named(sc.clip));
  if (path.empty()) return;  // failed above
  AudioRun run(sc.projector);
  ASSERT_TRUE(run.ok());
  const std::vector<uint8_t> bytes = read_file(path);
  auto prompt = run.prompt(ref["prompt"], bytes);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;

  // The prompt's layout: text token ids and the audio's place.
  const auto& chunks = ref["chunks"];
  ASSERT_EQ(prompt->chunks.size(), chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PromptChunk& c = prompt->chunks[i];
    if (chunks[i]["type"] == "text") {
      EXPECT_EQ(c.tokens, chunks[i]["tokens"].get<std::vector<int32_t>>()) << "chunk " << i;
    } else {
      ASSERT_NE(c.audio, nullptr) << "chunk " << i;
      EXPECT_EQ(c.audio->n_tokens, chunks[i]["n_tokens"].get<int64_t>());
    }
  }
  EXPECT_EQ(prompt->n_positions(), ref["n_past"].get<int64_t>());

  // Every 8th row of the embeddings.
  const PromptChunk* audio_chunk = nullptr;
  for (const PromptChunk& c : prompt->chunks)
    if (c.audio) audio_chunk = &c;
  ASSERT_NE(audio_chunk, nullptr);
  auto embd = run.encoder->encode(*audio_chunk->audio);
  ASSERT_TRUE(embd.ok()) << embd.error().message;
  const auto shape = ref["image_embd_shape"].get<std::vector<int64_t>>();
  ASSERT_EQ((*embd)->n_tokens, shape[0]);
  ASSERT_EQ((*embd)->n_embd, shape[1]);
  const int64_t every = speech()["rows_every"];
  const std::vector<float> want = read_floats(kRefs + name + ".rows.f32");
  ASSERT_EQ(static_cast<int64_t>(want.size()), (shape[0] + every - 1) / every * shape[1]);
  double max_ref = 0, max_diff = 0;
  for (int64_t r = 0; r * every < shape[0]; ++r) {
    const auto row = (*embd)->row(r * every);
    for (int64_t j = 0; j < shape[1]; ++j) {
      const double w = want[static_cast<size_t>(r * shape[1] + j)];
      max_ref = std::max(max_ref, std::fabs(w));
      max_diff = std::max(max_diff, std::fabs(double{row[static_cast<size_t>(j)]} - w));
    }
  }
  std::printf("[ %s ] embeddings: max |diff| %.3g, relative to max |ref| %.3g\n", name.c_str(), max_diff,
              max_diff / max_ref);
  EXPECT_LE(max_diff / max_ref, 1e-3);

  // The last position's logits, the first token and the greedy continuation.
  std::vector<float> logits;
  const std::vector<int32_t> greedy = run.greedy(*prompt, 8, &logits);
  testing::LogitComparison cmp(testing::kF32Tight);
  cmp.set_vocab(static_cast<int>(run.ctx->n_vocab()));
  cmp.compare_row(ref["logits_top"], logits.data(), "last position");
  const auto want_tokens = ref["greedy_tokens"].get<std::vector<int32_t>>();
  ASSERT_EQ(greedy.size(), 8u);
  EXPECT_EQ(greedy.front(), want_tokens.front()) << "first token";
  EXPECT_EQ(greedy, want_tokens);
  cmp.finish(name);
}

INSTANTIATE_TEST_SUITE_P(Speech, SpeechConformance, ::testing::ValuesIn(speech_cases()),
                         [](const auto& info) {
                           return info.param.projector + "_" +
                                  (info.param.clip == "espeak" ? "espeak" : "librivox");
                         });

// The same speech as a 44.1 kHz stereo MP3 (tests/data/audio/espeak-44k-stereo.mp3) and as a 16 kHz
// mono WAV (espeak-mp3-16k.wav: that MP3 as Debian's lame decodes it, channels averaged, resampled
// to 16 kHz by an FFT; tools/fixtures/mkspeech.py) give the same first token and 8-token greedy
// continuation on every fixture projector. kiln decodes the MP3 (libsndfile's mpg123, gapless: it
// equals lame's and miniaudio's decoding), averages the channels and resamples 44.1 -> 16 kHz with
// libsoxr, so the two differ by the resamplers only (the speech was low-passed at 7 kHz before
// encoding, inside libsoxr's passband). The tolerance, on the decoded samples against the WAV's:
// an RMS difference at most 3% of the WAV's RMS (-30 dB), and the samples aligned (the difference
// smallest at zero lag of +-8). Why 3%: two sound band-limited resamplers differ by about 2% RMS
// on speech here (libsoxr against the FFT: 2.2%, -33 dB, measured; kiln's libsoxr against
// llama.cpp's linear one differs as much, see the README), while a path that is wrong by one
// output sample differs by 10% or more, and an MP3 decoder that kept the encoder's delay (1105
// samples at 44.1 kHz) by about 100%. (The codec adds little: lame's decoding of the MP3 is within
// 0.13% of the samples it was made from.)
TEST(SpeechMp3, MpegAtTheCdRateGivesTheWavsTokens) {
  const std::vector<uint8_t> wav = read_file(kRoot + "tests/data/audio/espeak-mp3-16k.wav");
  const std::vector<uint8_t> mp3 = read_file(kRoot + "tests/data/audio/espeak-44k-stereo.mp3");
  auto a = audio::decode_audio(wav);
  auto b = audio::decode_audio(mp3);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  const size_t n = std::min(a->size(), b->size());
  EXPECT_LE(std::max(a->size(), b->size()) - n, 16u) << "lengths " << a->size() << " and " << b->size();
  auto rms_diff = [&](int lag) {
    double d2 = 0;
    for (size_t i = 8; i + 8 < n; ++i) {
      const double d = double{(*a)[i]} - (*b)[static_cast<size_t>(static_cast<int64_t>(i) + lag)];
      d2 += d * d;
    }
    return std::sqrt(d2 / static_cast<double>(n - 16));
  };
  double signal = 0;
  for (size_t i = 0; i < n; ++i) signal += double{(*a)[i]} * (*a)[i];
  signal = std::sqrt(signal / static_cast<double>(n));
  const double at_zero = rms_diff(0);
  std::printf("mp3 vs wav: RMS difference %.3g of RMS %.3g (%.1f dB)\n", at_zero, signal,
              20 * std::log10(at_zero / signal));
  EXPECT_LE(at_zero, 0.03 * signal);
  for (int lag = -8; lag <= 8; ++lag)
    if (lag != 0) {
      EXPECT_LT(at_zero, rms_diff(lag)) << "lag " << lag;
    }

  const std::string text = "USER: <__media__>Describe the image.\nASSISTANT:";
  for (const char* projector : {"ultravox", "qwen2a", "voxtral", "glma", "musicflamingo"}) {
    AudioRun run(projector);
    ASSERT_TRUE(run.ok());
    auto pw = run.prompt(text, wav);
    auto pm = run.prompt(text, mp3);
    ASSERT_TRUE(pw.ok() && pm.ok());
    EXPECT_EQ(pw->flat_tokens(), pm->flat_tokens()) << projector;
    const std::vector<int32_t> from_wav = run.greedy(*pw, 8);
    const std::vector<int32_t> from_mp3 = run.greedy(*pm, 8);
    ASSERT_EQ(from_wav.size(), 8u);
    EXPECT_EQ(from_mp3, from_wav) << projector;
  }
}

}  // namespace
}  // namespace kiln
