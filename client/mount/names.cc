#include "client/mount/names.h"

#include <fnmatch.h>

#include <cerrno>

#include "cache/key.h"

namespace hlocache::mount {

std::string Relative(const char* fuse_path) {
  std::string_view p = fuse_path == nullptr ? "" : fuse_path;
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  return std::string(p);
}

std::string Parent(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(path.substr(0, slash));
}

int NameError(std::string_view path) {
  if (cache::ValidateFilePath(path).ok()) return 0;
  if (path.size() > 4096) return ENAMETOOLONG;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash - start > 255) return ENAMETOOLONG;
    start = slash + 1;
  }
  const Status s = cache::ValidateFilePath(path);
  return s.message().find("UTF-8") != std::string::npos ? EILSEQ : EINVAL;
}

bool LocalNames::IsLocal(std::string_view path) const {
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string component(path.substr(start, slash - start));
    for (const std::string& pattern : patterns_) {
      if (::fnmatch(pattern.c_str(), component.c_str(), 0) == 0) return true;
    }
    start = slash + 1;
  }
  return false;
}

}  // namespace hlocache::mount
