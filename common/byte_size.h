// Sizes as people write them on command lines: "1073741824", "512M", "10G", "2GiB".
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace hlocache {

// Bytes, with an optional binary unit (K, M, G, T; KB, KiB, ... in any case). Errors:
// kInvalidArgument for anything else, or a size that does not fit 64 bits.
Result<uint64_t> ParseByteSize(std::string_view text);

}  // namespace hlocache
