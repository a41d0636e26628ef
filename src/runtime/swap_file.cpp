#include "runtime/swap_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {

Result<std::unique_ptr<SwapFile>> SwapFile::create(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return make_error(std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return make_error("not a directory");
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without O_TMPFILE: a private name, unlinked at once.
    std::string name = dir + "/kiln-swap-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);  // O_EXCL, mode 0600
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) return make_error(std::strerror(errno));
  return std::unique_ptr<SwapFile>(new SwapFile(fd));
}

SwapFile::~SwapFile() { ::close(fd_); }

Status SwapFile::append(const void* src, size_t n) {
  const char* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(size_));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return make_error(std::strerror(errno));
    if (w == 0) return make_error("the file takes no more bytes");
    p += w;
    n -= static_cast<size_t>(w);
    size_ += static_cast<size_t>(w);
  }
  return ok_status();
}

Status SwapFile::read(size_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) return make_error("read past the end of the swap file");
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return make_error(std::strerror(errno));
    if (r == 0) return make_error("the swap file is shorter than what was written to it");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<size_t>(r);
  }
  return ok_status();
}

Status check_swap_dir(const std::string& dir) {
  KILN_ASSIGN_OR_RETURN(auto file, SwapFile::create(dir));
  const char byte = 0;
  return file->append(&byte, 1);
}

}  // namespace kiln
