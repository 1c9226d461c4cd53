-- Lifetime counters (hits, misses, puts, evictions, quarantined) that survive restarts.
CREATE TABLE counters (
  name  TEXT    PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL
) WITHOUT ROWID;

-- Entries removed because their bytes failed verification: what, when and why.
CREATE TABLE quarantine (
  key      TEXT    NOT NULL,
  size     INTEGER NOT NULL,
  at_ms    INTEGER NOT NULL,
  reason   TEXT    NOT NULL
);
