// The store's SQLite catalog: one row per entry, lifetime counters and a quarantine log.
//
// Opened in WAL mode with synchronous=NORMAL: a commit survives the process being killed, and
// after a power loss the store's reconciliation rebuilds any rows the catalog lost from LevelDB,
// which is synced on every put. Migrations from schema/catalog/ are applied at open.
//
// Thread safety: none; the Store serializes access with one mutex. Ownership: the Catalog owns
// its sqlite3 connection and prepared statements.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/store.h"
#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hlocache::cache {

// Buffered access statistics for one key.
struct AccessUpdate {
  std::string key;
  int64_t last_access_ms = 0;
  uint64_t hits = 0;
};

class Catalog {
 public:
  // The schema version this build writes (the number of migrations it carries).
  static int LatestSchemaVersion();

  // Read-only catalogs must exist and be at the latest version.
  static Result<std::unique_ptr<Catalog>> Open(const std::filesystem::path& path, bool read_only);
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  int schema_version() const { return schema_version_; }

  Status Insert(const EntryInfo& entry);  // Replaces a row with the same key.
  Status Delete(std::string_view key);
  Result<std::optional<EntryInfo>> Find(std::string_view key);
  Result<std::vector<EntryInfo>> List(const ListFilter& filter);
  // Least recently used first: (key, size).
  Result<std::vector<std::pair<std::string, uint64_t>>> Oldest(size_t limit);
  // Every key, sorted.
  Result<std::vector<std::string>> AllKeys();
  // (entries, bytes).
  Result<std::pair<uint64_t, uint64_t>> Totals();

  Status ApplyAccesses(const std::vector<AccessUpdate>& updates);
  Result<std::map<std::string, uint64_t>> LoadCounters();
  Status SaveCounters(const std::map<std::string, uint64_t>& counters);
  // Deletes the row and records why, in one transaction.
  Status Quarantine(std::string_view key, uint64_t size, int64_t at_ms, std::string_view reason);

  Status Begin();
  Status Commit();
  void Rollback();

 private:
  Catalog(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  Status Migrate(bool read_only);
  Result<std::vector<EntryInfo>> ListByName(const ListFilter& filter);
  Status Exec(const char* sql);
  Result<sqlite3_stmt*> Prepare(const char* sql);
  Status Fail(int rc, std::string_view what) const;

  sqlite3* db_;
  std::filesystem::path path_;
  int schema_version_ = 0;
  std::map<const char*, sqlite3_stmt*> statements_;  // Keyed by the SQL literal's address.
};

}  // namespace hlocache::cache
