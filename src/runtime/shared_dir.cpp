#include "runtime/shared_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::shared_dir {

Status prepare(const std::string& dir, std::string_view who) {
  if (dir.empty()) return make_error(who, " needs a directory");
  if (::mkdir(dir.c_str(), 0700) == 0) return {};
  if (errno != EEXIST) return make_error(who, ": cannot make ", dir, ": ", std::strerror(errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return make_error(who, ": ", dir, ": ", std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return make_error(who, ": ", dir, " is a symbolic link (give the folder itself)");
  if (!S_ISDIR(st.st_mode)) return make_error(who, ": ", dir, " is not a directory");
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  const bool foreign = st.st_uid != ::geteuid();
  if ((foreign || others_write) && (st.st_mode & S_ISVTX) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(who, ": ", dir, " (mode ", mode, foreign ? ", owned by another user" : "",
                      ") lets others replace the files kiln shares there: use a folder of your own that only you "
                      "can write, or set its sticky bit (chmod +t)");
  }
  return {};
}

int open_file(const std::string& path, int flags, mode_t mode) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
  ::close(fd);
  errno = EINVAL;  // not a regular file (fstat does not fail on an open descriptor)
  return -1;
}

}  // namespace kiln::shared_dir
