// `hlocache stats|verify|gc --dir DIR`: maintenance of a local store directory.
#include <ostream>

#include "cache/store.h"
#include "client/commands.h"
#include "common/byte_size.h"

namespace hlocache::client {
namespace {

Result<std::unique_ptr<cache::Store>> OpenForCommand(const std::string& dir, bool read_only,
                                                     std::ostream& err) {
  cache::StoreOptions options;
  options.read_only = read_only;
  options.create_if_missing = false;
  options.log = [&err](std::string_view line) { err << "hlocache: " << line << "\n"; };
  return cache::Store::Open(dir, options);
}

}  // namespace

int RunStats(const std::string& dir, std::ostream& out, std::ostream& err) {
  auto store = OpenForCommand(dir, /*read_only=*/true, err);
  if (!store) {
    err << "hlocache stats: " << store.error().message() << "\n";
    return 1;
  }
  auto stats = (*store)->Stats();
  if (!stats) {
    err << "hlocache stats: " << stats.error().message() << "\n";
    return 1;
  }
  out << "entries      " << stats->entries << "\n"
      << "bytes        " << stats->bytes << "\n"
      << "hits         " << stats->hits << "\n"
      << "misses       " << stats->misses << "\n"
      << "puts         " << stats->puts << "\n"
      << "evictions    " << stats->evictions << "\n"
      << "quarantined  " << stats->quarantined << "\n";
  return 0;
}

int RunVerify(const std::string& dir, std::ostream& out, std::ostream& err) {
  auto store = OpenForCommand(dir, /*read_only=*/false, err);
  if (!store) {
    err << "hlocache verify: " << store.error().message() << "\n";
    return 1;
  }
  auto report = (*store)->VerifyAll();
  if (!report) {
    err << "hlocache verify: " << report.error().message() << "\n";
    return 1;
  }
  out << "checked " << report->checked << " entries (" << report->bytes << " bytes), "
      << report->corrupt.size() << " corrupt and quarantined, " << report->orphan_chunks_removed
      << " orphan chunks removed\n";
  for (const std::string& key : report->corrupt) out << "corrupt  " << key << "\n";
  return report->corrupt.empty() ? 0 : 1;
}

int RunGc(const std::string& dir, const std::string& max_size, std::ostream& out,
          std::ostream& err) {
  auto limit = ParseByteSize(max_size);
  if (!limit) {
    err << "hlocache gc: --max-size: " << limit.error().message() << "\n";
    return 2;
  }
  auto store = OpenForCommand(dir, /*read_only=*/false, err);
  if (!store) {
    err << "hlocache gc: " << store.error().message() << "\n";
    return 1;
  }
  auto evicted = (*store)->EvictTo(*limit);
  if (!evicted) {
    err << "hlocache gc: " << evicted.error().message() << "\n";
    return 1;
  }
  auto stats = (*store)->Stats();
  out << "evicted " << *evicted << " entries; " << (stats ? stats->entries : 0) << " entries ("
      << (stats ? stats->bytes : 0) << " bytes) remain\n";
  return 0;
}

}  // namespace hlocache::client
