// `hlocache stats|verify|gc --dir DIR`: maintenance of a local store directory.
#include <ostream>

#include "cache/store.h"
#include "client/commands.h"

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

Result<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return Error(InvalidArgument("size too large"));
    value = value * 10 + digit;
  }
  if (i == 0) return Error(InvalidArgument("size '" + std::string(text) + "' is not a number"));
  std::string_view unit = text.substr(i);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  if (!unit.empty() && unit.back() == 'i') unit.remove_suffix(1);
  int shift = 0;
  if (unit.size() == 1) {
    switch (unit[0] | 0x20) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      default:
        return Error(
            InvalidArgument("unknown size unit in '" + std::string(text) + "' (use K, M, G or T)"));
    }
  } else if (!unit.empty()) {
    return Error(
        InvalidArgument("unknown size unit in '" + std::string(text) + "' (use K, M, G or T)"));
  }
  if (shift && value > (UINT64_MAX >> shift)) return Error(InvalidArgument("size too large"));
  return value << shift;
}

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
