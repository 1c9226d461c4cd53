// Names in the mounted file system: FUSE's absolute paths made relative, checked against what a
// file artifact may be called, and sorted into shared and host-local ones.
//
// Thread safety: pure functions and an immutable value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hlocache::mount {

// "/a/b" -> "a/b"; "/" -> "".
std::string Relative(const char* fuse_path);

// The parent of a relative path ("a/b" -> "a", "a" -> "").
std::string Parent(std::string_view path);

// 0, or the errno a name that cannot be stored gets: ENAMETOOLONG (a component over 255 bytes, a
// path over 4096), EILSEQ (not UTF-8), EINVAL (anything else ValidateFilePath refuses).
int NameError(std::string_view path);

class LocalNames {
 public:
  explicit LocalNames(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}
  // Whether any component of `path` matches a pattern.
  bool IsLocal(std::string_view path) const;

 private:
  std::vector<std::string> patterns_;
};

}  // namespace hlocache::mount
