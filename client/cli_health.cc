// `hlocache health [URL]`: exit 0 when a server answers /healthz, 1 with the reason otherwise.
// What a container's health check or a deployment script runs; it needs no curl in the image.
#include <ostream>

#include "client/commands.h"
#include "common/http_client.h"

namespace hlocache::client {

int RunHealth(const std::string& url, const std::string& ca_cert, std::ostream& out,
              std::ostream& err) {
  auto parsed = ParseServerUrl(url);
  if (!parsed) {
    err << "hlocache health: " << parsed.error().message() << "\n";
    return 1;
  }
  HttpClientSettings settings;
  settings.ca_cert = ca_cert;
  settings.connect_timeout = std::chrono::seconds(2);
  auto r = MakeHttpClient(*parsed, settings, std::chrono::seconds(2))->Get("/healthz");
  if (!r) {
    err << "hlocache health: " << url << " does not answer (" << httplib::to_string(r.error())
        << ")\n";
    return 1;
  }
  if (r->status != 200) {
    err << "hlocache health: " << url << ": /healthz answered " << DescribeReply(*r) << "\n";
    return 1;
  }
  out << url << ": ok\n";
  return 0;
}

}  // namespace hlocache::client
