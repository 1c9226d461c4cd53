#include "compiler/toolchain.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/file.h"
#include "compiler/object_cache.h"
#include "compiler/prelude_cache.h"
#include "compiler/subprocess.h"
#include "compiler/target.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

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
  return options.temp_root.empty() ? DefaultTempRoot() : options.temp_root;
}

fs::path ObjectCacheRoot(const ToolchainOptions& options) {
  if (options.object_cache == "-") return {};
  return options.object_cache.empty() ? DefaultObjectCacheRoot() : options.object_cache;
}

fs::path PreludeCacheRoot(const ToolchainOptions& options) {
  if (options.prelude_cache == "-") return {};
  return options.prelude_cache.empty() ? DefaultPreludeCacheRoot() : options.prelude_cache;
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
  if (const int level = CpuTargetLevel(target); level != 0) {
    return "-march=x86-64-v" + std::to_string(level);
  }
  return Error(InvalidArgument("target '" + std::string(target) +
                               "' is not one the C++ toolchain builds (cpu-x86-64-v2, -v3, -v4)"));
}

Result<Toolchain> Toolchain::Probe(ToolchainOptions options) {
  HLOCACHE_ASSIGN_OR_RETURN(fs::path cxx, FindProgram(options.cxx));
  HLOCACHE_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make(TempRoot(options), "hlocache-compile-"));
  HLOCACHE_ASSIGN_OR_RETURN(
      ProcessOutcome outcome,
      RunProcess(cxx, {"--version"}, dir.path(), ProcessLimits{std::chrono::seconds(30)}));
  if (outcome.exit_code != 0) {
    return Error(NotFound("C++ compiler " + cxx.string() +
                          " --version failed: " + FirstLines(outcome.output, 3)));
  }
  std::string version = ParseVersion(outcome.output);
  if (version.empty()) {
    return Error(FailedPrecondition("C++ compiler " + cxx.string() +
                                    " is neither GCC nor Clang: " + FirstLines(outcome.output, 1)));
  }
  std::string identity = cxx.string() + "\n" + FirstLines(outcome.output, 1);
  std::error_code ec;
  const fs::path program = fs::canonical(cxx, ec);
  struct stat st {};
  if (!ec && ::stat(program.c_str(), &st) == 0) {
    identity += "\n" + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec);
  }
  return Toolchain(std::move(options), std::move(cxx), std::move(version), std::move(identity));
}

std::string Toolchain::CompilerId() const {
  return version_ + "/" + kCodegenVersion + "/" + kOptimization + "/" + kCpuHostNeeds;
}

Result<std::string> Toolchain::CompileSharedObject(std::string_view source,
                                                   std::string_view target) const {
  const std::string unit(source);
  return CompileSharedObject(std::span<const std::string>(&unit, 1), target);
}

Result<std::string> Toolchain::CompileSharedObject(std::span<const std::string> units,
                                                   std::string_view target) const {
  return CompileSharedObject(units, target, std::string_view());
}

Result<std::string> Toolchain::CompileSharedObject(std::span<const std::string> units,
                                                   std::string_view target,
                                                   std::string_view prelude) const {
  HLOCACHE_ASSIGN_OR_RETURN(std::string arch, TargetArchFlag(target));
  if (units.empty()) return Error(InvalidArgument("no translation units to compile"));
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  const std::vector<std::string> flags = {
      "-" + std::string(kOptimization), arch, "-std=c++17",
      // Each HLO op rounds its result: no fused multiply-add may skip a rounding (GCC
      // contracts by default in C++).
      "-ffp-contract=off",
      // The prelude's f32 math is declared `omp simd` (glibc's vector math library), and loops
      // the lowering marks so are vectorized; errno, which no generated code reads, would keep
      // the math scalar.
      "-fopenmp-simd", "-fno-math-errno",
      // A hot inner loop of a few instructions that straddles a 32-byte fetch window ran 25%
      // slower (a split row reduction, measured here): loop heads start a window.
      "-falign-loops=32", "-fPIC", "-fvisibility=hidden", "-pipe"};
  // Only GCC finds a precompiled header through -include by itself (Clang needs -include-pch).
  const bool precompile = !prelude.empty() && version_.starts_with("gcc-") &&
                          std::all_of(units.begin(), units.end(), [&](const std::string& u) {
                            return std::string_view(u).starts_with(prelude);
                          });
  if (precompile) {
    std::string identity = cxx_path_.string() + "\n" + version_;
    for (const std::string& f : flags) identity += "\n" + f;
    const auto header = FindOrMakePrecompiledPrelude(
        PreludeCacheRoot(options_), identity, prelude, deadline,
        [&](const fs::path& h, const fs::path& gch) -> Status {
          std::vector<std::string> args = flags;
          args.insert(args.end(), {"-x", "c++-header", h.string(), "-o", gch.string()});
          return RunCompiler(args, h.parent_path(), "precompile.txt", deadline);
        });
    if (header) {
      std::vector<std::string> rest;
      rest.reserve(units.size());
      for (const std::string& u : units) rest.push_back(u.substr(prelude.size()));
      std::vector<std::string> with_header = flags;
      with_header.insert(with_header.end(), {"-include", header->string()});
      auto so = CompileUnits(rest, with_header, deadline);
      if (so || so.error().code() == StatusCode::kDeadlineExceeded) return so;
      // The units may be at fault, or the precompiled header (damaged, or removed while read):
      // the whole text decides, and a header it succeeds without is made again next time.
      auto whole = CompileUnits(units, flags, deadline);
      if (whole) ForgetPrecompiledPrelude(*header);
      return whole;
    }
  }
  return CompileUnits(units, flags, deadline);
}

Status Toolchain::RunCompiler(const std::vector<std::string>& args, const fs::path& dir,
                              const std::string& output_name,
                              std::chrono::steady_clock::time_point deadline) const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  const std::string limit =
      std::to_string(std::chrono::duration<double>(options_.timeout).count()) + " s";
  if (left.count() <= 0) {
    return DeadlineExceeded("the C++ compiler ran past its time limit of " + limit);
  }
  HLOCACHE_ASSIGN_OR_RETURN(
      ProcessOutcome outcome,
      RunProcess(cxx_path_, args, dir,
                 ProcessLimits{left, options_.memory_limit_bytes, 0, options_.own_process_group},
                 output_name));
  if (outcome.timed_out) {
    return DeadlineExceeded("the C++ compiler ran past its time limit of " + limit +
                            " and was killed");
  }
  if (outcome.signal != 0) {
    return Internal("the C++ compiler was killed by signal " + std::to_string(outcome.signal) +
                    " (" + strsignal(outcome.signal) + "): " + FirstLines(outcome.output, 5));
  }
  if (outcome.exit_code != 0) {
    return Internal("the C++ compiler failed (exit status " + std::to_string(outcome.exit_code) +
                    "): " + FirstLines(outcome.output, 5));
  }
  return Status::Ok();
}

namespace {

// glibc's vector math library, for the prelude's f32 functions: a shared object depends on it
// only when its code calls it (--as-needed). It ships with glibc (libc6), on every host that
// runs these artifacts; one older than 2.35 lacks some of its functions and refuses to load
// the artifact, naming the missing symbol version.
constexpr std::array<const char*, 2> kLinkLibraries = {"-Wl,--as-needed", "-lmvec"};

}  // namespace

Result<std::string> Toolchain::CompileUnits(std::span<const std::string> units,
                                            const std::vector<std::string>& flags,
                                            std::chrono::steady_clock::time_point deadline) const {
  const ObjectCache cache(ObjectCacheRoot(options_), options_.object_cache_bytes);
  // A unit's key: the compiler, what it makes of the unit (one object, or a shared object of
  // the unit alone), its flags (a precompiled prelude's path names its text's hash) and the text.
  auto key_of = [&](std::string_view output, const std::string& unit) {
    std::string key = "hlocache-object-1\n" + identity_ + "\n" + std::string(output);
    for (const std::string& f : flags) key += "\n" + f;
    for (const char* library : kLinkLibraries) key += std::string("\n") + library;
    return key + "\n\n" + unit;
  };
  if (units.size() == 1 && cache.enabled()) {
    if (auto so = cache.Find(key_of("shared", units[0]))) return std::move(*so);
  }
  HLOCACHE_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make(TempRoot(options_), "hlocache-compile-"));
  auto name = [&](size_t u, const char* ext) {
    return units.size() == 1 ? std::string("module") + ext : "unit" + std::to_string(u) + ext;
  };
  // Units whose objects the cache holds are not written or compiled.
  std::vector<bool> cached(units.size(), false);
  if (units.size() > 1 && cache.enabled()) {
    for (size_t u = 0; u < units.size(); ++u) {
      auto object = cache.Find(key_of("object", units[u]));
      if (!object) continue;
      std::ofstream out(dir.path() / name(u, ".o"), std::ios::binary);
      out.write(object->data(), static_cast<std::streamsize>(object->size()));
      out.close();
      cached[u] = static_cast<bool>(out);
    }
  }
  for (size_t u = 0; u < units.size(); ++u) {
    if (cached[u]) continue;
    std::ofstream out(dir.path() / name(u, ".cc"), std::ios::binary);
    out.write(units[u].data(), static_cast<std::streamsize>(units[u].size()));
    out.close();
    if (!out) return Error(IoError("cannot write the generated source in " + dir.path().string()));
  }
  if (units.size() == 1) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"-shared", "-o", "module.so", "module.cc"});
    args.insert(args.end(), kLinkLibraries.begin(), kLinkLibraries.end());
    HLOCACHE_RETURN_IF_ERROR(RunCompiler(args, dir.path(), "output.txt", deadline));
  } else {
    std::vector<size_t> to_compile;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!cached[u]) to_compile.push_back(u);
    }
    // Units are taken in order by up to `jobs` threads, each running one compiler at a time.
    const size_t jobs = std::min<size_t>(
        to_compile.size(), options_.jobs > 0 ? static_cast<size_t>(options_.jobs)
                                             : std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::vector<Status> results(units.size());
    std::atomic<bool> failed{false};
    auto worker = [&] {
      for (size_t n; !failed && (n = next.fetch_add(1)) < to_compile.size();) {
        const size_t u = to_compile[n];
        std::vector<std::string> args = flags;
        args.insert(args.end(), {"-c", "-o", name(u, ".o"), name(u, ".cc")});
        results[u] = RunCompiler(args, dir.path(), name(u, ".txt"), deadline);
        if (!results[u].ok()) {
          failed = true;
        } else if (auto object = ReadWholeFile(dir.path() / name(u, ".o")); object) {
          cache.Store(key_of("object", units[u]), *object);
        }
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < jobs; ++t) threads.emplace_back(worker);
    if (jobs > 0) worker();
    for (std::thread& t : threads) t.join();
    for (const Status& s : results) HLOCACHE_RETURN_IF_ERROR(s);
    std::vector<std::string> args = {"-shared", "-fPIC", "-o", "module.so"};
    for (size_t u = 0; u < units.size(); ++u) args.push_back(name(u, ".o"));
    args.insert(args.end(), kLinkLibraries.begin(), kLinkLibraries.end());
    HLOCACHE_RETURN_IF_ERROR(RunCompiler(args, dir.path(), "link.txt", deadline));
  }
  std::string so = ReadWholeFile(dir.path() / "module.so").value_or("");
  if (so.empty()) return Error(Internal("the C++ compiler succeeded but wrote no shared object"));
  if (units.size() == 1) cache.Store(key_of("shared", units[0]), so);
  return so;
}

}  // namespace hlocache::compiler
