#include "tests/integration/server_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "compiler/artifact/container.h"
#include "storage/http_backend.h"

namespace hlocache::testing {

namespace fs = std::filesystem;

ServerProcess::ServerProcess(const fs::path& binary, const fs::path& dir,
                             std::vector<std::string> args, std::vector<std::string> launcher) {
  log_path_ = dir.string() + ".server.log";
  fs::create_directories(dir.parent_path());
  std::error_code ec;
  fs::remove(dir / "server.json", ec);
  std::vector<std::string> argv_strings = std::move(launcher);
  argv_strings.insert(argv_strings.end(), {binary.string(), "serve", "--dir", dir.string()});
  if (std::find(args.begin(), args.end(), "--listen") == args.end()) {
    argv_strings.insert(argv_strings.end(), {"--listen", "127.0.0.1:0"});
  }
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return;
    }
    std::ifstream in(dir / "server.json");
    if (in) {
      auto j = nlohmann::json::parse(in, nullptr, false);
      if (!j.is_discarded() && j.value("pid", 0L) == pid_) {
        url_ = j.value("listen", std::string());
        port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Stop(SIGKILL);
}

int ServerProcess::Wait(std::chrono::seconds timeout) {
  if (pid_ <= 0) return exit_status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return exit_status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int ServerProcess::Stop(int signal, std::chrono::seconds timeout) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, signal);
  const int status = Wait(timeout);
  if (status == -1) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
    return -1;
  }
  return status;
}

std::string ServerProcess::output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<httplib::Client> ServerProcess::Client(const std::string& token) const {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
  client->set_tcp_nodelay(true);
  client->set_keep_alive(true);
  client->set_read_timeout(std::chrono::seconds(120));
  client->set_write_timeout(std::chrono::seconds(60));
  if (!token.empty()) client->set_bearer_token_auth(token.c_str());
  return client;
}

std::unique_ptr<httplib::Client> ServerProcess::TierClient(uint64_t upload_bytes) const {
  const storage::HttpBackendOptions defaults;
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
  client->set_tcp_nodelay(true);
  client->set_keep_alive(true);
  client->set_connection_timeout(defaults.connect_timeout);
  client->set_read_timeout(upload_bytes == 0
                               ? defaults.io_timeout
                               : UploadReplyTimeout(upload_bytes, defaults.io_timeout));
  client->set_write_timeout(defaults.io_timeout);
  return client;
}

std::string ServerProcess::SettledMetrics(const std::string& token) const {
  auto client = Client(token);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto metrics = client->Get("/metrics");
    if (metrics && metrics->status == 200 &&
        metrics->body.find("\nhlocache_requests_in_flight 1\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto metrics = client->Get("/metrics");
  return metrics && metrics->status == 200 ? metrics->body : std::string();
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool MakeSelfSignedCertificate(const fs::path& cert, const fs::path& key) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 -keyout " +
      key.string() + " -out " + cert.string() + " 2>/dev/null";
  return std::system(command.c_str()) == 0;
}

bool SendFully(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

int RawExchange(int port, const std::string& bytes, std::chrono::milliseconds timeout,
                std::string* reply) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return 0;
  SendFully(fd, bytes);
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool closed = false;
  while (std::chrono::steady_clock::now() < deadline) {
    timeval tv{0, 100000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      closed = true;
      break;
    }
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      // One complete reply is enough when the server keeps the connection open.
      const size_t end = got.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t cl = got.find("Content-Length: ");
        const size_t length = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
        if (got.size() >= end + 4 + length) break;
      }
    }
  }
  ::close(fd);
  if (reply) *reply = got;
  if (got.rfind("HTTP/1.", 0) == 0 && got.size() >= 12) return std::stoi(got.substr(9, 3));
  return closed ? 0 : -1;
}

std::string MakeArtifact(const std::string& key, size_t payload_bytes, uint64_t seed) {
  compiler::ArtifactHeader header;
  header.key = key;
  header.target = "cpu-x86-64-v2";
  header.compiler_id = "gcc-12.2.0/hlocache-codegen-3/O2";
  header.payload_kind = std::string(compiler::kPayloadSharedObject);
  header.entry_symbol = "hlocache_entry";
  header.result_shape = "f32[]";
  header.compile_seconds = 1.5;
  std::string payload(payload_bytes, '\0');
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < payload_bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(payload.data() + i, &v, std::min<size_t>(8, payload_bytes - i));
  }
  return compiler::EncodeArtifact(header, payload);
}

std::string CommandOutput(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen((command + " 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

std::string TestKey(uint64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "v1-%016llx%016llx", 0x5eedull,
                static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace hlocache::testing
