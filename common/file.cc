#include "common/file.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hlocache {

Result<std::string> ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(NotFound(path.string() + ": cannot be opened"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error(IoError(path.string() + ": read failed"));
  return ss.str();
}

std::filesystem::path CurrentExecutable() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("hlocache") : self;
}

std::filesystem::path UserCacheFolder() {
  if (const char* xdg = ::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::filesystem::path(xdg) / "hlocache";
  }
  if (const char* home = ::getenv("HOME"); home != nullptr && *home == '/') {
    return std::filesystem::path(home) / ".cache" / "hlocache";
  }
  return {};
}

}  // namespace hlocache
