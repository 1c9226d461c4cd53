// A local store (cache/store.h) as a storage backend.
//
// Ownership: the backend owns the store. Thread safety: as Backend (the store is thread-safe).
#pragma once

#include <memory>
#include <string>

#include "cache/store.h"
#include "storage/backend.h"

namespace hlocache::storage {

// Named "local DIR". Reads are verified by the store as they stream (a corrupt entry is
// quarantined and read as a miss or kDataLoss); writes go through a store writer, visible at
// their last byte.
std::unique_ptr<Backend> MakeStoreBackend(std::unique_ptr<cache::Store> store);

}  // namespace hlocache::storage
