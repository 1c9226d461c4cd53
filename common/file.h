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

// The running executable's path (/proc/self/exe), or "hlocache" (found through PATH) when it
// cannot be read. Compile workers are started as this binary.
std::filesystem::path CurrentExecutable();

}  // namespace hlocache
