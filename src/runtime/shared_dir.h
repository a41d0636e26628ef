// Folders that processes share (--sim-shared, --arbiter): the checks and the way files are opened
// there, so that someone else who can write into the folder cannot redirect kiln's files.
//
// A missing folder is made with mode 0700 (the user's own processes share it). An existing one must
// be a directory, not a symbolic link; one owned by another user, or writable by group or others,
// must have the sticky bit (as /tmp: nobody but a file's owner removes or replaces it), else it is
// refused. Files there are opened without following symbolic links, without blocking on a FIFO,
// and must be regular files.
// Stateless; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/result.h"

namespace kiln::shared_dir {

// Makes `dir` (one level) or checks the existing one, as above. Errors start with `who` ("sim:
// --sim-shared", "arbiter: --arbiter") and name the folder and the reason.
Status prepare(const std::string& dir, std::string_view who);

// open(2) of `path` with O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC added to `flags`, and a check that
// it is a regular file: the descriptor, or -1 with errno set (ELOOP for a symbolic link, EINVAL for
// something that is not a regular file).
int open_file(const std::string& path, int flags, mode_t mode = 0666);

}  // namespace kiln::shared_dir
