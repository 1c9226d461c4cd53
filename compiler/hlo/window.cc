#include "compiler/hlo/window.h"

#include <charconv>
#include <string>
#include <string_view>

namespace hlocache::hlo {
namespace {

// Bound on every size, stride, dilation and padding: positions are products of a few of them
// and must stay far from int64_t's limits.
constexpr int64_t kMaxWindowValue = int64_t{1} << 40;

Status Bad(std::string why) { return InvalidArgument("window: " + std::move(why)); }

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t end = s.find(sep, at);
    parts.push_back(
        s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return parts;
    at = end + 1;
  }
}

std::optional<int64_t> Integer(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  if (v > kMaxWindowValue || v < -kMaxWindowValue) return std::nullopt;
  return v;
}

// One key's value: `rank` fields separated by 'x'.
Result<std::vector<std::string_view>> Fields(std::string_view key, std::string_view value,
                                             size_t rank) {
  std::vector<std::string_view> fields = Split(value, 'x');
  if (fields.size() != rank) {
    return Error(Bad(std::string(key) + "=" + std::string(value) + " has " +
                     std::to_string(fields.size()) + " dimensions, the operand " +
                     std::to_string(rank)));
  }
  return fields;
}

Status SetPositive(std::string_view key, std::string_view value, size_t rank,
                   std::vector<WindowDimension>& dims, int64_t WindowDimension::*field) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string_view> fields, Fields(key, value, rank));
  for (size_t d = 0; d < rank; ++d) {
    const std::optional<int64_t> v = Integer(fields[d]);
    if (!v || *v < 1) {
      return Bad(std::string(key) + "=" + std::string(value) + ": '" + std::string(fields[d]) +
                 "' is not a positive integer");
    }
    dims[d].*field = *v;
  }
  return Status::Ok();
}

Status SetPadding(std::string_view value, size_t rank, std::vector<WindowDimension>& dims) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string_view> fields, Fields("pad", value, rank));
  for (size_t d = 0; d < rank; ++d) {
    const std::vector<std::string_view> ends = Split(fields[d], '_');
    std::optional<int64_t> low, high;
    if (ends.size() == 2) {
      low = Integer(ends[0]);
      high = Integer(ends[1]);
    }
    if (!low || !high) {
      return Bad("pad=" + std::string(value) + ": '" + std::string(fields[d]) +
                 "' is not LOW_HIGH");
    }
    dims[d].pad_low = *low;
    dims[d].pad_high = *high;
  }
  return Status::Ok();
}

Status SetReversal(std::string_view value, size_t rank, std::vector<WindowDimension>& dims) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string_view> fields,
                            Fields("rhs_reversal", value, rank));
  for (size_t d = 0; d < rank; ++d) {
    if (fields[d] != "0" && fields[d] != "1") {
      return Bad("rhs_reversal=" + std::string(value) + ": '" + std::string(fields[d]) +
                 "' is not 0 or 1");
    }
    dims[d].reversal = fields[d] == "1";
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<WindowDimension>> ReadWindow(const Module& m, const Instruction& inst,
                                                size_t rank) {
  std::vector<WindowDimension> dims(rank);
  const Attribute* a = inst.FindAttribute("window");
  if (a == nullptr) return dims;
  uint32_t i = a->value.begin, end = a->value.end;
  if (i >= end || m.tokens[i].kind != TokenKind::kLBrace ||
      m.tokens[end - 1].kind != TokenKind::kRBrace) {
    return Error(Bad("expected {key=value ...}"));
  }
  ++i;
  --end;
  // key=value pairs; a value is every token up to the next key (which the lexer may have split,
  // as in pad=-1_-1x1_1), joined.
  while (i < end) {
    if (m.tokens[i].kind != TokenKind::kIdent || i + 2 > end ||
        m.tokens[i + 1].kind != TokenKind::kEqual) {
      return Error(Bad("expected key=value at '" + std::string(m.TokenText(i)) + "'"));
    }
    const std::string_view key = m.TokenText(i);
    i += 2;
    std::string value;
    while (i < end && !(m.tokens[i].kind == TokenKind::kIdent && i + 1 < end &&
                        m.tokens[i + 1].kind == TokenKind::kEqual)) {
      value += m.TokenText(i++);
    }
    if (value.empty() && rank > 0) return Error(Bad(std::string(key) + " has no value"));
    if (rank == 0) {
      if (!value.empty()) return Error(Bad(std::string(key) + " given for a scalar"));
      continue;
    }
    Status s = Status::Ok();
    if (key == "size") {
      s = SetPositive(key, value, rank, dims, &WindowDimension::size);
    } else if (key == "stride") {
      s = SetPositive(key, value, rank, dims, &WindowDimension::stride);
    } else if (key == "lhs_dilate") {
      s = SetPositive(key, value, rank, dims, &WindowDimension::base_dilation);
    } else if (key == "rhs_dilate") {
      s = SetPositive(key, value, rank, dims, &WindowDimension::window_dilation);
    } else if (key == "pad") {
      s = SetPadding(value, rank, dims);
    } else if (key == "rhs_reversal") {
      s = SetReversal(value, rank, dims);
    } else {
      s = Bad("unknown key '" + std::string(key) + "'");
    }
    HLOCACHE_RETURN_IF_ERROR(s);
  }
  return dims;
}

std::optional<int64_t> WindowPlacements(const WindowDimension& w, int64_t base) {
  constexpr int64_t kMaxPositions = int64_t{1} << 60;
  int64_t dilated = 0, extent = 0;
  if (base < 0 || (base > 0 && __builtin_mul_overflow(base - 1, w.base_dilation, &dilated)) ||
      __builtin_mul_overflow(w.size - 1, w.window_dilation, &extent) || dilated >= kMaxPositions ||
      extent >= kMaxPositions) {
    return std::nullopt;
  }
  if (base > 0) ++dilated;
  ++extent;
  // Paddings are within 2^40 (ReadWindow): no overflow.
  const int64_t padded = dilated + w.pad_low + w.pad_high;
  if (padded < extent) return 0;
  return (padded - extent) / w.stride + 1;
}

}  // namespace hlocache::hlo
