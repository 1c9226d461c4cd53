// `hlocache prewarm PATH... --cache SPEC`: compile every .hlo under the paths into a cache, the
// way CI warms a cache before a fleet starts.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iomanip>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>

#include "client/cache.h"
#include "client/commands.h"
#include "common/file.h"

namespace hlocache::client {
namespace {

namespace fs = std::filesystem;

enum class Outcome { kCompiled, kCached, kUnsupported, kFailed };

std::vector<std::string> HloFiles(const std::vector<std::string>& paths, std::ostream& err,
                                  bool& missing) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      files.push_back(path);
    } else if (fs::is_directory(path, ec)) {
      for (auto it = fs::recursive_directory_iterator(path, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && it->path().extension() == ".hlo") {
          files.push_back(it->path().string());
        }
      }
    } else {
      err << "hlocache prewarm: " << path << ": no such file or directory\n";
      missing = true;
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace

int RunPrewarm(const std::vector<std::string>& paths, const PrewarmSettings& settings,
               std::ostream& out, std::ostream& err) {
  bool missing = false;
  const std::vector<std::string> files = HloFiles(paths, err, missing);
  if (missing) return 1;
  if (files.empty()) {
    err << "hlocache prewarm: no .hlo files under the given paths\n";
    return 1;
  }
  CacheOptions options = CacheOptions::FromEnvironment();
  options.worker_binary = settings.worker_binary;
  options.cxx = settings.cxx;
  options.compile_workers = std::max(settings.jobs, 1);
  options.memory_bytes = 0;  // Nothing is run here: keep no executables loaded.
  std::mutex log_mu;
  std::vector<std::string> notes;
  options.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    notes.emplace_back(line);
  };
  auto cache = Cache::Open(settings.cache, options);
  if (!cache) {
    err << "hlocache prewarm: " << cache.error().message() << "\n";
    return 1;
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::map<Outcome, int> counts;
  std::vector<std::string> failures;
  size_t done = 0;
  auto report = [&](Outcome outcome, const std::string& file, const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu);
    ++counts[outcome];
    ++done;
    if (outcome == Outcome::kFailed) failures.push_back(file + ": " + detail);
    if (tty) {
      const int width = 30;
      const int filled = static_cast<int>(width * done / files.size());
      err << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done
          << "/" << files.size() << "  compiled " << counts[Outcome::kCompiled] << "  cached "
          << counts[Outcome::kCached] << "  unsupported " << counts[Outcome::kUnsupported]
          << "  failed " << counts[Outcome::kFailed] << std::flush;
    } else {
      static const char* names[] = {"compiled", "cached", "unsupported", "failed"};
      out << names[static_cast<int>(outcome)] << "  " << file << "  " << detail << "\n";
    }
  };
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      auto text = ReadWholeFile(files[i]);
      if (!text) {
        report(Outcome::kFailed, files[i], text.error().message());
        continue;
      }
      auto exe = (*cache)->GetOrCompile(*text, settings.target);
      if (exe) {
        const bool compiled =
            exe->source == Source::kCompiledHere || exe->source == Source::kCompiledByServer;
        report(compiled ? Outcome::kCompiled : Outcome::kCached, files[i],
               exe->key + "  " + std::string(SourceName(exe->source)));
      } else if (exe.error().code() == StatusCode::kFailedPrecondition) {
        report(Outcome::kUnsupported, files[i], exe.error().message());
      } else {
        report(Outcome::kFailed, files[i], exe.error().message());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(settings.jobs, 1); ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  (*cache)->Flush();
  if (tty) err << "\n";
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << "\n| compiled | already cached | unsupported | failed | seconds "
         "|\n|---:|---:|---:|---:|---:|\n"
      << "| " << counts[Outcome::kCompiled] << " | " << counts[Outcome::kCached] << " | "
      << counts[Outcome::kUnsupported] << " | " << counts[Outcome::kFailed] << " | " << std::fixed
      << std::setprecision(1) << seconds << " |\n";
  for (const std::string& f : failures) err << "failed: " << f << "\n";
  for (const std::string& n : notes) err << "note: " << n << "\n";
  return counts[Outcome::kFailed] > 0 ? 1 : 0;
}

}  // namespace hlocache::client
