// Test harness for `hlocache serve`: runs the real binary as a child process on a directory and
// a free loopback port, and talks to it over real sockets.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hlocache::testing {

class ServerProcess {
 public:
  // Starts `hlocache serve --dir DIR --listen 127.0.0.1:0 ARGS...` and waits until it has
  // written DIR/server.json. started() is false when the process exited first (exit_status()
  // and output() say why). `launcher` comes before the command and must exec it in place
  // (e.g. {"ip", "netns", "exec", NAME}); Client() reaches only servers in this namespace.
  ServerProcess(const std::filesystem::path& binary, const std::filesystem::path& dir,
                std::vector<std::string> args = {}, std::vector<std::string> launcher = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool started() const { return port_ > 0; }
  int port() const { return port_; }
  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits for the exit; the exit status (or 128 + signal), -1 on timeout.
  int Stop(int signal = SIGTERM, std::chrono::seconds timeout = std::chrono::seconds(60));
  // Waits for the process to exit by itself.
  int Wait(std::chrono::seconds timeout);
  // What the server printed (stdout and stderr).
  std::string output() const;

  // An HTTP client for this server (plain HTTP; keep-alive on, nodelay on), with waits long
  // enough for any request a test makes (compiles included).
  std::unique_ptr<httplib::Client> Client(const std::string& token = "") const;
  // A client that waits as hlocache's own HTTP tier does (storage::HttpBackendOptions' timeouts;
  // for an upload of `upload_bytes`, UploadReplyTimeout for its answer), keep-alive
  // on: what a server must answer within for hlocache's clients to get their answer.
  std::unique_ptr<httplib::Client> TierClient(uint64_t upload_bytes = 0) const;
  // The body of GET /metrics once every request answered before this call is counted, or ""
  // when no scrape succeeded. A quick-path request is counted just after its reply is sent,
  // so a client can hold its reply before the count moves: this waits (up to 10 s) for a
  // scrape that sees no request in flight but its own, and returns the scrape after it.
  std::string SettledMetrics(const std::string& token = "") const;

 private:
  std::filesystem::path log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string url_;
};

// A TCP socket connected to 127.0.0.1:port, or -1.
int ConnectLoopback(int port);

// A self-signed certificate and its key for 127.0.0.1 (subject and IP address), made with
// `openssl req`; false when openssl failed.
bool MakeSelfSignedCertificate(const std::filesystem::path& cert, const std::filesystem::path& key);

// Writes all of `bytes` to the socket `fd` (no SIGPIPE); false when the socket failed first.
bool SendFully(int fd, const std::string& bytes);

// Writes raw bytes to 127.0.0.1:port and reads the reply until the server closes the
// connection or `timeout` passes. The reply's status code, 0 when the connection closed with no
// reply, -1 when the server neither replied nor closed in time.
int RawExchange(int port, const std::string& bytes,
                std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::string* reply = nullptr);

// A well-formed artifact container of exactly `total_bytes` (>= 41 plus the header) for `key`,
// with pseudo-random payload bytes from `seed`.
std::string MakeArtifact(const std::string& key, size_t payload_bytes, uint64_t seed);

// "v1-" and 32 hex digits from `n`.
std::string TestKey(uint64_t n);

// What a shell command prints, standard output and error together.
std::string CommandOutput(const std::string& command);

// A valid module the code generator does not support (a custom call: code of another
// runtime): servers answer 422.
inline constexpr const char* kUnsupportedModule =
    "HloModule s\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT s = f32[4] custom-call(a), "
    "custom_call_target=\"lapack_sgetrf\"\n}\n";

}  // namespace hlocache::testing
