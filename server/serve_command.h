// `hlocache serve`: runs the artifact server until SIGTERM or SIGINT, then drains it.
#pragma once

#include <iosfwd>
#include <string>

#include "server/server.h"

namespace hlocache::server {

struct ServeSettings {
  ServerOptions options;
  std::string listen = "127.0.0.1:7070";  // HOST:PORT, [IPV6]:PORT; port 0 picks a free one.
  std::string max_size;                   // "10G"; empty for no cap.
  std::string max_body;                   // "4G"; empty for the default.
  std::string memory_tier;                // "256M", "0" for none; empty for the default.
  bool dry_run = false;  // Check the options and say what would be served; start nothing.
};

// Exit status: 0 after a clean stop on a signal (or a dry run whose options are good); 1 when
// the server cannot start (the reason on `err`, one line).
int RunServe(ServeSettings settings, std::ostream& out, std::ostream& err);

}  // namespace hlocache::server
