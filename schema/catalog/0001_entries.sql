-- One row per stored artifact. The bytes live in LevelDB (DIR/blobs); this table is the catalog
-- used for listing, statistics and eviction. It can be rebuilt from LevelDB's index records.
CREATE TABLE entries (
  key             TEXT    PRIMARY KEY NOT NULL,  -- "v1-" + 32 hex digits
  size            INTEGER NOT NULL,              -- bytes
  checksum        TEXT    NOT NULL,              -- XXH3-128 of the bytes, 32 hex digits
  target          TEXT    NOT NULL,
  compiler_id     TEXT    NOT NULL,
  graph_name      TEXT    NOT NULL DEFAULT '',
  compile_seconds REAL    NOT NULL DEFAULT 0,
  created_ms      INTEGER NOT NULL,              -- Unix milliseconds
  last_access_ms  INTEGER NOT NULL,
  hits            INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Eviction takes the least recently used entries first without scanning the table.
CREATE INDEX entries_by_last_access ON entries (last_access_ms, key);
CREATE INDEX entries_by_target ON entries (target, compiler_id);
