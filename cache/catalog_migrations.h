// The catalog's schema migrations, compiled in from schema/catalog/NNNN_*.sql.
//
// Migration i (1-based, in file-name order) takes a catalog from schema version i-1 to i; the
// version is SQLite's `PRAGMA user_version`. Migrations are append-only: a released file is
// never edited, a change is a new file.
#pragma once

#include <string_view>
#include <vector>

namespace hlocache::cache {

struct CatalogMigration {
  std::string_view name;  // File name, e.g. "0001_entries.sql".
  std::string_view sql;
};

const std::vector<CatalogMigration>& CatalogMigrations();

}  // namespace hlocache::cache
