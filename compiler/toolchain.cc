#include "compiler/toolchain.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCodegenVersion = "hlocache-codegen-1";
constexpr std::string_view kOptimization = "O2";

// A temporary folder, removed with everything in it when this goes away.
class TempDir {
 public:
  static Result<TempDir> Make(const fs::path& root) {
    std::string tmpl = (root / "hlocache-compile-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Error(IoError("cannot make a temporary folder in " + root.string() + ": " +
                           std::strerror(errno)));
    }
    return TempDir(tmpl);
  }
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

struct ProcessOutcome {
  bool timed_out = false;
  int exit_code = -1;  // When it exited.
  int signal = 0;      // When a signal ended it.
  std::string output;  // stdout and stderr together.
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void SleepMs(long ms) {
  struct timespec ts {
    ms / 1000, (ms % 1000) * 1000000
  };
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Runs `program` with `args` in `cwd`, in a process group of its own, its output in a file of
// `cwd`. Kills the group when `timeout` passes, and in any case once the program has exited (so
// nothing it started outlives it).
Result<ProcessOutcome> RunProcess(const fs::path& program, const std::vector<std::string>& args,
                                  const fs::path& cwd, std::chrono::milliseconds timeout,
                                  uint64_t memory_limit) {
  // Everything the child needs is prepared before fork: between fork and exec it only makes
  // async-signal-safe calls.
  const std::string program_str = program.string();
  const std::string cwd_str = cwd.string();
  const std::string output_path = (cwd / "compiler-output.txt").string();
  std::vector<std::string> argv_storage;
  argv_storage.push_back(program_str);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0)
    return Error(IoError(std::string("cannot start the compiler: ") + std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (memory_limit != 0) {
      struct rlimit limit {
        memory_limit, memory_limit
      };
      ::setrlimit(RLIMIT_AS, &limit);
    }
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
  ::setpgid(pid, pid);  // Also here: whichever runs first, the group exists before any kill.

  ProcessOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  long nap_ms = 1;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      ::kill(-pid, SIGKILL);
      return Error(IoError(std::string("cannot wait for the compiler: ") + std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome.timed_out = true;
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    SleepMs(nap_ms);
    nap_ms = std::min(nap_ms * 2, 50L);
  }
  ::kill(-pid, SIGKILL);  // Whatever it left running in its group.
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  outcome.output = ReadFile(output_path);
  return outcome;
}

// The first lines of a compiler's output that say what went wrong.
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

Result<fs::path> FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return fs::path(name);
    return Error(NotFound("C++ compiler " + name + " cannot be run: " + std::strerror(errno)));
  }
  const char* path_env = ::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return Error(NotFound("no C++ compiler '" + name + "' in PATH (" + path +
                        "); install g++ or clang, or name one"));
}

fs::path TempRoot(const ToolchainOptions& options) {
  if (!options.temp_root.empty()) return options.temp_root;
  const char* tmp = ::getenv("TMPDIR");
  return (tmp != nullptr && *tmp != '\0') ? fs::path(tmp) : fs::path("/tmp");
}

// "gcc-12.2.0" or "clang-14.0.6" from `--version` output, or empty.
std::string ParseVersion(const std::string& output) {
  std::istringstream in(output);
  std::string first_line;
  std::getline(in, first_line);
  const bool clang = first_line.find("clang") != std::string::npos;
  const bool gcc = !clang && (output.find("Free Software Foundation") != std::string::npos ||
                              first_line.find("g++") != std::string::npos ||
                              first_line.find("GCC") != std::string::npos);
  if (!clang && !gcc) return "";
  std::istringstream words(first_line);
  std::string word, number, previous;
  while (words >> word) {
    const bool numeric = !word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
                         word.find('.') != std::string::npos;
    if (numeric && (gcc || previous == "version")) number = word;  // GCC: the last one.
    if (numeric && clang && previous == "version") break;
    previous = word;
  }
  number = number.substr(0, number.find_first_not_of("0123456789."));
  if (number.empty()) return "";
  return std::string(clang ? "clang-" : "gcc-") + number;
}

}  // namespace

Result<std::string> TargetArchFlag(std::string_view target) {
  for (std::string_view level : {"v2", "v3", "v4"}) {
    if (target == "cpu-x86-64-" + std::string(level)) return "-march=x86-64-" + std::string(level);
  }
  return Error(InvalidArgument("target '" + std::string(target) +
                               "' is not one the C++ toolchain builds (cpu-x86-64-v2, -v3, -v4)"));
}

Result<Toolchain> Toolchain::Probe(ToolchainOptions options) {
  HLOCACHE_ASSIGN_OR_RETURN(fs::path cxx, FindProgram(options.cxx));
  HLOCACHE_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make(TempRoot(options)));
  HLOCACHE_ASSIGN_OR_RETURN(ProcessOutcome outcome, RunProcess(cxx, {"--version"}, dir.path(),
                                                               std::chrono::seconds(30), 0));
  if (outcome.exit_code != 0) {
    return Error(NotFound("C++ compiler " + cxx.string() +
                          " --version failed: " + FirstLines(outcome.output, 3)));
  }
  std::string version = ParseVersion(outcome.output);
  if (version.empty()) {
    return Error(FailedPrecondition("C++ compiler " + cxx.string() +
                                    " is neither GCC nor Clang: " + FirstLines(outcome.output, 1)));
  }
  return Toolchain(std::move(options), std::move(cxx), std::move(version));
}

std::string Toolchain::CompilerId() const {
  return version_ + "/" + std::string(kCodegenVersion) + "/" + std::string(kOptimization);
}

Result<std::string> Toolchain::CompileSharedObject(std::string_view source,
                                                   std::string_view target) const {
  HLOCACHE_ASSIGN_OR_RETURN(std::string arch, TargetArchFlag(target));
  HLOCACHE_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make(TempRoot(options_)));
  {
    std::ofstream out(dir.path() / "module.cc", std::ios::binary);
    out.write(source.data(), static_cast<std::streamsize>(source.size()));
    out.close();
    if (!out) return Error(IoError("cannot write the generated source in " + dir.path().string()));
  }
  const std::vector<std::string> args = {"-" + std::string(kOptimization),
                                         arch,
                                         "-std=c++17",
                                         "-fPIC",
                                         "-shared",
                                         "-fvisibility=hidden",
                                         "-pipe",
                                         "-o",
                                         "module.so",
                                         "module.cc"};
  HLOCACHE_ASSIGN_OR_RETURN(
      ProcessOutcome outcome,
      RunProcess(cxx_path_, args, dir.path(), options_.timeout, options_.memory_limit_bytes));
  if (outcome.timed_out) {
    return Error(
        ResourceExhausted("the C++ compiler ran past its time limit of " +
                          std::to_string(std::chrono::duration<double>(options_.timeout).count()) +
                          " s and was killed"));
  }
  if (outcome.signal != 0) {
    return Error(Internal("the C++ compiler was killed by signal " +
                          std::to_string(outcome.signal) + " (" + strsignal(outcome.signal) +
                          "): " + FirstLines(outcome.output, 5)));
  }
  if (outcome.exit_code != 0) {
    return Error(Internal("the C++ compiler failed (exit status " +
                          std::to_string(outcome.exit_code) +
                          "): " + FirstLines(outcome.output, 5)));
  }
  std::string so = ReadFile(dir.path() / "module.so");
  if (so.empty()) return Error(Internal("the C++ compiler succeeded but wrote no shared object"));
  return so;
}

}  // namespace hlocache::compiler
