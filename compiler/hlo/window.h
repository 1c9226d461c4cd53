// The window of reduce-window, select-and-scatter and convolution, read from its attribute
// (`window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}`)
// and checked once for the reference interpreter and the code generator.
//
// Along each dimension the window slides over the base (the operand, or the convolution's
// input): the base is dilated (base_dilation - 1 holes between its elements), padded by
// pad_low and pad_high (negative padding cuts elements off), and the window, whose elements
// are window_dilation apart, is placed every `stride` positions. A window element that lands
// on a hole or in the padding reads nothing.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t pad_low = 0;
  int64_t pad_high = 0;
  int64_t base_dilation = 1;    // lhs_dilate
  int64_t window_dilation = 1;  // rhs_dilate
  bool reversal = false;        // rhs_reversal: the kernel is read backwards (convolution only)
};

// The window of `inst` over `rank` dimensions. An absent attribute is the window of size 1 in
// every dimension. kInvalidArgument with the reason alone (the caller names the instruction) for
// a key it does not know, a list whose length is not `rank`, a size, stride or dilation below 1,
// or values so large that positions could overflow.
Result<std::vector<WindowDimension>> ReadWindow(const Module& m, const Instruction& inst,
                                                size_t rank);

// The number of window placements along a base dimension of `base` elements: 0 when the
// window is longer than the dilated, padded base; nullopt when the dilated base or window is
// too long to address (beyond 2^60 positions), which callers refuse as malformed. Within that
// bound WindowBaseIndex cannot overflow.
std::optional<int64_t> WindowPlacements(const WindowDimension& w, int64_t base);

// The base element that window element `k` of placement `placement` reads, or nullopt when it
// lands on a hole or in the padding.
inline std::optional<int64_t> WindowBaseIndex(const WindowDimension& w, int64_t base,
                                              int64_t placement, int64_t k) {
  const int64_t at = placement * w.stride + k * w.window_dilation - w.pad_low;
  if (at < 0 || at % w.base_dilation != 0) return std::nullopt;
  const int64_t index = at / w.base_dilation;
  if (index >= base) return std::nullopt;
  return index;
}

}  // namespace hlocache::hlo
