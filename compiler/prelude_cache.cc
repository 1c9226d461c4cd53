#include "compiler/prelude_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/fast_hash.h"
#include "common/file.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeaderName = "prelude.h";
constexpr const char* kPrecompiledName = "prelude.h.gch";

std::string FolderName(std::string_view identity, std::string_view prelude) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  const uint64_t identity_size = identity.size();
  XXH3_128bits_update(state, &identity_size, sizeof identity_size);
  XXH3_128bits_update(state, identity.data(), identity.size());
  XXH3_128bits_update(state, prelude.data(), prelude.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return Hex128(h);
}

bool IsComplete(const fs::path& folder) {
  std::error_code ec;
  return fs::is_regular_file(folder / kPrecompiledName, ec) &&
         fs::is_regular_file(folder / kHeaderName, ec);
}

// Marks the folder as just used, for the pruning below.
void Touch(const fs::path& folder) { ::utimensat(AT_FDCWD, folder.c_str(), nullptr, 0); }

// Keeps the kMaxPreludes most recently used folders under `root`, and removes folders being
// made for over an hour (their makers died).
void Prune(const fs::path& root) {
  std::vector<std::pair<fs::file_time_type, fs::path>> folders;
  std::error_code ec;
  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  // Iterated with error codes: folders may vanish meanwhile (another process pruning), which
  // must not throw.
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    std::error_code entry_error;
    if (!e.is_directory(entry_error)) continue;
    const auto used = e.last_write_time(entry_error);
    if (entry_error) continue;
    if (name.starts_with("making-")) {
      if (used < an_hour_ago) fs::remove_all(e.path(), entry_error);
      continue;
    }
    if (name.size() != 32) continue;
    folders.emplace_back(used, e.path());
  }
  if (folders.size() <= kMaxPreludes) return;
  std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a > b; });
  for (size_t i = kMaxPreludes; i < folders.size(); ++i) {
    fs::remove_all(folders[i].second, ec);
    fs::remove(folders[i].second.string() + ".lock", ec);
  }
}

// An exclusive flock on `path`, released when this goes away (or the process dies).
class FileLock {
 public:
  // Waits until `deadline` for the lock; false when it could not be had.
  bool Acquire(const fs::path& path, std::chrono::steady_clock::time_point deadline) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return false;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

fs::path DefaultPreludeCacheRoot() {
  const fs::path folder = UserCacheFolder();
  return folder.empty() ? folder : folder / "prelude";
}

std::optional<fs::path> FindOrMakePrecompiledPrelude(const fs::path& root,
                                                     std::string_view identity,
                                                     std::string_view prelude,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     const PrecompileFn& precompile) {
  if (root.empty()) return std::nullopt;
  const std::string name = FolderName(identity, prelude);
  const fs::path folder = root / name;
  if (IsComplete(folder)) {
    Touch(folder);
    return folder / kHeaderName;
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return std::nullopt;
  FileLock lock;
  if (!lock.Acquire(root / (name + ".lock"), deadline)) return std::nullopt;
  if (IsComplete(folder)) {  // Made by whoever held the lock before.
    Touch(folder);
    return folder / kHeaderName;
  }
  fs::remove_all(folder, ec);  // An incomplete one, from before the lock was taken.
  std::string tmpl = (root / ("making-" + name + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) return std::nullopt;
  const fs::path aside(tmpl);
  {
    std::ofstream out(aside / kHeaderName, std::ios::binary);
    out.write(prelude.data(), static_cast<std::streamsize>(prelude.size()));
    out.close();
    if (!out || !precompile(aside / kHeaderName, aside / kPrecompiledName).ok() ||
        !IsComplete(aside) || ::rename(aside.c_str(), folder.c_str()) != 0) {
      fs::remove_all(aside, ec);
      // A maker that did not see the lock (its file pruned meanwhile) may have put one there.
      if (IsComplete(folder)) return folder / kHeaderName;
      return std::nullopt;
    }
  }
  Prune(root);
  return folder / kHeaderName;
}

void ForgetPrecompiledPrelude(const fs::path& header) {
  std::error_code ec;
  fs::remove_all(header.parent_path(), ec);
}

}  // namespace hlocache::compiler
