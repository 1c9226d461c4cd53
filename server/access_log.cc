#include "server/access_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

namespace hlocache::server {

std::string UtcTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buf;
}

std::string EscapeForLog(std::string_view text, bool json) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::unique_ptr<AccessLog>> AccessLog::Open(const std::string& destination, bool json) {
  if (destination == "-") return std::unique_ptr<AccessLog>(new AccessLog(stderr, false, json));
  std::FILE* file = std::fopen(destination.c_str(), "a");
  if (file == nullptr) {
    return Error(IoError("cannot open access log " + destination + ": " + std::strerror(errno)));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(file, true, json));
}

AccessLog::~AccessLog() {
  std::fflush(file_);
  if (owned_) std::fclose(file_);
}

void AccessLog::Write(const AccessRecord& r) {
  const std::string path = EscapeForLog(r.path.substr(0, 1024), json_);
  const std::string method = EscapeForLog(r.method.substr(0, 16), json_);
  const std::string remote = EscapeForLog(r.remote, json_);
  const std::string status = std::to_string(r.status);
  const std::string bytes = std::to_string(r.bytes);
  const std::string micros = std::to_string(r.micros);
  std::string line;
  if (json_) {
    line = "{\"time\":\"" + UtcTimestamp() + "\",\"remote\":\"" + remote + "\",\"method\":\"" +
           method + "\",\"path\":\"" + path + "\",\"status\":" + status + ",\"bytes\":" + bytes +
           ",\"us\":" + micros + "}\n";
  } else {
    line = UtcTimestamp() + " " + remote + " \"" + method + " " + path + "\" " + status + " " +
           bytes + " " + micros + "us\n";
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace hlocache::server
