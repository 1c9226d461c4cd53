#include "compiler/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/file.h"

namespace hlocache::compiler {
namespace fs = std::filesystem;

Result<TempDir> TempDir::Make(const fs::path& root, const std::string& prefix) {
  std::string tmpl = (root / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Error(IoError("cannot make a temporary folder in " + root.string() + ": " +
                         std::strerror(errno)));
  }
  return TempDir(tmpl);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path DefaultTempRoot() {
  const char* tmp = ::getenv("TMPDIR");
  return (tmp != nullptr && *tmp != '\0') ? fs::path(tmp) : fs::path("/tmp");
}

namespace {

void SleepMs(long ms) {
  struct timespec ts {
    ms / 1000, (ms % 1000) * 1000000
  };
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void SetLimit(int resource, uint64_t value) {
  if (value == 0) return;
  struct rlimit limit {
    value, value
  };
  ::setrlimit(resource, &limit);
}

}  // namespace

Result<ProcessOutcome> RunProcess(const fs::path& program, const std::vector<std::string>& args,
                                  const fs::path& cwd, const ProcessLimits& limits,
                                  const std::string& output_name,
                                  const std::function<void(pid_t)>& on_started) {
  // Everything the child needs is prepared before the child starts.
  const std::string program_str = program.string();
  const std::string cwd_str = cwd.string();
  const std::string output_path = (cwd / output_name).string();
  std::vector<std::string> argv_storage;
  argv_storage.push_back(program_str);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  // vfork, not fork: fork runs the handlers libraries register with pthread_atfork, and
  // OpenBLAS's (loaded for executables' dots, compiler/artifact/blas_runtime.h) deadlocks when
  // two threads fork at once (OpenBLAS issue 2270); vfork runs none, and copies no page tables.
  // The child shares our memory until execv: it only makes system calls on what is prepared
  // above, and never returns from this function.
  const pid_t pid = ::vfork();
  if (pid < 0) {
    return Error(IoError("cannot start " + program_str + ": " + std::strerror(errno)));
  }
  const bool group = limits.own_process_group;
  if (pid == 0) {
    // A server blocks SIGTERM and ignores SIGPIPE in its threads; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (group) ::setpgid(0, 0);
    SetLimit(RLIMIT_AS, limits.memory_bytes);
    SetLimit(RLIMIT_CPU, limits.cpu_seconds);
    const int out = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(out, STDERR_FILENO) < 0 ||
        ::chdir(cwd_str.c_str()) != 0) {
      ::_exit(126);
    }
    const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_in >= 0) ::dup2(null_in, STDIN_FILENO);
    ::execv(program_str.c_str(), argv.data());
    ::_exit(127);
  }
  if (group) ::setpgid(pid, pid);  // Here too: the group exists before any kill.
  const pid_t target = group ? -pid : pid;
  if (on_started) on_started(pid);

  ProcessOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  int status = 0;
  long nap_ms = 1;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      ::kill(target, SIGKILL);
      return Error(IoError("cannot wait for " + program_str + ": " + std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome.timed_out = true;
      ::kill(target, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    SleepMs(nap_ms);
    nap_ms = std::min(nap_ms * 2, 50L);
  }
  if (group) ::kill(-pid, SIGKILL);  // Whatever it left running in its group.
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  outcome.output = ReadWholeFile(output_path).value_or("");
  return outcome;
}

std::string FirstLines(const std::string& output, size_t max_lines) {
  std::istringstream in(output);
  std::string line, out;
  size_t n = 0;
  while (n < max_lines && std::getline(in, line)) {
    if (line.empty()) continue;
    if (!out.empty()) out += " | ";
    out += line;
    ++n;
  }
  return out.empty() ? "(no output)" : out;
}

}  // namespace hlocache::compiler
