# Writes OUTPUT, a C++ source holding every SCHEMA_DIR/*.sql migration, in file-name order.
# Run with cmake -P; the migrations ship inside the binary so a store never depends on the
# source tree at run time.
file(GLOB INPUTS "${SCHEMA_DIR}/*.sql")
list(SORT INPUTS)
set(body "// Generated from schema/catalog/*.sql by cache/embed_migrations.cmake. Do not edit.\n")
string(APPEND body "#include \"cache/catalog_migrations.h\"\n\nnamespace hlocache::cache {\n\n")
string(APPEND body "const std::vector<CatalogMigration>& CatalogMigrations() {\n")
string(APPEND body "  static const std::vector<CatalogMigration> kMigrations = {\n")
foreach(input IN LISTS INPUTS)
  get_filename_component(name "${input}" NAME)
  file(READ "${input}" sql)
  string(APPEND body "    {\"${name}\", R\"hlocache_sql(${sql})hlocache_sql\"},\n")
endforeach()
string(APPEND body "  };\n  return kMigrations;\n}\n\n}  // namespace hlocache::cache\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
