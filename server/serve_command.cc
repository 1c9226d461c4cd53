#include "server/serve_command.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <ostream>

#include "common/byte_size.h"

namespace hlocache::server {
namespace {

Status ParseListen(const std::string& listen, ServerOptions& options) {
  std::string host, port;
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return InvalidArgument("--listen expects HOST:PORT or [IPV6]:PORT, got '" + listen + "'");
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("--listen expects HOST:PORT, got '" + listen + "'");
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    return InvalidArgument("--listen: '" + port + "' is not a port number");
  }
  options.host = host;
  options.port = value;
  return Status::Ok();
}

}  // namespace

int RunServe(ServeSettings settings, std::ostream& out, std::ostream& err) {
  ServerOptions& options = settings.options;
  if (Status s = ParseListen(settings.listen, options); !s.ok()) {
    err << "hlocache serve: " << s.message() << "\n";
    return 1;
  }
  for (auto [text, target] : {std::pair{&settings.max_size, &options.max_size},
                              std::pair{&settings.max_body, &options.max_body},
                              std::pair{&settings.memory_tier, &options.memory_tier_bytes}}) {
    if (text->empty()) continue;
    auto bytes = ParseByteSize(*text);
    if (!bytes) {
      err << "hlocache serve: " << bytes.error().message() << "\n";
      return 1;
    }
    *target = *bytes;
  }

  if (settings.dry_run) {
    if (Status s = CheckServerOptions(options); !s.ok()) {
      err << "hlocache serve: " << s.message() << "\n";
      return 1;
    }
    out << "hlocache: would serve " << options.dir.string() << " on " << options.host << ":"
        << options.port << (options.read_only ? ", read-only" : "")
        << (options.tokens_file.empty() ? "" : ", tokens from " + options.tokens_file.string())
        << (options.upstream_url.empty() ? "" : ", reading through to " + options.upstream_url)
        << std::endl;
    return 0;
  }

  // The signals are taken by sigwait below; every thread the server starts inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // A client that hangs up mid-reply must not end the server.

  auto server = Server::Start(options);
  if (!server) {
    err << "hlocache serve: " << server.error().message() << "\n";
    return 1;
  }
  out << "hlocache: serving " << options.dir.string() << " at " << (*server)->url() << " (pid "
      << ::getpid() << ")" << std::endl;
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  out << "hlocache: " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
      << ": finishing the requests in flight" << std::endl;
  (*server)->Shutdown();
  out << "hlocache: stopped" << std::endl;
  return 0;
}

}  // namespace hlocache::server
