#include "api/handles.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "llm/kv_cache.h"

namespace kiln::api {
namespace {

std::mutex g_handles_mu;
std::unordered_set<const void*>& live_handles() {
  static auto* handles = new std::unordered_set<const void*>();  // never destroyed: used at exit
  return *handles;
}

}  // namespace

void register_handle(const void* handle) {
  std::lock_guard lock(g_handles_mu);
  live_handles().insert(handle);
}

void unregister_handle(const void* handle) {
  std::lock_guard lock(g_handles_mu);
  live_handles().erase(handle);
}

bool is_live(const void* handle) {
  std::lock_guard lock(g_handles_mu);
  return live_handles().contains(handle);
}

kiln_status check_handle(std::string_view function, std::string_view what, const void* handle) {
  if (handle == nullptr) return bad_argument(function, std::string(what) + " is NULL");
  if (!is_live(handle)) return bad_argument(function, std::string(what) + " is not a live handle (freed?)");
  return KILN_OK;
}

kiln_status check_pointer(std::string_view function, std::string_view what, const void* pointer) {
  return pointer != nullptr ? KILN_OK : bad_argument(function, std::string(what) + " is NULL");
}

kiln_status check_size(std::string_view function, std::string_view what, int64_t value) {
  if (value >= 0) return KILN_OK;
  return bad_argument(function, std::string(what) + " is negative (" + std::to_string(value) + ")");
}

kiln_status check_token(std::string_view function, const kiln_model& model, int32_t token) {
  const int64_t n_vocab = model.model->hparams().n_vocab;
  if (token >= 0 && token < n_vocab) return KILN_OK;
  return bad_argument(function, "token " + std::to_string(token) + " is outside the vocabulary (0.." +
                                    std::to_string(n_vocab - 1) + ")");
}

kiln_status check_sequence(std::string_view function, std::string_view what, int32_t seq) {
  if (seq >= 0 && seq < kMaxSequences) return KILN_OK;
  return bad_argument(function, std::string(what) + " " + std::to_string(seq) + " is outside [0, " +
                                    std::to_string(kMaxSequences) + ")");
}

kiln_status write_text(std::string_view function, std::string_view text, char* buf, int64_t size,
                       int64_t* length) {
  KILN_API_TRY(check_size(function, "size", size));
  KILN_API_TRY(check_pointer(function, "length", length));
  if (size > 0) {
    KILN_API_TRY(check_pointer(function, "buf", buf));
    const size_t n = std::min(text.size(), static_cast<size_t>(size - 1));
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  *length = static_cast<int64_t>(text.size());
  return KILN_OK;
}

}  // namespace kiln::api
