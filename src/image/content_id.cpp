#include "image/content_id.h"

#include <openssl/evp.h>

#include "core/check.h"

namespace kiln {

std::string content_id(std::span<const uint8_t> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  KILN_ASSERT(ok == 1 && n == 32, "content_id: SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string id(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    id[2 * i] = hex[digest[i] >> 4];
    id[2 * i + 1] = hex[digest[i] & 15];
  }
  return id;
}

}  // namespace kiln
