// Local media files for `file://` image URLs, read from the one folder `kiln serve --media-path DIR`
// names (llama-server's flag; without it file:// URLs are refused).
//
// A URL's path is relative to that folder and checked before anything is opened, by llama-server's
// rules (fs_validate_filename with subfolders allowed): at most 255 bytes of valid UTF-8, no control
// characters, none of `: * ? " < > |`, no `..`, no leading or trailing space and no trailing dot.
// kiln is stricter in one point: the file's real path (symbolic links resolved) must lie inside the
// folder's real path, so a link placed in the folder cannot reach out of it.
//
// Thread-safety: reentrant (reads the file system only).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace kiln::serve {

// Whether `path` (the part after file://) passes llama-server's file-name rules above.
bool valid_media_file_name(std::string_view path);

// The bytes of media_dir/`path`; an Error naming the problem (not allowed, missing, not a regular
// file, larger than max_bytes, outside the folder). `media_dir` must name an existing folder.
Result<std::string> read_media_file(const std::string& media_dir, std::string_view path, size_t max_bytes);

}  // namespace kiln::serve
