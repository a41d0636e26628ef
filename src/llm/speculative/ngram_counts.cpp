#include "llm/speculative/ngram_counts.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

namespace kiln {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Little-endian int32 fields of a lookup-cache file, read one at a time from a buffered stream.
class FieldReader {
 public:
  explicit FieldReader(FILE* f) : f_(f) {}
  // False at the end of the file (also mid-field: check at_clean_end()).
  bool next(int32_t* v) {
    uint8_t b[4];
    const size_t n = fread(b, 1, 4, f_);
    offset_ += n;
    if (n < 4) {
      partial_ = n > 0;
      return false;
    }
    *v = static_cast<int32_t>(static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                              static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24);
    return true;
  }
  bool partial() const { return partial_; }
  size_t offset() const { return offset_; }

 private:
  FILE* f_;
  size_t offset_ = 0;
  bool partial_ = false;
};

bool put(FILE* f, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  const uint8_t b[4] = {static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8), static_cast<uint8_t>(u >> 16),
                        static_cast<uint8_t>(u >> 24)};
  return fwrite(b, 1, 4, f) == 4;
}

}  // namespace

size_t NgramCounts::NgramHash::operator()(const Ngram& g) const {
  // ref: llama.cpp common_ngram_hash_function: token * 11400714819323198485 (the token widened
  // to 64 bits as C++ converts an int to unsigned long long), xor over the four tokens.
  auto fib = [](int32_t t) { return static_cast<uint64_t>(static_cast<int64_t>(t)) * 11400714819323198485ull; };
  uint64_t h = fib(g.tokens[0]);
  for (int i = 1; i < kMaxNgram; ++i) h ^= fib(g.tokens[static_cast<size_t>(i)]);
  return static_cast<size_t>(h);
}

void NgramCounts::add(std::span<const int32_t> tokens, int n_min, int n_max, size_t n_new) {
  const auto size = static_cast<int64_t>(tokens.size());
  const int64_t first_new = size - static_cast<int64_t>(std::min(n_new, tokens.size()));
  for (int64_t n = n_min; n <= n_max; ++n) {
    for (int64_t i = std::max(first_new, n); i < size; ++i) {
      Ngram g;
      g.tokens.fill(kNoToken);
      for (int64_t j = 0; j < n; ++j) g.tokens[static_cast<size_t>(j)] = tokens[static_cast<size_t>(i - n + j)];
      ++map_[g][tokens[static_cast<size_t>(i)]];
    }
  }
}

void NgramCounts::merge(const NgramCounts& other) {
  for (const auto& [ngram, following] : other.map_) {
    auto it = map_.find(ngram);
    if (it == map_.end()) {
      map_.emplace(ngram, following);
      continue;
    }
    // Saturating where llama.cpp's int32 would overflow (a file then stays readable).
    for (const auto& [token, count] : following) {
      int32_t& c = it->second[token];
      c = c > INT32_MAX - count ? INT32_MAX : c + count;
    }
  }
}

const NgramCounts::Following* NgramCounts::find(const Ngram& g) const {
  const auto it = map_.find(g);
  return it == map_.end() ? nullptr : &it->second;
}

Result<NgramCounts> NgramCounts::load(const std::string& path, int32_t n_vocab) {
  File f(fopen(path.c_str(), "rb"));
  if (!f) return make_error(path, ": ", std::strerror(errno));
  NgramCounts out;
  FieldReader r(f.get());
  auto bad = [&](const char* what) {
    return make_error(path, ": not a lookup cache: ", what, " at byte ", r.offset());
  };
  auto is_token = [&](int32_t t) { return t >= 0 && t < n_vocab; };
  for (;;) {
    Ngram g;
    if (!r.next(&g.tokens[0])) {
      if (r.partial()) return bad("truncated record");
      break;  // the end, between records
    }
    for (size_t i = 1; i < g.tokens.size(); ++i)
      if (!r.next(&g.tokens[i])) return bad("truncated record");
    // The n-gram's tokens first, then only kNoToken.
    size_t n = 0;
    while (n < g.tokens.size() && g.tokens[n] != kNoToken) {
      if (!is_token(g.tokens[n])) return bad("a token outside the model's vocabulary");
      ++n;
    }
    if (n == 0) return bad("an empty n-gram");
    for (size_t i = n; i < g.tokens.size(); ++i)
      if (g.tokens[i] != kNoToken) return bad("a malformed n-gram");
    int32_t k = 0;
    if (!r.next(&k)) return bad("truncated record");
    if (k <= 0) return bad("a record of no tokens");
    // As llama.cpp (emplace): a repeated n-gram or token keeps its first record.
    Following following;
    for (int32_t i = 0; i < k; ++i) {
      int32_t token = 0, count = 0;
      if (!r.next(&token) || !r.next(&count)) return bad("truncated record");
      if (!is_token(token)) return bad("a token outside the model's vocabulary");
      if (count <= 0) return bad("a count that is not positive");
      following.emplace(token, count);
    }
    out.map_.emplace(g, std::move(following));
  }
  if (ferror(f.get())) return make_error(path, ": ", std::strerror(errno));
  return out;
}

Status NgramCounts::save(const std::string& path) const {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return make_error(path, ": ", std::strerror(errno));
  fchmod(fd, 0644);  // mkstemp's 0600 would hide the cache from the user's other accounts' tools
  File f(fdopen(fd, "wb"));
  if (!f) {
    const int e = errno;
    close(fd);
    unlink(tmp.c_str());
    return make_error(path, ": ", std::strerror(e));
  }
  bool written = true;
  for (const auto& [ngram, following] : map_) {
    for (int32_t t : ngram.tokens) written = written && put(f.get(), t);
    written = written && put(f.get(), static_cast<int32_t>(following.size()));
    for (const auto& [token, count] : following) written = written && put(f.get(), token) && put(f.get(), count);
    if (!written) break;
  }
  const int e = errno;
  const bool closed = fclose(f.release()) == 0;
  if (!written || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = !written ? e : errno;
    unlink(tmp.c_str());
    return make_error(path, ": cannot write: ", std::strerror(why));
  }
  return ok_status();
}

}  // namespace kiln
