// The memory read rate a plain streaming loop reaches on this machine: the roof for one-token
// decoding, which reads every weight once per token (issue 38 asks decode to reach 90% of it).
//
//   build/release/stream_read [GIB|FILE] [THREADS] [PASSES]  (defaults: 2 GiB, 2 threads, 10 passes)
//
// A buffer of GIB GiB (about a 1.1B F16 model's weights), allocated and advised into transparent
// huge pages as the CPU device allocates weights (MADV_HUGEPAGE), written once, then read whole
// PASSES times. With a FILE instead (a GGUF, say), the file is mapped read-only as llama.cpp maps
// a model and its page-cache pages are read the same way (the first pass reads it in). In each pass every thread reads one contiguous share (as a one-token product's
// rows are shared out) front to back, 64 bytes per step, adding the words into four accumulators
// so the loads cannot be dropped; the passes' start and end are common barriers. Prints each
// pass's GB/s (10^9 bytes per second) and the median and best. The loop uses AVX-512 where the
// CPU has it and AVX2 otherwise (chosen at run time, like kiln's kernels); the rate is the
// memory's, not the instruction set's, which the two variants' agreement shows.
#include <immintrin.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

__attribute__((target("avx512f"))) uint64_t read_avx512(const char* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2"))) uint64_t read_avx2(const char* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

int main(int argc, char** argv) {
  const char* arg = argc > 1 ? argv[1] : "2";
  char* end_of_number = nullptr;
  const double gib = std::strtod(arg, &end_of_number);
  const bool from_file = *end_of_number != '\0';
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 10;
  const bool force_avx2 = std::getenv("KILN_CPU") != nullptr && std::strcmp(std::getenv("KILN_CPU"), "avx2") == 0;
  if ((!from_file && gib <= 0) || threads < 1 || passes < 1) {
    std::fprintf(stderr, "usage: stream_read [GIB > 0] [THREADS >= 1] [PASSES >= 1]\n");
    return 2;
  }
  constexpr size_t kHuge = size_t{2} << 20;
  size_t bytes = 0;
  char* buf = nullptr;
  if (from_file) {
    const int fd = open(arg, O_RDONLY);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) {
      std::fprintf(stderr, "stream_read: cannot open %s\n", arg);
      return 1;
    }
    bytes = static_cast<size_t>(st.st_size) / 256 * 256;
    void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "stream_read: cannot map %s\n", arg);
      return 1;
    }
    buf = static_cast<char*>(m);
  } else {
    bytes = static_cast<size_t>(gib * (1 << 30)) / kHuge * kHuge;
    buf = static_cast<char*>(std::aligned_alloc(kHuge, bytes));
    if (buf == nullptr) {
      std::fprintf(stderr, "stream_read: cannot allocate %zu bytes\n", bytes);
      return 1;
    }
    madvise(buf, bytes, MADV_HUGEPAGE);
    std::memset(buf, 1, bytes);
  }
  const bool avx512 = !force_avx2 && __builtin_cpu_supports("avx512f");
  auto read = avx512 ? read_avx512 : read_avx2;

  // Shares are whole 256-byte steps so every thread's loop runs to its end.
  const size_t steps = bytes / 256;
  std::vector<double> seconds(static_cast<size_t>(passes));
  std::atomic<uint64_t> sink{0};
  std::barrier sync(threads);
  std::chrono::steady_clock::time_point t0;
  auto worker = [&](int t) {
    const size_t begin = steps * static_cast<size_t>(t) / static_cast<size_t>(threads) * 256;
    const size_t end = steps * static_cast<size_t>(t + 1) / static_cast<size_t>(threads) * 256;
    for (int p = 0; p < passes; ++p) {
      sync.arrive_and_wait();
      if (t == 0) t0 = std::chrono::steady_clock::now();
      sync.arrive_and_wait();
      sink += read(buf + begin, end - begin);
      sync.arrive_and_wait();
      if (t == 0) seconds[static_cast<size_t>(p)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : pool) th.join();

  std::vector<double> rates;
  std::printf("stream_read: %.2f GiB %s, %d threads, %s loads\n", static_cast<double>(bytes) / (1 << 30),
              from_file ? "mapped from the file" : "anonymous, huge pages advised", threads, avx512 ? "AVX-512" : "AVX2");
  for (int p = 0; p < passes; ++p) {
    rates.push_back(static_cast<double>(bytes) / seconds[static_cast<size_t>(p)] / 1e9);
    std::printf("pass %d: %.1f GB/s\n", p + 1, rates.back());
  }
  std::sort(rates.begin(), rates.end());
  std::printf("median %.1f GB/s, best %.1f GB/s (checksum %llu)\n", rates[rates.size() / 2], rates.back(),
              static_cast<unsigned long long>(sink.load() & 0xff));
  if (!from_file) std::free(buf);
  return 0;
}
