-- Listing by name: a file artifact's row has target 'file', its namespace as compiler_id and its
-- path as graph_name (schema/file-artifacts.md), and a directory listing is a range of paths.
CREATE INDEX entries_by_name ON entries (target, compiler_id, graph_name);
