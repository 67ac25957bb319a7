// The [metrics] table of the control plane's config (decision record 93): where mesh-control
// serves its Prometheus metrics. Off unless `listen` is set.
#include <arpa/inet.h>

#include <charconv>

#include "mesh/control/config.h"

namespace mesh::control {
namespace {

// "host:port" with an IPv4 address, "[v6]:port" or "localhost:port"; port 1..65535. Returns the
// reason it is not, or "".
std::string listen_problem(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return "must be [IPv6 address]:port, e.g. [::1]:9464";
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    in6_addr a6{};
    if (inet_pton(AF_INET6, host.c_str(), &a6) != 1) return "'" + host + "' is not an IPv6 address";
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return "must be address:port, e.g. 127.0.0.1:9464";
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    in_addr a4{};
    if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &a4) != 1)
      return "'" + host + "' is not an IPv4 address (an IPv6 one goes in brackets: [::1]:9464)";
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
