// The places a client looks for artifacts, one per part of a cache spec ("DIR", "http://...",
// "s3://...", comma-separated): storage backends (storage/backend.h). Every call may fail, and
// a failure is a reason to skip the tier, never to fail the caller; a tier that cannot be
// reached rests (storage/availability.h).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "storage/backend.h"
#include "storage/http_backend.h"

namespace hlocache::client {

using Tier = storage::Backend;

// One part of a cache spec: an http:// or https:// URL is that server; s3://BUCKET[/PREFIX]
// is that bucket (storage/s3_backend.h: endpoint, region and credentials from the
// environment); anything else is a directory, a store opened on it (read-only when asked), or,
// when a running server owns it (its lock is held and its server.json names the server), that
// server.
// Errors: kInvalidArgument for a malformed URL; kPermissionDenied for a bucket without
// credentials; the store's errors otherwise.
Result<std::unique_ptr<Tier>> MakeTier(const std::string& part, bool read_only,
                                       const storage::HttpBackendOptions& http);

}  // namespace hlocache::client
