#include "storage/rendezvous.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdint>

namespace hlocache::storage {

std::vector<size_t> RendezvousOrder(std::span<const std::string> names, std::string_view key) {
  std::vector<uint64_t> score(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    // The name seeds the key's hash: one pass over the key per origin, and scores that are
    // independent across origins (a plain concatenation would let "a"+"bc" equal "ab"+"c").
    score[i] =
        XXH3_64bits_withSeed(key.data(), key.size(), XXH3_64bits(names[i].data(), names[i].size()));
  }
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return score[a] > score[b]; });
  return order;
}

}  // namespace hlocache::storage
