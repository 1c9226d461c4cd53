// Which of several origins answers for a key: rendezvous (highest random weight) hashing.
//
// Every origin gets a score per key, a hash of the origin's name and the key; the key's order
// is the origins by falling score. Every host that names the same origins computes the same
// order, with no coordination, so a key's compile goes to one origin while that origin is up.
// When an origin is removed (or down, and skipped), only the keys it was first for move, each
// to its own next origin: the load of a lost origin spreads over the rest rather than landing
// on one.
//
// Names must be spelled alike on every host (normalized URLs: server/upstream.h does so).
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hlocache::storage {

// The indices of `names`, the key's first choice first. Ties (two names scoring alike, which
// only equal names do) keep the names' order.
std::vector<size_t> RendezvousOrder(std::span<const std::string> names, std::string_view key);

}  // namespace hlocache::storage
