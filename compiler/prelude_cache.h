// Preludes compiled once: GCC precompiled headers kept on disk for every later compile.
//
// Every translation unit the CPU generator writes begins with the same thousand lines (its
// prelude and runtime functions), and g++ spends most of a small module's compile parsing them:
// measured here, 1.2 s for a module compiled whole against 0.3 s with the prelude read from a
// precompiled header. So the toolchain compiles the prelude once per compiler, flags and text,
// and every later compile, in this process or another, reads the result.
//
// Layout: ROOT/<32 hex digits>/prelude.h and prelude.h.gch, the digits a hash of the compiler,
// its flags and the prelude's text, so a new compiler, target or prelude gets a folder of its own
// and never reads another's. A folder is made aside and renamed into place whole, so a reader
// sees a complete one or none; makers of the same folder take turns on a lock file beside it
// (flock: a maker that dies releases it). Using a folder touches it; when one is added, all but
// the most recently used kMaxPreludes are removed.
//
// Failure-tolerant by design: a root that cannot be made or written, a compiler that fails on
// the header, or a lock held too long give no precompiled header, and the caller compiles the
// prelude with each unit as it would without one. GCC itself checks that a precompiled header
// was made by the same compiler with compatible flags, and reads the header's text otherwise.
//
// Thread safety: functions may be called from any threads and processes at once.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace hlocache::compiler {

// The folders kept under a root: one per compiler, target and prelude in use.
inline constexpr size_t kMaxPreludes = 8;

// $XDG_CACHE_HOME/hlocache/prelude, else $HOME/.cache/hlocache/prelude; empty when neither is
// set (no precompiled preludes).
std::filesystem::path DefaultPreludeCacheRoot();

// Compiles `header` (a prelude.h) into `gch`, or says why not.
using PrecompileFn =
    std::function<Status(const std::filesystem::path& header, const std::filesystem::path& gch)>;

// The path of a prelude.h whose precompiled header lies beside it, for `-include`: found under
// `root` for `identity` (the compiler and its flags) and `prelude`, or made there now with
// `precompile`. nullopt when there is none and none could be made before `deadline`; the caller
// then compiles without it.
std::optional<std::filesystem::path> FindOrMakePrecompiledPrelude(
    const std::filesystem::path& root, std::string_view identity, std::string_view prelude,
    std::chrono::steady_clock::time_point deadline, const PrecompileFn& precompile);

// Removes the folder of `header` (as returned above): called when a compile that read it failed
// where one without it succeeded, so a damaged precompiled header is made again next time.
void ForgetPrecompiledPrelude(const std::filesystem::path& header);

}  // namespace hlocache::compiler
