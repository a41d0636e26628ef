// JPEG from memory: libjpeg-turbo parses the file and entropy-decodes its DCT coefficients
// (jpeg_read_coefficients), and image/jpeg_pixels.h turns them into pixels with stb_image's
// arithmetic, so the pixels equal llama.cpp's. libjpeg reports errors by longjmp: the frame that
// calls setjmp (JpegReader::read) holds no C++ object with a destructor across libjpeg calls.
//
// libjpeg decodes a truncated or corrupt file by padding or skipping data (with a warning): kiln
// refuses any file that draws a warning instead. A Huffman-coded file too small for its declared
// size (at least one bit per 8x8 block of a component) is refused before anything is allocated,
// and so is one with more progressive scans than kMaxScans (a cheap way to make a small file cost
// minutes).
#include <cstdio>
#include <csetjmp>
// clang-format off: jpeglib.h needs <cstdio> before it.
#include <jerror.h>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "image/decoders.h"
#include "image/jpeg_pixels.h"

namespace kiln::image_detail {
namespace {

constexpr int kMaxScans = 500;  // as libjpeg-turbo's TJFLAG_LIMITSCANS

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it
  jmp_buf jump;
  bool truncated = false;  // a warning: the data ended before the image
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are corrupt-data notices libjpeg would recover from (by padding or
// skipping): decoding stops at the first one, as at an error, and the file is refused. Trace
// messages (level >= 0) are ignored.
void on_message(j_common_ptr c, int level) {
  if (level >= 0) return;
  reinterpret_cast<JpegErrors*>(c->err)->truncated = c->err->msg_code == JWRN_JPEG_EOF;
  on_error(c);
}

struct ScanLimit {
  jpeg_progress_mgr mgr;  // first: libjpeg hands back a pointer to it
  JpegErrors* errors = nullptr;
};

void on_progress(j_common_ptr c) {
  auto* limit = reinterpret_cast<ScanLimit*>(c->progress);
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number > kMaxScans) {
    std::snprintf(limit->errors->message, sizeof limit->errors->message,
                  "more than %d progressive scans", kMaxScans);
    std::longjmp(limit->errors->jump, 1);
  }
}

enum class Stage { Header, Coefficients };

class JpegReader {
 public:
  JpegReader() {
    cinfo_.err = jpeg_std_error(&errors_.mgr);
    errors_.mgr.error_exit = on_error;
    errors_.mgr.emit_message = on_message;
    limit_.mgr.progress_monitor = on_progress;
    limit_.errors = &errors_;
  }
  ~JpegReader() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  const JpegErrors& errors() const { return errors_; }
  const jpeg_decompress_struct& info() const { return cinfo_; }

  // Reads the header (Stage::Header) or, after it, every coefficient, dequantized and inverse
  // transformed into `planes` (Stage::Coefficients; laid out by jpeg_layout()); false on a libjpeg
  // error (see errors()).
  bool read(std::span<const uint8_t> bytes, Stage stage, std::vector<JpegPlane>* planes, int64_t memory_limit) {
    if (setjmp(errors_.jump)) return false;
    if (stage == Stage::Header) {
      jpeg_create_decompress(&cinfo_);
      created_ = true;
      cinfo_.progress = &limit_.mgr;
      cinfo_.mem->max_memory_to_use = static_cast<long>(memory_limit);
      jpeg_mem_src(&cinfo_, bytes.data(), static_cast<unsigned long>(bytes.size()));
      if (jpeg_read_header(&cinfo_, TRUE) != JPEG_HEADER_OK) ERREXIT(&cinfo_, JERR_NO_IMAGE);
      return true;
    }
    jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&cinfo_);
    for (int ci = 0; ci < cinfo_.num_components; ++ci) {
      const jpeg_component_info& comp = cinfo_.comp_info[ci];
      JpegPlane& plane = (*planes)[static_cast<size_t>(ci)];
      if (comp.quant_table == nullptr) {
        std::snprintf(errors_.message, sizeof errors_.message, "component %d has no quantization table", ci);
        return false;
      }
      const int rows = (plane.height + 7) / 8, cols = (plane.width + 7) / 8;
      int16_t block[DCTSIZE2];
      for (int by = 0; by < rows; ++by) {
        JBLOCKARRAY row = (*cinfo_.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&cinfo_),
                                                            coefficients[ci], static_cast<JDIMENSION>(by), 1, FALSE);
        for (int bx = 0; bx < cols; ++bx) {
          // ref: stb_image dequantizes into 16 bits (stbi__jpeg_dequantize); a baseline DC term
          // that does not fit is an error there ("can't merge dc and ac").
          for (int k = 0; k < DCTSIZE2; ++k) {
            const int v = row[0][bx][k] * comp.quant_table->quantval[k];
            if (k == 0 && !cinfo_.progressive_mode && (v < INT16_MIN || v > INT16_MAX)) {
              std::snprintf(errors_.message, sizeof errors_.message, "a DC coefficient does not fit 16 bits");
              return false;
            }
            block[k] = static_cast<int16_t>(v);
          }
          jpeg_idct_block(block, &plane.samples[static_cast<size_t>(by) * 8 * static_cast<size_t>(plane.stride) + bx * 8], plane.stride);
        }
      }
    }
    jpeg_finish_decompress(&cinfo_);
    return true;
  }

 private:
  jpeg_decompress_struct cinfo_{};
  JpegErrors errors_;
  ScanLimit limit_{};
  bool created_ = false;
};

// The planes (sizes, zeroed samples) and colour space of a JPEG whose header `info` holds.
struct JpegLayout {
  std::vector<JpegPlane> planes;
  int h_max = 1, v_max = 1;
  JpegColour colour = JpegColour::YCbCr;
};

Result<JpegLayout> jpeg_layout(const jpeg_decompress_struct& info) {
  const int n = info.num_components;
  if (n != 1 && n != 3 && n != 4) return make_error("image: JPEG with ", n, " components is not supported");
  if (info.data_precision != 8) return make_error("image: ", info.data_precision, "-bit JPEG is not supported");
  JpegLayout l;
  for (int ci = 0; ci < n; ++ci) {
    l.h_max = std::max(l.h_max, info.comp_info[ci].h_samp_factor);
    l.v_max = std::max(l.v_max, info.comp_info[ci].v_samp_factor);
  }
  for (int ci = 0; ci < n; ++ci) {
    const jpeg_component_info& c = info.comp_info[ci];
    if (l.h_max % c.h_samp_factor != 0 || l.v_max % c.v_samp_factor != 0)
      return make_error("image: JPEG with fractional chroma subsampling (", c.h_samp_factor, "x", c.v_samp_factor,
                        " against ", l.h_max, "x", l.v_max, ") is not supported");
    JpegPlane p;
    p.h = c.h_samp_factor;
    p.v = c.v_samp_factor;
    // ref: stb_image's img_comp x, y: the samples the component covers.
    p.width = static_cast<int>((info.image_width * static_cast<JDIMENSION>(p.h) + static_cast<JDIMENSION>(l.h_max) - 1) / static_cast<JDIMENSION>(l.h_max));
    p.height = static_cast<int>((info.image_height * static_cast<JDIMENSION>(p.v) + static_cast<JDIMENSION>(l.v_max) - 1) / static_cast<JDIMENSION>(l.v_max));
    p.stride = (p.width + 7) / 8 * 8;
    p.samples.assign(static_cast<size_t>(p.stride) * static_cast<size_t>((p.height + 7) / 8 * 8), 0);
    l.planes.push_back(std::move(p));
  }
  // ref: stb_image's colour rules: three components are RGB when their ids are 'R', 'G', 'B' or
  // an Adobe marker says "no transform" without a JFIF marker; four follow the Adobe transform.
  const int adobe = info.saw_Adobe_marker ? info.Adobe_transform : -1;
  if (n == 1) {
    l.colour = JpegColour::Grey;
  } else if (n == 3) {
    const bool rgb_ids = info.comp_info[0].component_id == 'R' && info.comp_info[1].component_id == 'G' &&
                         info.comp_info[2].component_id == 'B';
    l.colour = rgb_ids || (adobe == 0 && !info.saw_JFIF_marker) ? JpegColour::Rgb : JpegColour::YCbCr;
  } else {
    l.colour = adobe == 0 ? JpegColour::Cmyk : adobe == 2 ? JpegColour::Ycck : JpegColour::YCbCr;
  }
  return l;
}

}  // namespace

Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // libjpeg's working memory (progressive files hold every coefficient: about 6 bytes per pixel
  // at most) is capped a little above what the pixel limit allows.
  const int64_t memory_limit = limits.max_pixels * 8 + (int64_t{64} << 20);
  JpegReader reader;
  if (!reader.read(bytes, Stage::Header, nullptr, memory_limit)) {
    if (reader.errors().truncated) return make_error("image: truncated JPEG: ", bytes.size(), " bytes end inside the header");
    return make_error("image: corrupt JPEG: ", reader.errors().message);
  }
  const jpeg_decompress_struct& info = reader.info();
  KILN_TRY(check_image_size("JPEG", info.image_width, info.image_height, limits));
  if (!info.arith_code) {
    // Every Huffman-coded block costs at least one bit (its DC code), in the scans of each
    // component; the smallest component bounds what the file must hold.
    uint64_t blocks = UINT64_MAX;
    for (int ci = 0; ci < info.num_components; ++ci)
      blocks = std::min<uint64_t>(blocks, uint64_t{info.comp_info[ci].width_in_blocks} * info.comp_info[ci].height_in_blocks);
    if (bytes.size() < blocks / 8)
      return make_error("image: corrupt JPEG: ", bytes.size(), " bytes cannot hold ", info.image_width, " x ",
                        info.image_height, " pixels (at least ", blocks / 8, ")");
  }
  KILN_TRY(admit_image(info.image_width, info.image_height, limits));
  KILN_ASSIGN_OR_RETURN(const JpegLayout layout, jpeg_layout(info));
  std::vector<JpegPlane> planes = layout.planes;
  const bool decoded = reader.read(bytes, Stage::Coefficients, &planes, memory_limit);
  if (reader.errors().truncated)
    return make_error("image: truncated JPEG: the data ends after ", bytes.size(), " bytes, before the image does");
  if (!decoded) return make_error("image: corrupt JPEG: ", reader.errors().message);
  RgbImage img;
  img.width = static_cast<int32_t>(info.image_width);
  img.height = static_cast<int32_t>(info.image_height);
  img.pixels.resize(static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * 3);
  jpeg_planes_to_rgb(planes, layout.h_max, layout.v_max, layout.colour, img);
  return img;
}

}  // namespace kiln::image_detail
