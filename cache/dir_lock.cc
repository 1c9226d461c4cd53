#include "cache/dir_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace hlocache::cache {
namespace {

// fcntl locks do not exclude the process that holds them, so the process keeps its own list.
std::mutex& HeldMutex() {
  // Never destroyed: a store may still be closing while static objects are destroyed at exit
  // (a cache held by a static), and its lock must still find these.
  static std::mutex& mu = *new std::mutex;
  return mu;
}
std::set<std::string>& Held() {
  static std::set<std::string>& held = *new std::set<std::string>;
  return held;
}

std::string CommandLineOf(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  if (raw.size() > 160) raw = raw.substr(0, 157) + "...";
  return raw;
}

std::string DescribeHolder(const std::filesystem::path& dir, long pid) {
  std::string who = "another process";
  if (pid > 0) {
    who = "process " + std::to_string(pid);
    const std::string cmd = CommandLineOf(pid);
    if (!cmd.empty()) who += " (" + cmd + ")";
  }
  std::string message = "store " + dir.string() + " is in use by " + who;
  if (auto server = ReadServerInfo(dir); server && (pid <= 0 || server->pid == pid)) {
    message += "; its server.json says it serves on " + server->listen +
               ": use that server, or stop it first";
  } else {
    message += "; one process owns a store directory at a time: share it through `hlocache serve`";
  }
  return message;
}

}  // namespace

Result<std::unique_ptr<DirLock>> DirLock::Acquire(const std::filesystem::path& dir) {
  std::error_code ec;
  std::string canonical = std::filesystem::weakly_canonical(dir, ec).string();
  if (ec) canonical = std::filesystem::absolute(dir).string();
  {
    std::lock_guard<std::mutex> lock(HeldMutex());
    if (Held().count(canonical)) {
      return Error(Unavailable("store " + dir.string() + " is already open in this process"));
    }
  }
  const std::filesystem::path path = dir / "lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot open " + path.string() + ": " + std::strerror(err);
    if (err == EACCES || err == EPERM || err == EROFS) return Error(PermissionDenied(message));
    return Error(IoError(message));
  }
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd, F_SETLK, &fl) != 0) {
    long holder = 0;
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) holder = probe.l_pid;
    ::close(fd);
    return Error(Unavailable(DescribeHolder(dir, holder)));
  }
  // The holder's pid, for people reading the directory by hand.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  std::lock_guard<std::mutex> lock(HeldMutex());
  Held().insert(canonical);
  return std::unique_ptr<DirLock>(new DirLock(fd, canonical));
}

DirLock::~DirLock() {
  ::close(fd_);  // Releases the fcntl lock.
  std::lock_guard<std::mutex> lock(HeldMutex());
  Held().erase(canonical_dir_);
}

Status WriteServerInfo(const std::filesystem::path& dir, const ServerInfo& info) {
  nlohmann::json j = {{"pid", info.pid}, {"listen", info.listen}, {"started", info.started}};
  const std::filesystem::path tmp = dir / "server.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return IoError("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir / "server.json", ec);
  if (ec) return IoError("cannot write " + (dir / "server.json").string() + ": " + ec.message());
  return Status::Ok();
}

void RemoveServerInfo(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove(dir / "server.json", ec);
}

std::optional<ServerInfo> ReadServerInfo(const std::filesystem::path& dir) {
  std::ifstream in(dir / "server.json");
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  ServerInfo info;
  if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) info.pid = it->get<long>();
  if (auto it = j.find("listen"); it != j.end() && it->is_string()) {
    info.listen = it->get<std::string>();
  }
  if (auto it = j.find("started"); it != j.end() && it->is_string()) {
    info.started = it->get<std::string>();
  }
  return info;
}

}  // namespace hlocache::cache
