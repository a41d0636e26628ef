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

namespace {

// Moves n bytes through `io(done, left)` (one pread or pwrite of the `left` bytes after the first
// `done`), retrying after a signal; an Error with the reason, or `short_text` when io moves none.
template <typename Io>
Status move_all(size_t n, Io io, const char* short_text) {
  for (size_t done = 0; done < n;) {
    const ssize_t k = io(done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return make_error(std::strerror(errno));
    if (k == 0) return make_error(short_text);
    done += static_cast<size_t>(k);
  }
  return ok_status();
}

}  // namespace

Status SwapFile::append(const void* src, size_t n) {
  const char* p = static_cast<const char*>(src);
  KILN_TRY(move_all(
      n, [&](size_t done, size_t left) { return ::pwrite(fd_, p + done, left, static_cast<off_t>(size_ + done)); },
      "the file takes no more bytes"));
  size_ += n;
  return ok_status();
}

Status SwapFile::read(size_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) return make_error("read past the end of the swap file");
  char* p = static_cast<char*>(dst);
  return move_all(
      n, [&](size_t done, size_t left) { return ::pread(fd_, p + done, left, static_cast<off_t>(offset + done)); },
      "the swap file is shorter than what was written to it");
}

Status check_swap_dir(const std::string& dir) {
  KILN_ASSIGN_OR_RETURN(auto file, SwapFile::create(dir));
  const char byte = 0;
  return file->append(&byte, 1);
}

}  // namespace kiln
