// MappedFile: a read-only memory map of a whole file. Owns the mapping; views into bytes() are
// valid while the MappedFile lives. Thread-safe to read.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/result.h"

namespace kiln {

class MappedFile {
 public:
  // Errors name the path and the reason: "cannot open 'PATH': No such file or directory".
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Takes the pages that lie wholly inside bytes [offset, offset + n) out of this process
  // (madvise(MADV_DONTNEED); the range is page-aligned inward, so pages shared with bytes outside
  // it stay). The mapping is private and read-only: the pages stay in the kernel's page cache and
  // the next read of them faults them back in, with the file's bytes. Safe while other threads
  // read the range.
  void drop_pages(size_t offset, size_t n) const;
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kiln
