# Writes OUTPUT, a C++ source defining NAME (a const char* declared in HEADER) as the text of
# SOURCE_DIR/FILE below its marker line: the prelude every generated unit starts with. Run with
# cmake -P; the preludes ship inside the binary, as the catalog's migrations do.
set(marker "// ---- The prelude: every generated unit starts with the text below this line. ----\n")
file(READ "${SOURCE_DIR}/${FILE}" text)
string(FIND "${text}" "${marker}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${FILE}: no marker line")
endif()
string(LENGTH "${marker}" marker_length)
math(EXPR from "${at} + ${marker_length}")
string(SUBSTRING "${text}" ${from} -1 prelude)
set(body "// Generated from ${FILE} by compiler/embed_preludes.cmake. Do not edit.\n")
string(APPEND body "#include \"${HEADER}\"\n\nnamespace hlocache::compiler {\n\n")
string(APPEND body "const char* const ${NAME} = R\"hc_prelude(${prelude})hc_prelude\";\n\n")
string(APPEND body "}  // namespace hlocache::compiler\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
