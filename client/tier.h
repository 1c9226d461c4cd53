// One place the client looks for artifacts: a local store, or a server over HTTP. Modeled on
// ccache's storage backends: a small interface whose every call may fail, and a failure is a
// reason to skip the tier, never to fail the caller.
//
// Ownership: the Cache owns its tiers. Thread safety: every method may be called from any
// thread (the uploader runs beside the caller).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "common/status.h"

namespace hlocache::client {

struct RemoteCompile {
  std::string artifact;
  bool was_cached = false;  // The server had it (a hit there), rather than compiling it now.
};

class Tier {
 public:
  virtual ~Tier() = default;
  // "local DIR" or "http://host:port".
  virtual const std::string& name() const = 0;
  virtual bool remote() const = 0;
  // The artifact's bytes as the tier holds them (the caller verifies them), or nullopt.
  virtual Result<std::optional<std::string>> Get(std::string_view key) = 0;
  virtual Status Put(std::string_view key, std::string_view bytes,
                     const cache::ArtifactInfo& info) = 0;
  // Whether this tier can compile `target` on the caller's behalf.
  virtual bool CanCompile(std::string_view target) const = 0;
  // Asks the tier to compile (or find) the module. Only when CanCompile.
  virtual Result<RemoteCompile> Compile(std::string_view hlo_text, std::string_view target) = 0;
};

struct HttpTierOptions {
  std::string token;    // Bearer token; empty for none.
  std::string ca_cert;  // PEM file of the CA that signs https servers; empty: the system's.
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds compile_timeout{600000};
};

// `url` is http://host:port or https://host:port. An https server's certificate is always
// verified: against `ca_cert` when given, else the system's store.
Result<std::unique_ptr<Tier>> MakeHttpTier(const std::string& url, const HttpTierOptions& options);

// A store opened on `dir` (read-only when asked). A directory that a running server owns (its
// lock is held and its server.json names the server) is reached through that server instead.
Result<std::unique_ptr<Tier>> MakeDirectoryTier(const std::string& dir, bool read_only,
                                                const HttpTierOptions& http_options);

}  // namespace hlocache::client
