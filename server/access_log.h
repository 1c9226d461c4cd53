// One line per request: time, client, method, path, status, bytes sent, microseconds. Plain
// text by default, or one JSON object per line. Request paths are escaped to printable ASCII;
// headers (tokens included) are never logged.
//
// Thread safety: Write may be called from any thread; lines are never interleaved.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache::server {

struct AccessRecord {
  std::string_view remote;
  std::string_view method;
  std::string_view path;
  int status = 0;
  uint64_t bytes = 0;
  int64_t micros = 0;
};

class AccessLog {
 public:
  // "-" for stderr, or a file opened for appending. kIoError when it cannot be opened.
  static Result<std::unique_ptr<AccessLog>> Open(const std::string& destination, bool json);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void Write(const AccessRecord& record);

 private:
  AccessLog(std::FILE* file, bool owned, bool json) : file_(file), owned_(owned), json_(json) {}
  std::mutex mu_;
  std::FILE* file_;
  bool owned_;
  bool json_;
};

// Now, in ISO 8601 UTC with milliseconds: "2026-11-23T17:30:22.123Z".
std::string UtcTimestamp();

// `text` with bytes outside printable ASCII, quotes and backslashes written as \xNN (or, for a
// JSON string, \u00NN).
std::string EscapeForLog(std::string_view text, bool json = false);

}  // namespace hlocache::server
