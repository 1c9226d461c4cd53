/* hlocache's C API (libhlocache.so): get executables for HLO modules from a shared cache and
 * run them on caller buffers. For C, and for languages that call C (client/python/hlocache.py).
 *
 * Errors: functions returning int return 0 on success and -1 on failure; functions returning
 * a pointer return NULL on failure. Either way, when `error` is not NULL, a one-line reason is
 * written into it (at most error_size bytes, NUL-terminated).
 *
 * Thread safety: every function may be called from any thread. An executable may be run from
 * several threads at once; it must not be freed while a run is in progress. */
#ifndef HLOCACHE_C_H_
#define HLOCACHE_C_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hlocache_executable hlocache_executable;

/* Makes the process-wide cache (client/cache.h): `spec` is a directory, an http(s):// URL, or a
 * comma-separated list of them; NULL or "" means $HLOCACHE. A second call with the same spec
 * does nothing; with another, it fails. Without this call, hlocache_compile uses $HLOCACHE, or
 * no shared tier at all. */
int hlocache_initialize_cache(const char* spec, int read_only, char* error, size_t error_size);

/* Writes the module's key ("v1-" and 32 hex digits, NUL-terminated) into key_out, which must
 * hold at least 36 bytes. `target` may be NULL (this host's best CPU level). */
int hlocache_key(const char* hlo_text, size_t hlo_size, const char* target, char* key_out,
                 char* error, size_t error_size);

/* The executable for the module: from the cache, or compiled (by a server or here). */
hlocache_executable* hlocache_compile(const char* hlo_text, size_t hlo_size, const char* target,
                                      char* error, size_t error_size);
void hlocache_executable_free(hlocache_executable* executable);

const char* hlocache_executable_key(const hlocache_executable* executable);
/* "memory", "local", "remote", "compiled here" or "compiled by the server". */
const char* hlocache_executable_source(const hlocache_executable* executable);
double hlocache_executable_seconds(const hlocache_executable* executable);

/* The entry computation's array leaves (tuples flattened depth-first), and the bytes of each
 * dense row-major buffer. */
size_t hlocache_executable_parameter_count(const hlocache_executable* executable);
size_t hlocache_executable_result_count(const hlocache_executable* executable);
size_t hlocache_executable_parameter_bytes(const hlocache_executable* executable, size_t i);
size_t hlocache_executable_result_bytes(const hlocache_executable* executable, size_t i);

/* Runs on caller buffers: parameters[i] holds parameter_bytes(i) bytes, results[k] has room
 * for result_bytes(k). No result may overlap a parameter or another result: results are written
 * as they are computed, while parameters are still being read. */
int hlocache_executable_run(const hlocache_executable* executable, const void* const* parameters,
                            void* const* results, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* HLOCACHE_C_H_ */
