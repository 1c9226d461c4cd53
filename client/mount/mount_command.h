// `hlocache mount MOUNTPOINT`: serves a mount::FileSystem over FUSE 3 in the foreground until
// SIGTERM, SIGINT or `fusermount3 -u MOUNTPOINT`, then unmounts and returns 0.
//
// The tiers come from a cache SPEC, as initialize_cache takes it: the first directory is the
// mount's local store (when another process owns it, its server is used, as for every
// client), the first http(s):// server is the fleet's (the one files are fetched from, listed
// on and uploaded to). Without a directory of its own the mount keeps a store in its state
// directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace hlocache::mount {

struct MountSettings {
  std::filesystem::path mountpoint;
  std::string spec;  // Empty: $HLOCACHE.
  bool read_only = false;
  std::string file_namespace = "files";
  // Where host-local names, files being written and (without a directory tier) the local
  // store live. Default: DIR/mount/NAMESPACE beside the local store's directory, or
  // $XDG_STATE_HOME/hlocache/mount/NAMESPACE (~/.local/state/...).
  std::filesystem::path state_dir;
  std::vector<std::string> local_patterns;  // Added to the defaults.
  std::string max_size;                     // Local store cap ("10G"); empty: none.
  bool debug = false;                       // libfuse's request log on stderr.
  bool dry_run = false;  // Check the options, print what would be mounted, mount nothing.
};

// Exit status: 0 after a clean unmount, 1 with one line on `err` when it cannot mount.
int RunMount(const MountSettings& settings, std::ostream& out, std::ostream& err);

// For `hlocache stats --mount MOUNTPOINT`: the JSON counters of a running mount, read from the
// extended attribute user.hlocache.stats of its root. 1 with a line on `err` when it is not a
// hlocache mount.
int RunMountStats(const std::filesystem::path& mountpoint, std::ostream& out, std::ostream& err);

inline constexpr const char* kStatsAttribute = "user.hlocache.stats";

}  // namespace hlocache::mount
