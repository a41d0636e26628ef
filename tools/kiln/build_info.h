// What `kiln --version` says about the build; defined in a file generated at every build
// (tools/kiln/build_info.cmake).
#pragma once

namespace kiln::cli {

extern const char* const kVersion;    // the project's version (CMakeLists.txt)
extern const char* const kCommit;     // git commit, "+modified" with uncommitted changes; or "unknown"
extern const char* const kBuildType;  // CMAKE_BUILD_TYPE

}  // namespace kiln::cli
