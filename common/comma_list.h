// Lists written on command lines and in environment variables: "a, b,c" -> {"a", "b", "c"}
// (a cache spec's tiers, an upstream's origins).
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hlocache {

// The parts between commas, in order, spaces at their ends trimmed, empty ones dropped.
inline std::vector<std::string> SplitCommaList(std::string_view list) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view part = list.substr(start, comma - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!part.empty()) parts.emplace_back(part);
    start = comma + 1;
  }
  return parts;
}

}  // namespace hlocache
