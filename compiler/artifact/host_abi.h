// The C interface between a generated CPU executable and the host it transfers with while it
// runs (infeed, outfeed, send and recv with is_host_transfer=true; compiler/interp/eval_host.cc
// says what each does). The generated prelude (compiler/codegen/prelude/hc_cpu.h) declares the same
// structs field for field.
//
//   extern "C" int hlocache_entry_host(const void* const* params, void* const* results,
//                                      const hlocache_host* host);
//
// runs like hlocache_entry (which is hlocache_entry_host with no host) and returns 2 when a
// transfer found no host or the host refused it (a callback returning nonzero). Each transfer
// is one call with the value's arrays (a tuple's leaves, depth-first): `receive` fills each
// `data` with exactly `bytes` bytes, dense row-major in the buffer convention of cpu_codegen.h;
// `send` reads them. kind is 0 for infeed and outfeed (channel -1), 1 for recv and send (channel
// their channel_id). Callbacks run on the thread that called the entry point, in the order the
// program runs its transfers.
#pragma once

#include <cstdint>

extern "C" {

struct hlocache_host_leaf {
  void* data;
  int64_t bytes;
  const char* type;  // The element type's HLO name: "f32", "pred", ...
  int64_t rank;
  const int64_t* dims;  // `rank` dimensions.
};

struct hlocache_host {
  void* context;
  int (*receive)(void* context, int kind, int64_t channel, int64_t count,
                 const hlocache_host_leaf* leaves);
  int (*send)(void* context, int kind, int64_t channel, int64_t count,
              const hlocache_host_leaf* leaves);
};

}  // extern "C"

namespace hlocache::compiler {

// The entry point that takes a host.
inline constexpr const char* kEntryWithHostSymbol = "hlocache_entry_host";

}  // namespace hlocache::compiler
