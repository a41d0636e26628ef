// SwapFile: an anonymous file in a directory (--swap-dir) that holds an evicted resident's bytes
// until it comes back. The file has no name from the moment it exists (O_TMPFILE; where the file
// system lacks it, a mode-0600 file made with O_EXCL and unlinked at once), so a crash leaves
// nothing behind; its blocks are freed when the object is destroyed.
// Thread-safety: none; its owner (a resident's evict/restore hooks) serializes access.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/result.h"

namespace kiln {

class SwapFile {
 public:
  // A new empty file in `dir`. Errors name the reason ("No such file or directory", "Read-only
  // file system"); the caller names the directory.
  static Result<std::unique_ptr<SwapFile>> create(const std::string& dir);
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Appends n bytes at the end; an Error with the reason ("No space left on device") when they
  // are not all written (the file is then of no use: drop it).
  Status append(const void* src, size_t n);
  // Reads bytes [offset, offset + n) written by append(); an Error when they are not all there.
  Status read(size_t offset, void* dst, size_t n) const;
  size_t size() const { return size_; }

 private:
  explicit SwapFile(int fd) : fd_(fd) {}
  int fd_;
  size_t size_ = 0;
};

// Whether `dir` can hold swap files: an Error with the reason when it is missing, not a directory
// or not writable (a file is made there, one byte written, and dropped).
Status check_swap_dir(const std::string& dir);

}  // namespace kiln
