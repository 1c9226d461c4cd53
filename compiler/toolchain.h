// The system C++ compiler as the code generator's backend.
//
// Each compile runs `c++` in a fresh temporary folder under `temp_root`. The compiler gets its
// own process group, a time limit and an optional address-space limit. The folder is removed
// whatever happens: success, a compile error, a crash, or a timeout (which kills the whole
// group, so cc1plus, as and ld go too).
//
// Thread safety: a Toolchain is immutable after Probe; compiles may run concurrently from any
// threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hlocache::compiler {

struct ToolchainOptions {
  // The compiler: a path, or a name looked up in PATH.
  std::string cxx = "c++";
  // Where compiles make their temporary folders; empty for $TMPDIR, or /tmp without it.
  std::filesystem::path temp_root;
  // A compile still running after this long is killed.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // RLIMIT_AS for the compiler's processes; 0 for none.
  uint64_t memory_limit_bytes = 0;
  // False inside a compile worker: the compiler stays in the worker's process group, so killing
  // the worker's group kills the compiler too.
  bool own_process_group = true;
  // Compiler processes run side by side for the translation units of one module; 0 for one per
  // core of this machine.
  int jobs = 0;
  // Where GCC's precompiled preludes are kept (compiler/prelude_cache.h), shared with every
  // process of this user; empty for the default (~/.cache/hlocache/prelude), "-" for none.
  std::filesystem::path prelude_cache;
  // Where compiled translation units are kept by their text, compiler and flags
  // (compiler/object_cache.h), shared with every process of this user: a unit compiled before
  // is not compiled again. Empty for the default ($HLOCACHE_OBJECT_CACHE, else
  // ~/.cache/hlocache/objects), "-" for none.
  std::filesystem::path object_cache;
  // The bound on the object cache's bytes; least recently used units go first.
  uint64_t object_cache_bytes = uint64_t{1} << 30;
};

class Toolchain {
 public:
  // Finds the compiler and asks it for its version. kNotFound when it cannot be run;
  // kFailedPrecondition when it is not GCC or Clang.
  static Result<Toolchain> Probe(ToolchainOptions options);

  // "gcc-12.2.0" or "clang-14.0.6".
  const std::string& version() const { return version_; }
  const std::filesystem::path& cxx_path() const { return cxx_path_; }

  // The compiler id: toolchain version, code generator version and optimization flags, e.g.
  // "gcc-12.2.0/hlocache-codegen-19/O2/libmvec+cblas". Keys of executables built by another
  // toolchain or code generator never match.
  std::string CompilerId() const;

  // Compiles one C++ translation unit into a shared object for `target` (cpu-x86-64-vN) and
  // returns its bytes. Errors: kInvalidArgument for a target this toolchain cannot build for;
  // kInternal when the compiler fails (the message holds its first error lines) or dies of a
  // signal; kDeadlineExceeded when it runs past the time limit; kIoError for the temporary
  // folder.
  Result<std::string> CompileSharedObject(std::string_view source, std::string_view target) const;

  // The same for several translation units (compiler/codegen/cpu_units.h): each is compiled to an
  // object by its own compiler process, up to `jobs` at a time, then all are linked into one
  // shared object. The time limit covers the whole build; the first failing unit's error is
  // returned. Units (and a single unit's shared object) compiled before with the same compiler
  // and flags are taken from the object cache (ToolchainOptions::object_cache) instead.
  Result<std::string> CompileSharedObject(std::span<const std::string> units,
                                          std::string_view target) const;

  // The same, where every unit begins with `prelude`, a text common to every module (the CPU
  // generator's CpuUnitPrelude). GCC compiles the prelude once into a precompiled header
  // (compiler/prelude_cache.h) that this and later compiles read instead of its text, which
  // makes a small module's compile several times faster. The shared object does the same
  // thing either way: units that do not begin with the prelude, Clang, or a precompiled header
  // that cannot be made compile the whole text; a compile that fails with the header is tried
  // once more without it (its error is the one returned), and the header is made again when
  // the retry succeeds.
  Result<std::string> CompileSharedObject(std::span<const std::string> units,
                                          std::string_view target, std::string_view prelude) const;

 private:
  // Runs the compiler with `args` in `dir`, under what is left before `deadline`.
  Status RunCompiler(const std::vector<std::string>& args, const std::filesystem::path& dir,
                     const std::string& output_name,
                     std::chrono::steady_clock::time_point deadline) const;
  // Compiles `units` with `flags` in a fresh temporary folder and links them.
  Result<std::string> CompileUnits(std::span<const std::string> units,
                                   const std::vector<std::string>& flags,
                                   std::chrono::steady_clock::time_point deadline) const;

  Toolchain(ToolchainOptions options, std::filesystem::path cxx_path, std::string version,
            std::string identity)
      : options_(std::move(options)),
        cxx_path_(std::move(cxx_path)),
        version_(std::move(version)),
        identity_(std::move(identity)) {}

  ToolchainOptions options_;
  std::filesystem::path cxx_path_;
  std::string version_;
  // What tells this compiler from another in the object cache's keys: its path, the first
  // line of its --version, and the size and time of the program the path leads to (a compiler
  // upgraded in place gets new keys).
  std::string identity_;
};

// The flags a target compiles with ("-march=x86-64-v3"), or kInvalidArgument.
Result<std::string> TargetArchFlag(std::string_view target);

}  // namespace hlocache::compiler
