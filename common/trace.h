// An opt-in trace of I/O decisions, for finding out why a transfer failed under load: set
// HLOCACHE_TRACE_FILE=PATH and every process of hlocache (server, client, tests) appends lines
// to PATH. Off by default, and then each call costs one relaxed load.
//
//   12.345678 pid 4242 conn 7: recv 16384 bytes
//
// A line is "SECONDS pid PID AREA: TEXT", where SECONDS is CLOCK_MONOTONIC (the same clock in
// every process of one machine, so lines of a client and a server interleave correctly). Lines
// are written whole with one write() on an O_APPEND file, so processes and threads never mix
// each other's lines.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstdarg>

namespace hlocache {

// Whether tracing is on (HLOCACHE_TRACE_FILE was set and could be opened).
bool TraceEnabled();

// Appends one line: `area` names what traces ("conn 7", "store", "client"); the rest is printf.
void Trace(const char* area, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hlocache
