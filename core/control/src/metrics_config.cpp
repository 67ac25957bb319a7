// The [metrics] table of the control plane's config (decision record 93): where mesh-control
// serves its Prometheus metrics. Off unless `listen` is set.
#include <arpa/inet.h>

#include <charconv>

#include "mesh/control/config.h"

namespace mesh::control {
namespace {

// "host:port" with an IPv4 address or "localhost"; port 1..65535. Returns the reason it is not,
// or "".
std::string listen_problem(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    // Debian 12's civetweb (the HTTP server of prometheus-cpp's Exposer) fails to bind "[::1]:N".
    return "an IPv6 address cannot be served (the HTTP server of prometheus-cpp binds IPv4 only here); name an "
           "IPv4 address, e.g. 127.0.0.1:9464";
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return "must be address:port, e.g. 127.0.0.1:9464";
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    in_addr a4{};
    if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &a4) != 1)
      return "'" + host + "' is not an IPv4 address (e.g. 127.0.0.1:9464)";
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535)
    return "port '" + port + "' is not a number from 1 to 65535";
  return {};
}

}  // namespace

const sdk::Schema& metrics_table_schema() {
  static const sdk::Schema s{
      "metrics",
      "Prometheus metrics of the control plane (docs/metrics.md)",
      {sdk::Attribute{"listen", sdk::ValueType::String, false,
                      "address and port to serve /metrics on over HTTP, e.g. 127.0.0.1:9464 (unset: no metrics)"}}};
  return s;
}

sdk::Result<MetricsSettings> load_metrics_settings(const common::ConfigFile& file) {
  auto table = file.check_table("metrics", metrics_table_schema());
  if (!table) return sdk::fail(table.error());
  MetricsSettings m;
  m.listen = table->get_string("listen");
  if (const sdk::Value* v = table->find("listen"); v && m.listen.empty())
    return sdk::fail(file.error_at("metrics.listen", "must not be empty (leave the key out for no metrics)"));
  if (!m.listen.empty())
    if (auto why = listen_problem(m.listen); !why.empty()) return sdk::fail(file.error_at("metrics.listen", why));
  return m;
}

}  // namespace mesh::control
