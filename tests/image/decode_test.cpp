// decode_image: PNG in every colour type and bit depth (with stb_image's conversions to RGB),
// JPEG (greyscale, colour, progressive), and hostile input refused with a message naming the
// problem: truncated and corrupt files, huge headers, formats kiln does not read.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "image/decode.h"
#include "image/png_header.h"
#include "test_images.h"

namespace kiln::test {
namespace {

void expect_error(const Result<RgbImage>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "decoded an image that should be refused (" << needle << ")";
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("image: ", 0), 0u) << r.error().message;
}

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ImageDecode, PngEveryColourTypeAndDepthAsStbImage) {
  struct Case {
    int color, depth;
    bool trns;
  };
  const Case cases[] = {{0, 1, false}, {0, 2, false}, {0, 4, false}, {0, 8, false}, {0, 16, false}, {0, 8, true},
                        {2, 8, false}, {2, 16, false}, {2, 8, true},  {3, 1, false}, {3, 4, false},  {3, 8, false},
                        {3, 8, true},  {4, 8, false},  {4, 16, false}, {6, 8, false}, {6, 16, false}};
  for (const Case& c : cases) {
    for (bool interlaced : {false, true}) {
      PngSpec spec{.width = 13, .height = 7, .color_type = c.color, .bit_depth = c.depth, .interlaced = interlaced,
                   .transparency = c.trns};
      const std::string what = "color " + std::to_string(c.color) + " depth " + std::to_string(c.depth) +
                               (c.trns ? " tRNS" : "") + (interlaced ? " interlaced" : "");
      auto img = decode_image(write_png(spec));
      ASSERT_TRUE(img.ok()) << what << ": " << img.error().message;
      ASSERT_EQ(img->width, 13);
      ASSERT_EQ(img->height, 7);
      ASSERT_EQ(img->pixels.size(), 13u * 7u * 3u);
      int bad = 0;
      for (int y = 0; y < 7; ++y) {
        for (int x = 0; x < 13; ++x) {
          uint8_t want[3];
          expected_rgb(spec, x, y, want);
          if (std::memcmp(img->pixel(x, y), want, 3) != 0 && bad++ < 3) {
            ADD_FAILURE() << what << ": pixel (" << x << ", " << y << ") is " << int(img->pixel(x, y)[0]) << ","
                          << int(img->pixel(x, y)[1]) << "," << int(img->pixel(x, y)[2]) << ", expected " << int(want[0])
                          << "," << int(want[1]) << "," << int(want[2]);
          }
        }
      }
    }
  }
}

TEST(ImageDecode, JpegGreyColourAndProgressive) {
  for (bool grey : {false, true}) {
    for (bool progressive : {false, true}) {
      const std::string what = std::string(grey ? "grey" : "colour") + (progressive ? " progressive" : " baseline");
      auto img = decode_image(write_jpeg(61, 45, grey, progressive));
      ASSERT_TRUE(img.ok()) << what << ": " << img.error().message;
      ASSERT_EQ(img->width, 61);
      ASSERT_EQ(img->height, 45);
      // Lossy at quality 95 on smooth gradients: every channel within a few levels; greyscale
      // replicated into R, G and B.
      int worst = 0;
      for (int y = 0; y < 45; ++y) {
        for (int x = 0; x < 61; ++x) {
          uint8_t src[3];
          jpeg_source_rgb(61, 45, x, y, src);
          const uint8_t* p = img->pixel(x, y);
          for (int c = 0; c < 3; ++c) worst = std::max(worst, std::abs(int(p[c]) - int(grey ? src[0] : src[c])));
          if (grey) {
            EXPECT_EQ(p[0], p[1]);
            EXPECT_EQ(p[0], p[2]);
          }
        }
      }
      EXPECT_LE(worst, 12) << what;
    }
  }
}

std::vector<uint8_t> read_data(const std::string& name) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/image/data/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return {std::istreambuf_iterator<char>(in), {}};
}

uint64_t fnv1a64(const std::vector<uint8_t>& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t c : b) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// JPEGs of every layout (tests/image/data, written by libjpeg-turbo): kiln's pixels must equal
// llama.cpp's, whose stb_image (v2.30) gave these hashes of its RGB output.
TEST(ImageDecode, JpegPixelsEqualStbImage) {
  struct Case {
    const char* file;
    int width, height;
    uint64_t rgb_fnv1a64;
  };
  const Case cases[] = {
      {"ycc420.jpg", 37, 29, 0x003becf0289bc71eull},         {"ycc422.jpg", 33, 17, 0x7e5c6aeb1cebf83aull},
      {"ycc440.jpg", 19, 35, 0xde3cb86eed78fa46ull},         {"ycc444.jpg", 23, 21, 0xb882aefabb031c10ull},
      {"ycc411.jpg", 41, 15, 0xdc1ce2dcf88711edull},         {"grey.jpg", 21, 13, 0xb5012f7390765efcull},
      {"progressive420.jpg", 45, 31, 0x01427ed7deeef5dfull}, {"restart420.jpg", 40, 40, 0x7a0e75ed1e76b8fdull},
      {"rgb.jpg", 17, 16, 0xfc37d1289753abc2ull},            {"cmyk.jpg", 16, 12, 0x69f2cb7aaef3ece2ull},
      {"ycck.jpg", 18, 10, 0xd714317ff6d0a94aull},           {"pixel420.jpg", 1, 1, 0xd01b781866b362c7ull},
      {"thin420.jpg", 2, 9, 0xc7ce55663cc3303aull},
  };
  for (const Case& c : cases) {
    auto img = decode_image(read_data(c.file));
    ASSERT_TRUE(img.ok()) << c.file << ": " << img.error().message;
    EXPECT_EQ(img->width, c.width) << c.file;
    EXPECT_EQ(img->height, c.height) << c.file;
    EXPECT_EQ(fnv1a64(img->pixels), c.rgb_fnv1a64) << c.file;
  }
}

TEST(ImageDecode, TruncatedAndCorruptFilesAreRefused) {
  const std::vector<uint8_t> png = write_png({.width = 64, .height = 64, .color_type = 2, .bit_depth = 8});
  const size_t idat = png_chunk_offset(png, "IDAT");
  ASSERT_NE(idat, std::string::npos);
  // Cut inside the image data, and cut just before IEND.
  expect_error(decode_image(std::span(png).first(idat + 40)), "truncated PNG");
  expect_error(decode_image(std::span(png).first(png.size() - 6)), "truncated PNG");
  expect_error(decode_image(std::span(png).first(20)), "truncated PNG");
  // A flipped bit in the image data: the chunk's CRC no longer matches.
  std::vector<uint8_t> bad = png;
  bad[idat + 20] ^= 0x10;
  expect_error(decode_image(bad), "corrupt PNG");
  // The first chunk must be IHDR.
  bad = png;
  std::memcpy(&bad[12], "IDAT", 4);
  expect_error(decode_image(bad), "IHDR");

  const std::vector<uint8_t> jpeg = write_jpeg(64, 64, false, false);
  expect_error(decode_image(std::span(jpeg).first(jpeg.size() / 2)), "truncated JPEG");
  expect_error(decode_image(std::span(jpeg).first(30)), "JPEG");
  const std::vector<uint8_t> prog = write_jpeg(64, 64, false, true);
  expect_error(decode_image(std::span(prog).first(prog.size() * 2 / 3)), "truncated JPEG");
}

// A PNG signature and an IHDR chunk claiming width x height, and nothing else.
std::vector<uint8_t> png_header_bytes(uint32_t width, uint32_t height) {
  const std::string b = png_header_only(width, height);
  return {b.begin(), b.end()};
}

TEST(ImageDecode, HugeHeadersAreRefusedBeforeDecoding) {
  expect_error(decode_image(png_header_bytes(30000, 30000)),
               "30000 x 30000 pixels exceeds the limit of 16384");
  expect_error(decode_image(png_header_bytes(16000, 16000)), "exceeds the limit of 67108864 pixels");
  expect_error(decode_image(png_header_bytes(0, 5)), "empty size");
  // Limits are the caller's to choose.
  const std::vector<uint8_t> png = write_png({.width = 40, .height = 30});
  EXPECT_TRUE(decode_image(png).ok());
  expect_error(decode_image(png, {.max_side = 32, .max_pixels = 1 << 20}), "40 x 30 pixels exceeds the limit of 32");
  expect_error(decode_image(png, {.max_side = 64, .max_pixels = 1000}), "exceeds the limit of 1000 pixels");
  // JPEG: the header's size is checked before any pixel memory (SOF0 of 30000 x 30000).
  std::vector<uint8_t> jpeg = write_jpeg(16, 16, false, false);
  for (size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 5] = 30000 >> 8, jpeg[i + 6] = 30000 & 255, jpeg[i + 7] = 30000 >> 8, jpeg[i + 8] = 30000 & 255;
      break;
    }
  }
  expect_error(decode_image(jpeg), "JPEG of 30000 x 30000 pixels exceeds the limit");
}

TEST(ImageDecode, OtherFormatsAreNamed) {
  expect_error(decode_image(bytes_of("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>")),
               "SVG is not supported (PNG and JPEG images are)");
  expect_error(decode_image(bytes_of("  <svg width=\"10\" height=\"10\"></svg>")), "SVG is not supported");
  expect_error(decode_image(bytes_of("GIF89a\x01\x00\x01\x00")), "GIF is not supported");
  expect_error(decode_image(bytes_of(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16))), "WEBP is not supported");
  expect_error(decode_image(bytes_of("BM\x36\x00\x00\x00")), "BMP is not supported");
  expect_error(decode_image(bytes_of("hello, world")), "not a PNG or JPEG file (it starts with bytes 68 65 6c 6c");
  expect_error(decode_image(std::span<const uint8_t>()), "no data");
}

// The entropy-coded scans of a progressive JPEG, repeated: a small file that would make the
// decoder work for every scan. libjpeg only warns about the bogus progression: kiln stops there.
TEST(ImageDecode, JpegWithTooManyScansIsRefused) {
  const std::vector<uint8_t> prog = write_jpeg(32, 32, true, true);
  // Find the last SOS segment (marker FF DA) and the EOI (FF D9).
  size_t last_sos = 0;
  for (size_t i = 0; i + 1 < prog.size(); ++i) {
    if (prog[i] == 0xFF && prog[i + 1] == 0xDA) last_sos = i;
  }
  ASSERT_GT(last_sos, 0u);
  ASSERT_EQ(prog[prog.size() - 2], 0xFF);
  ASSERT_EQ(prog[prog.size() - 1], 0xD9);
  const std::vector<uint8_t> scan(prog.begin() + static_cast<std::ptrdiff_t>(last_sos), prog.end() - 2);
  std::vector<uint8_t> bomb(prog.begin(), prog.end() - 2);
  for (int i = 0; i < 600; ++i) bomb.insert(bomb.end(), scan.begin(), scan.end());
  bomb.push_back(0xFF);
  bomb.push_back(0xD9);
  expect_error(decode_image(bomb), "corrupt JPEG: Inconsistent progression sequence");
}

// The offset of the first SOF0 or SOF2 marker of a JPEG (its size follows at +5).
size_t sof_offset(const std::vector<uint8_t>& jpeg) {
  for (size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) return i;
  }
  return std::string::npos;
}

// Issue 30: a 919-byte JPEG whose SOF said 8192 x 8192 was padded by libjpeg and accepted (824 MiB
// per request), a cut JPEG that kept its EOI marker too, and a 57-byte PNG header of 8192 x 8192
// allocated 249 MiB before failing. Files too small for their declared size are refused before
// anything is allocated, and every libjpeg warning refuses the file.
TEST(ImageDecode, DeclaredSizesBeyondTheBytesAndCorruptDataAreRefused) {
  std::vector<uint8_t> jpeg = write_jpeg(16, 16, false, false);
  const size_t sof = sof_offset(jpeg);
  ASSERT_NE(sof, std::string::npos);
  jpeg[sof + 5] = 8192 >> 8, jpeg[sof + 6] = 0, jpeg[sof + 7] = 8192 >> 8, jpeg[sof + 8] = 0;
  ASSERT_LT(jpeg.size(), 2000u);
  expect_error(decode_image(jpeg), "bytes cannot hold 8192 x 8192 pixels");
  expect_error(decode_image(png_header_bytes(8192, 8192)), "bytes cannot hold 8192 x 8192 pixels");

  // Entropy-coded data cut out of the middle, the EOI marker kept.
  const std::vector<uint8_t> whole = write_jpeg(64, 64, false, false);
  std::vector<uint8_t> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2));
  cut.push_back(0xFF);
  cut.push_back(0xD9);
  expect_error(decode_image(cut), "corrupt JPEG");
  EXPECT_TRUE(decode_image(whole).ok());
}

// ImageLimits::admit sees the declared size after the checks and before the pixels; its Error
// refuses the image.
TEST(ImageDecode, AdmitIsAskedBeforeThePixels) {
  for (const std::vector<uint8_t>& file : {write_png({.width = 40, .height = 30}), write_jpeg(40, 30, false, true)}) {
    int64_t seen_w = 0, seen_h = 0;
    ImageLimits limits;
    limits.admit = [&](int64_t w, int64_t h) {
      seen_w = w, seen_h = h;
      return Status(make_error("no room"));
    };
    expect_error(decode_image(file, limits), "no room");
    EXPECT_EQ(seen_w, 40);
    EXPECT_EQ(seen_h, 30);
    limits.admit = [](int64_t, int64_t) { return ok_status(); };
    EXPECT_TRUE(decode_image(file, limits).ok());
  }
  int calls = 0;
  ImageLimits counting;
  counting.admit = [&](int64_t, int64_t) { return ++calls, ok_status(); };
  expect_error(decode_image(png_header_bytes(8192, 8192), counting), "cannot hold");
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace kiln::test
