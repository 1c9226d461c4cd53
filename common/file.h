// Whole-file reads, for the small files child processes leave behind (compiler output, a
// shared object, an artifact) and for the files commands are given.
//
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace hlocache {

// The file's bytes. kNotFound when it cannot be opened; kIoError when a read fails.
Result<std::string> ReadWholeFile(const std::filesystem::path& path);

// Reads what is left of descriptor `fd` into `out` (replacing its contents), sized once from
// fstat for a regular file and read in large pieces, so a module of megabytes is neither copied
// on regrowth nor zero-filled first. 0, or the errno of the failing read; EFBIG once more than
// `max_bytes` were read.
int ReadAll(int fd, std::string& out, size_t max_bytes);

// The running executable's path (/proc/self/exe), or "hlocache" (found through PATH) when it
// cannot be read. Compile workers are started as this binary.
std::filesystem::path CurrentExecutable();

// This user's cache folder for hlocache: $XDG_CACHE_HOME/hlocache, else $HOME/.cache/hlocache
// (either only when absolute); empty when neither is set.
std::filesystem::path UserCacheFolder();

}  // namespace hlocache
