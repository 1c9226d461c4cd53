#include "cache/catalog.h"

#include <sqlite3.h>

#include <cstdlib>

#include "cache/catalog_migrations.h"

namespace hlocache::cache {
namespace {

// A prepared statement borrowed from the cache, reset and unbound when it goes out of scope.
class Bound {
 public:
  explicit Bound(sqlite3_stmt* s) : s_(s) {}
  ~Bound() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;
  sqlite3_stmt* get() const { return s_; }
  void Text(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Real(int i, double v) { sqlite3_bind_double(s_, i, v); }

 private:
  sqlite3_stmt* s_;
};

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* p = sqlite3_column_text(s, i);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(s, i)))
           : std::string();
}

Hash128 ParseHex128(const std::string& hex) {
  Hash128 h;
  if (hex.size() == 32) {
    h.high = std::strtoull(hex.substr(0, 16).c_str(), nullptr, 16);
    h.low = std::strtoull(hex.substr(16).c_str(), nullptr, 16);
  }
  return h;
}

constexpr const char* kEntryColumns =
    "key, size, checksum, target, compiler_id, graph_name, compile_seconds, created_ms, "
    "last_access_ms, hits";

EntryInfo ReadEntry(sqlite3_stmt* s) {
  EntryInfo e;
  e.key = ColumnText(s, 0);
  e.size = static_cast<uint64_t>(sqlite3_column_int64(s, 1));
  e.checksum = ParseHex128(ColumnText(s, 2));
  e.artifact.target = ColumnText(s, 3);
  e.artifact.compiler_id = ColumnText(s, 4);
  e.artifact.graph_name = ColumnText(s, 5);
  e.artifact.compile_seconds = sqlite3_column_double(s, 6);
  e.created_ms = sqlite3_column_int64(s, 7);
  e.last_access_ms = sqlite3_column_int64(s, 8);
  e.hits = static_cast<uint64_t>(sqlite3_column_int64(s, 9));
  return e;
}

}  // namespace

int Catalog::LatestSchemaVersion() { return static_cast<int>(CatalogMigrations().size()); }

Status Catalog::Fail(int rc, std::string_view what) const {
  std::string message = "catalog " + path_.string() + ": " + std::string(what) + ": " +
                        (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return ResourceExhausted(message + " (no space left on device)");
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return DataLoss(message);
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return PermissionDenied(message);
    case SQLITE_CANTOPEN:
      return IoError(message);
    default:
      return IoError(message);
  }
}

Result<std::unique_ptr<Catalog>> Catalog::Open(const std::filesystem::path& path, bool read_only) {
  sqlite3* db = nullptr;
  const int flags =
      (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  std::unique_ptr<Catalog> catalog(new Catalog(db, path));
  if (rc != SQLITE_OK) return Error(catalog->Fail(rc, "cannot open"));
  sqlite3_busy_timeout(db, 5000);
  if (!read_only) {
    // WAL: readers of the catalog (list, stats) never block its writer. NORMAL: commits survive
    // a killed process; LevelDB, synced per put, is what survives a power loss.
    HLOCACHE_RETURN_IF_ERROR(catalog->Exec("PRAGMA journal_mode=WAL"));
    HLOCACHE_RETURN_IF_ERROR(catalog->Exec("PRAGMA synchronous=NORMAL"));
  }
  HLOCACHE_RETURN_IF_ERROR(catalog->Migrate(read_only));
  return catalog;
}

Catalog::~Catalog() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Catalog::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return Fail(rc, "cannot run '" + std::string(sql).substr(0, 40) + "'");
  return Status::Ok();
}

Result<sqlite3_stmt*> Catalog::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(Fail(rc, "cannot prepare a statement"));
  statements_.emplace(sql, stmt);
  return stmt;
}

Status Catalog::Migrate(bool read_only) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return Fail(rc, "unreadable");
  rc = sqlite3_step(stmt);
  const int version = rc == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  if (version < 0) return Fail(rc, "unreadable");
  const auto& migrations = CatalogMigrations();
  const int latest = static_cast<int>(migrations.size());
  if (version > latest) {
    return FailedPrecondition("catalog " + path_.string() + " has schema version " +
                              std::to_string(version) + ", newer than this hlocache knows (" +
                              std::to_string(latest) + "); use a newer hlocache");
  }
  if (version < latest && read_only) {
    return FailedPrecondition("catalog " + path_.string() + " has schema version " +
                              std::to_string(version) + " and needs migrating to " +
                              std::to_string(latest) + "; open it read-write once");
  }
  for (int v = version; v < latest; ++v) {
    HLOCACHE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    std::string sql(migrations[static_cast<size_t>(v)].sql);
    sql += "\nPRAGMA user_version = " + std::to_string(v + 1) + ";";
    char* err = nullptr;
    rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    const std::string detail = err ? err : "";
    sqlite3_free(err);
    if (rc != SQLITE_OK) {
      Rollback();
      Status s =
          Fail(rc, "migration " + std::string(migrations[static_cast<size_t>(v)].name) + " failed");
      return Status(s.code(), s.message() + (detail.empty() ? "" : " (" + detail + ")"));
    }
    HLOCACHE_RETURN_IF_ERROR(Exec("COMMIT"));
  }
  schema_version_ = latest;
  return Status::Ok();
}

Status Catalog::Begin() { return Exec("BEGIN IMMEDIATE"); }
Status Catalog::Commit() { return Exec("COMMIT"); }
void Catalog::Rollback() { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

Status Catalog::Insert(const EntryInfo& e) {
  static constexpr const char* kSql =
      "INSERT OR REPLACE INTO entries (key, size, checksum, target, compiler_id, graph_name, "
      "compile_seconds, created_ms, last_access_ms, hits) VALUES (?,?,?,?,?,?,?,?,?,?)";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  b.Text(1, e.key);
  b.Int(2, static_cast<int64_t>(e.size));
  b.Text(3, e.checksum.Hex());
  b.Text(4, e.artifact.target);
  b.Text(5, e.artifact.compiler_id);
  b.Text(6, e.artifact.graph_name);
  b.Real(7, e.artifact.compile_seconds);
  b.Int(8, e.created_ms);
  b.Int(9, e.last_access_ms);
  b.Int(10, static_cast<int64_t>(e.hits));
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE) return Fail(rc, "cannot record entry " + e.key);
  return Status::Ok();
}

Status Catalog::Delete(std::string_view key) {
  static constexpr const char* kSql = "DELETE FROM entries WHERE key = ?";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  b.Text(1, key);
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE) return Fail(rc, "cannot delete entry " + std::string(key));
  return Status::Ok();
}

Result<std::optional<EntryInfo>> Catalog::Find(std::string_view key) {
  static const std::string kSql =
      std::string("SELECT ") + kEntryColumns + " FROM entries WHERE key = ?";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql.c_str()));
  Bound b(stmt);
  b.Text(1, key);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) return std::optional<EntryInfo>();
  if (rc != SQLITE_ROW) return Error(Fail(rc, "cannot look up " + std::string(key)));
  return std::optional<EntryInfo>(ReadEntry(stmt));
}

namespace {

// The least string greater than every string that starts with `prefix`; empty when there is
// none (a prefix of 0xff bytes only).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) != 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

}  // namespace

Result<std::vector<EntryInfo>> Catalog::ListByName(const ListFilter& f) {
  // A range of the (target, compiler_id, graph_name) index; SQLite compares text as bytes.
  static const std::string kSql =
      std::string("SELECT ") + kEntryColumns +
      " FROM entries WHERE target = ?1 AND compiler_id = ?2 AND graph_name >= ?3"
      " AND (?4 = '' OR graph_name < ?4) AND graph_name > ?5 ORDER BY graph_name LIMIT ?6";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql.c_str()));
  Bound b(stmt);
  b.Text(1, f.target);
  b.Text(2, f.compiler_id);
  b.Text(3, f.graph_name_prefix);
  const std::string end = PrefixEnd(f.graph_name_prefix);
  b.Text(4, end);
  b.Text(5, f.graph_name_after);
  b.Int(6, f.limit == 0 ? -1 : static_cast<int64_t>(f.limit));
  std::vector<EntryInfo> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) out.push_back(ReadEntry(stmt));
  if (rc != SQLITE_DONE) return Error(Fail(rc, "cannot list entries by name"));
  return out;
}

Result<std::vector<EntryInfo>> Catalog::List(const ListFilter& f) {
  if (f.by_name) return ListByName(f);
  // Filters bind as parameters; an empty one matches everything.
  static const std::string kSql =
      std::string("SELECT ") + kEntryColumns +
      " FROM entries WHERE (?1 = '' OR target = ?1) AND (?2 = '' OR compiler_id = ?2)"
      " AND (?3 = '' OR instr(graph_name, ?3) > 0) AND (?4 = 0 OR last_access_ms < ?4)"
      " ORDER BY last_access_ms, key LIMIT ?5";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql.c_str()));
  Bound b(stmt);
  b.Text(1, f.target);
  b.Text(2, f.compiler_id);
  b.Text(3, f.graph_name_contains);
  b.Int(4, f.accessed_before_ms);
  b.Int(5, f.limit == 0 ? -1 : static_cast<int64_t>(f.limit));
  std::vector<EntryInfo> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) out.push_back(ReadEntry(stmt));
  if (rc != SQLITE_DONE) return Error(Fail(rc, "cannot list entries"));
  return out;
}

Result<std::vector<std::pair<std::string, uint64_t>>> Catalog::Oldest(size_t limit) {
  static constexpr const char* kSql =
      "SELECT key, size FROM entries ORDER BY last_access_ms, key LIMIT ?";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  b.Int(1, static_cast<int64_t>(limit));
  std::vector<std::pair<std::string, uint64_t>> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    out.emplace_back(ColumnText(stmt, 0), static_cast<uint64_t>(sqlite3_column_int64(stmt, 1)));
  }
  if (rc != SQLITE_DONE) return Error(Fail(rc, "cannot list entries by age"));
  return out;
}

Result<std::vector<std::string>> Catalog::AllKeys() {
  static constexpr const char* kSql = "SELECT key FROM entries ORDER BY key";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) out.push_back(ColumnText(stmt, 0));
  if (rc != SQLITE_DONE) return Error(Fail(rc, "cannot list keys"));
  return out;
}

Result<std::pair<uint64_t, uint64_t>> Catalog::Totals() {
  static constexpr const char* kSql = "SELECT count(*), coalesce(sum(size), 0) FROM entries";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_ROW) return Error(Fail(rc, "cannot count entries"));
  return std::pair<uint64_t, uint64_t>(static_cast<uint64_t>(sqlite3_column_int64(stmt, 0)),
                                       static_cast<uint64_t>(sqlite3_column_int64(stmt, 1)));
}

Status Catalog::ApplyAccesses(const std::vector<AccessUpdate>& updates) {
  if (updates.empty()) return Status::Ok();
  static constexpr const char* kSql =
      "UPDATE entries SET last_access_ms = max(last_access_ms, ?), hits = hits + ? WHERE key = ?";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  HLOCACHE_RETURN_IF_ERROR(Begin());
  for (const AccessUpdate& u : updates) {
    Bound b(stmt);
    b.Int(1, u.last_access_ms);
    b.Int(2, static_cast<int64_t>(u.hits));
    b.Text(3, u.key);
    const int rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) {
      Status s = Fail(rc, "cannot record accesses");
      Rollback();
      return s;
    }
  }
  return Commit();
}

Result<std::map<std::string, uint64_t>> Catalog::LoadCounters() {
  static constexpr const char* kSql = "SELECT name, value FROM counters";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  Bound b(stmt);
  std::map<std::string, uint64_t> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    out[ColumnText(stmt, 0)] = static_cast<uint64_t>(sqlite3_column_int64(stmt, 1));
  }
  if (rc != SQLITE_DONE) return Error(Fail(rc, "cannot read counters"));
  return out;
}

Status Catalog::SaveCounters(const std::map<std::string, uint64_t>& counters) {
  static constexpr const char* kSql =
      "INSERT INTO counters (name, value) VALUES (?, ?) "
      "ON CONFLICT(name) DO UPDATE SET value = excluded.value";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  HLOCACHE_RETURN_IF_ERROR(Begin());
  for (const auto& [name, value] : counters) {
    Bound b(stmt);
    b.Text(1, name);
    b.Int(2, static_cast<int64_t>(value));
    const int rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) {
      Status s = Fail(rc, "cannot save counters");
      Rollback();
      return s;
    }
  }
  return Commit();
}

Status Catalog::Quarantine(std::string_view key, uint64_t size, int64_t at_ms,
                           std::string_view reason) {
  static constexpr const char* kSql =
      "INSERT INTO quarantine (key, size, at_ms, reason) VALUES (?, ?, ?, ?)";
  HLOCACHE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(kSql));
  HLOCACHE_RETURN_IF_ERROR(Begin());
  Status s = Delete(key);
  if (s.ok()) {
    Bound b(stmt);
    b.Text(1, key);
    b.Int(2, static_cast<int64_t>(size));
    b.Int(3, at_ms);
    b.Text(4, reason);
    const int rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) s = Fail(rc, "cannot record quarantine");
  }
  if (!s.ok()) {
    Rollback();
    return s;
  }
  return Commit();
}

}  // namespace hlocache::cache
