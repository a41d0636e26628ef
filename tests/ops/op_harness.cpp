#include "op_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "core/half.h"
#include "ops/quant/quant.h"

namespace kiln::test {
namespace {

constexpr uint8_t kSentinel = 0xA7;
constexpr size_t kFrontGuard = 64;
// No guard after the last element: under ASan (CI's sanitizer pass) any read or write past a
// tensor's end is a heap-buffer-overflow; gaps and the front guard hold the sentinel.
constexpr size_t kBackGuard = 0;

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n) {
    const size_t rounded = (std::max<size_t>(n, 1) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    data = static_cast<uint8_t*>(std::aligned_alloc(kScratchAlign, rounded));
  }
  ~AlignedBuffer() { std::free(data); }
  void fill_garbage() {
    // 0xFF bytes are NaNs as floats: a kernel that reads scratch it did not write shows it.
    std::memset(data, 0xFF, size);
  }
  uint8_t* data;
  size_t size;
};

void run_phases_whole(const OpCall& call, const KernelPlan& plan, void* scratch) {
  for (int ph = 0; ph < plan.n_phases; ++ph) run_kernel(call, ph, 0, plan.units[ph], scratch);
}

void run_phases_split(const OpCall& call, const KernelPlan& plan, void* scratch) {
  static constexpr int64_t kChunks[] = {1, 4, 2, 7, 3, 13, 5};
  constexpr int kThreads = 3;
  for (int ph = 0; ph < plan.n_phases; ++ph) {
    std::vector<std::vector<std::pair<int64_t, int64_t>>> work(kThreads);
    int64_t begin = 0;
    for (size_t c = 0; begin < plan.units[ph]; ++c) {
      const int64_t end = std::min(plan.units[ph], begin + kChunks[c % std::size(kChunks)]);
      work[c % kThreads].emplace_back(begin, end);
      begin = end;
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (auto it = work[t].rbegin(); it != work[t].rend(); ++it)
          run_kernel(call, ph, it->first, it->second, scratch);
      });
    }
    for (auto& th : threads) th.join();  // the barrier between phases
  }
}

}  // namespace

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Padded:
      return "padded";
    case Layout::Permuted:
      return "permuted";
    case Layout::Strided0:
      return "strided0";
  }
  return "?";
}

HostTensor::HostTensor(DType type, Shape4 ne, Layout layout) {
  const DTypeInfo& ti = info(type);
  KILN_ASSERT(!(ti.quantized && (layout == Layout::Permuted || layout == Layout::Strided0)),
              "quantized test tensors are contiguous or padded");
  KILN_ASSERT(ne[0] % ti.block_size == 0, "row not whole blocks");
  view_.type = type;
  view_.ne = ne;
  const size_t es = ti.type_size;
  const size_t nblocks0 = static_cast<size_t>(ne[0] / ti.block_size);
  const size_t step0 = layout == Layout::Strided0 ? 2 * es : es;
  const size_t row_span = step0 * nblocks0;
  view_.nb[0] = step0;
  switch (layout) {
    case Layout::Contiguous:
    case Layout::Strided0:
      view_.nb[1] = row_span;
      view_.nb[2] = view_.nb[1] * ne[1];
      view_.nb[3] = view_.nb[2] * ne[2];
      break;
    case Layout::Padded:
      view_.nb[1] = row_span + 16;
      view_.nb[2] = view_.nb[1] * ne[1] + 48;
      view_.nb[3] = view_.nb[2] * ne[2] + 80;
      break;
    case Layout::Permuted:
      view_.nb[2] = row_span;
      view_.nb[1] = view_.nb[2] * ne[2];
      view_.nb[3] = view_.nb[1] * ne[1];
      break;
  }
  size_t span = es;  // the last element's bytes
  for (int i = 0; i < kMaxDims; ++i)
    span += static_cast<size_t>(i == 0 ? nblocks0 - 1 : ne[i] - 1) * view_.nb[i];
  buf_.assign(kFrontGuard + span + kBackGuard, kSentinel);
  inside_.assign(buf_.size(), 0);
  view_.data = buf_.data() + kFrontGuard;
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (size_t b = 0; b < nblocks0; ++b) {
          const size_t off =
              static_cast<size_t>(row(i1, i2, i3) - reinterpret_cast<char*>(buf_.data())) + b * step0;
          std::fill(inside_.begin() + static_cast<std::ptrdiff_t>(off),
                    inside_.begin() + static_cast<std::ptrdiff_t>(off + es), 1);
        }
  // Elements start zeroed; the sentinel stays outside.
  for (size_t i = 0; i < buf_.size(); ++i) {
    if (inside_[i]) buf_[i] = 0;
  }
}

char* HostTensor::row(int64_t i1, int64_t i2, int64_t i3) const {
  return static_cast<char*>(view_.data) + i1 * view_.nb[1] + i2 * view_.nb[2] + i3 * view_.nb[3];
}

double HostTensor::get(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  const char* p = row(i1, i2, i3) + i0 * view_.nb[0];
  switch (view_.type) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default:
      KILN_ASSERT(false, "HostTensor::get: unsupported type");
  }
}

void HostTensor::set(int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
  char* p = row(i1, i2, i3) + i0 * view_.nb[0];
  switch (view_.type) {
    case DType::F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::F16: {
      const _Float16 h = static_cast<_Float16>(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::BF16: {
      const float f = round_bf16(static_cast<float>(v));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::I32: {
      const int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      return;
    }
    default:
      KILN_ASSERT(false, "HostTensor::set: unsupported type");
  }
}

void HostTensor::fill_uniform(std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i3 = 0; i3 < view_.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < view_.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < view_.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < view_.ne[0]; ++i0) {
          const double v = dist(rng);
          set(i0, i1, i2, i3, view_.type == DType::I32 ? std::floor(v) : v);
        }
}

void HostTensor::set_quantized(const std::vector<float>& values) {
  KILN_ASSERT(values.size() == static_cast<size_t>(view_.nelements()), "set_quantized: size");
  std::vector<uint8_t> tmp(view_.row_bytes());
  int64_t r = 0;
  for (int64_t i3 = 0; i3 < view_.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < view_.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < view_.ne[1]; ++i1, ++r) {
        quantize_chunk(view_.type, values.data() + r * view_.ne[0], tmp.data(), 1, view_.ne[0], nullptr);
        std::memcpy(row(i1, i2, i3), tmp.data(), tmp.size());
      }
}

bool HostTensor::outside_untouched() const {
  for (size_t i = 0; i < buf_.size(); ++i) {
    if (!inside_[i] && buf_[i] != kSentinel) return false;
  }
  return true;
}

OpCall make_call(OpKind kind, const HostTensor& dst, std::vector<const HostTensor*> srcs, OpParams params) {
  OpCall call;
  call.kind = kind;
  call.dst = dst.view();
  call.n_src = static_cast<int>(srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) call.src[i] = srcs[i]->view();
  call.params = params;
  return call;
}

void run_checked(const OpCall& call, HostTensor& dst) {
  const Status st = check_kernel(call);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_TRUE(kernel_supported(call));
  const KernelPlan plan = plan_kernel(call);
  AlignedBuffer scratch(plan.scratch_bytes);
  const std::vector<uint8_t> before = dst.bytes();

  scratch.fill_garbage();
  run_phases_whole(call, plan, scratch.data);
  const std::vector<uint8_t> whole = dst.bytes();

  dst.bytes() = before;
  scratch.fill_garbage();
  run_phases_split(call, plan, scratch.data);
  EXPECT_TRUE(dst.bytes() == whole) << op_name(call.kind)
                                    << ": split ranges gave different bytes than one range";
  EXPECT_TRUE(dst.outside_untouched()) << op_name(call.kind) << ": wrote outside its dst view";
}

void expect_near(const HostTensor& dst, const std::function<double(int64_t, int64_t, int64_t, int64_t)>& ref,
                 double atol, double rtol, const std::string& what) {
  const auto& ne = dst.ne();
  int failures = 0;
  double max_err = 0.0;
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
          const double want = ref(i0, i1, i2, i3);
          const double got = dst.get(i0, i1, i2, i3);
          bool ok;
          if (std::isnan(want)) {
            ok = std::isnan(got);
          } else if (std::isinf(want)) {
            ok = got == want;
          } else {
            const double err = std::fabs(got - want);
            max_err = std::max(max_err, err);
            ok = err <= atol + rtol * std::fabs(want);
          }
          if (!ok && ++failures <= 5) {
            ADD_FAILURE() << what << ": at [" << i0 << ", " << i1 << ", " << i2 << ", " << i3 << "] got "
                          << got << ", want " << want << " (atol " << atol << ", rtol " << rtol << ")";
          }
        }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " mismatches, max abs error " << max_err;
}

float round_f16(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

float round_bf16(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  const double scaled = std::ldexp(static_cast<double>(x), 8 - e);
  return static_cast<float>(std::ldexp(std::nearbyint(scaled), e - 8));  // ties to even (default mode)
}

}  // namespace kiln::test
