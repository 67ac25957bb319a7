// The transport's configuration: its schema, and configure() reading and checking the
// credential files it names.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "mesh/support/errno_text.h"
#include "mesh/support/nkey_keys.h"
#include "nats_connection.h"
#include "nats_transport.h"
#include "nats_util.h"

namespace mesh::transports::nats {

namespace {

/// Reads a small file (credentials); errors name the file and the reason.
Result<std::string> read_small_file(const std::string& path, const std::string& key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(ErrorCode::InvalidArgument, "cannot read '" + path + "': " + support::errno_text(errno),
                key);
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(ErrorCode::InvalidArgument, "cannot read '" + path + "': " + support::errno_text(e),
                  key);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > 1024 * 1024) {
      ::close(fd);
      return fail(ErrorCode::InvalidArgument, "'" + path + "' is larger than 1 MiB", key);
    }
  }
  ::close(fd);
  return data;
}

/// Accepts nats://[user[:pass]@]host[:port] and tls://..., host non-empty, port 1-65535.
bool valid_server_url(const std::string& url) {
  std::string rest;
  if (url.rfind("nats://", 0) == 0) rest = url.substr(7);
  else if (url.rfind("tls://", 0) == 0) rest = url.substr(6);
  else return false;
  const auto slash = rest.find('/');
  if (slash != std::string::npos) {
    if (slash + 1 != rest.size()) return false;  // no path
    rest.resize(slash);
  }
  if (const auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos) return false;
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return false;
      port = rest.substr(close + 2);
      if (port.empty()) return false;
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return false;
  }
  if (host.empty()) return false;
  for (unsigned char c : host)
    if (c <= 32 || c == '/' || c == '?' || c == '#') return false;
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
    const int p = std::stoi(port);
    if (p < 1 || p > 65535) return false;
  }
  return true;
}

}  // namespace

const sdk::Schema& NatsTransport::schema() {
  using sdk::ValueType;
  static const sdk::Schema schema{
      "transport",
      "NATS transport (nats.c): publish/subscribe, request/reply and headers over NATS, "
      "reconnecting without limit.",
      {
          {"servers", ValueType::StringList, true,
           "NATS server URLs, each nats://host[:port] or tls://host[:port]; reconnects cycle "
           "through them without limit"},
          {"name", ValueType::String, false,
           "connection name the server shows for this client (e.g. the node name)"},
          {"nkey_seed", ValueType::String, false,
           "path of a file holding the user nkey seed (SU...), for nkey authentication"},
          {"user", ValueType::String, false, "user name, for user/password authentication"},
          {"password_file", ValueType::String, false,
           "path of a file holding the password of `user` (a trailing newline is ignored)"},
          {"tls_ca", ValueType::String, false,
           "path of a PEM file of CA certificates that verify the server; turns TLS on"},
          {"inbox_prefix", ValueType::String, false,
           "subject prefix of this client's reply inboxes (default _INBOX), so that broker "
           "permissions can give each client its own replies: e.g. _INBOX.node.web-01; "
           "dot-separated tokens, no wildcards"},
          {"shared_delivery", ValueType::Bool, false,
           "deliver every subscription's messages on nats.c's shared delivery thread pool instead "
           "of one thread per subscription (for a process with thousands of subscriptions: mesh-sim; "
           "mesh-host turns it on unless its config says otherwise)"},
          {"per_request_inbox", ValueType::Bool, false,
           "true: each request subscribes to an inbox of its own and the requesting thread takes "
           "its reply there (no delivery thread; a SUB and an UNSUB more per request); false (the "
           "default): nats.c's one reply subscription, with a delivery thread of its own (mesh-host "
           "turns it on unless its config says otherwise)"},
          {"send_asap", ValueType::Bool, false,
           "write each publish to the socket at once from the publishing thread (default true); false "
           "leaves it to nats.c's flusher thread, which waits about 1 ms for more messages before "
           "writing: fewer writes for a burst of small publishes, 1 ms more latency for each",
           {}, sdk::Value(true)},
      },
      {{"nkey_seed", "user"}}};
  return schema;
}

Result<void> NatsTransport::do_configure(const sdk::Value& config) {
  if (auto ok = sdk::validate_against(schema(), config, ""); !ok) return ok;
  NatsSettings s;
  const auto& servers = config.find("servers")->as_array();
  if (servers.empty())
    return fail(ErrorCode::InvalidArgument, "must list at least one server", "servers");
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const std::string& url = servers[i].as_string();
    if (!valid_server_url(url))
      return fail(ErrorCode::InvalidArgument,
                  "'" + url + "' is not a nats://host[:port] or tls://host[:port] URL",
                  "servers[" + std::to_string(i) + "]");
    s.servers.push_back(url);
  }
  s.name = config.get_string("name");
  s.user = config.get_string("user");
  if (const std::string path = config.get_string("nkey_seed"); !path.empty()) {
    auto text = read_small_file(path, "nkey_seed");
    if (!text) return fail(text.error());
    auto pub = support::nkey_public_from_seed_text(*text);
    std::fill(text->begin(), text->end(), '\0');
    if (!pub)
      return fail(ErrorCode::InvalidArgument, "'" + path + "': " + pub.error().message,
                  "nkey_seed");
    s.nkey_seed_path = path;
    s.nkey_public = *pub;
  } else if (config.find("nkey_seed")) {
    return fail(ErrorCode::InvalidArgument, "must be a file path", "nkey_seed");
  }
  if (const std::string path = config.get_string("password_file"); config.find("password_file")) {
    if (s.user.empty())
      return fail(ErrorCode::InvalidArgument, "needs `user` to be set", "password_file");
    auto text = read_small_file(path, "password_file");
    if (!text) return fail(text.error());
    while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
    if (text->empty())
      return fail(ErrorCode::InvalidArgument, "'" + path + "' is empty", "password_file");
    s.password = std::move(*text);
  }
  if (const std::string prefix = config.get_string("inbox_prefix"); config.find("inbox_prefix")) {
    if (!valid_subject(prefix, false))
      return fail(ErrorCode::InvalidArgument,
                  "'" + prefix + "' is not a subject prefix (dot-separated tokens, no wildcards, "
                  "no blanks)", "inbox_prefix");
    s.inbox_prefix = prefix;
  }
  if (const std::string path = config.get_string("tls_ca"); config.find("tls_ca")) {
    auto text = read_small_file(path, "tls_ca");
    if (!text) return fail(text.error());
    if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      return fail(ErrorCode::InvalidArgument, "'" + path + "' holds no PEM certificate",
                  "tls_ca");
    s.tls_ca_path = path;
  }
  s.shared_delivery = config.get_bool("shared_delivery", false);
  s.send_asap = config.get_bool("send_asap", true);
  s.per_request_inbox = config.get_bool("per_request_inbox", false);
  if (s.per_request_inbox) {
    // "<prefix>.<NUID>": each request's inbox adds a counter to it (nats_request.cpp).
    natsInbox* inbox = nullptr;
    if (const natsStatus st = natsInbox_Create(&inbox); st != NATS_OK)
      return fail(ErrorCode::Internal, detail::describe(st, "inbox"));
    const std::string made(inbox);  // "_INBOX.<NUID>"
    natsInbox_Destroy(inbox);
    core_->inbox_base = (s.inbox_prefix.empty() ? std::string("_INBOX") : s.inbox_prefix) +
                        made.substr(made.find('.'));
  }
  settings_ = std::move(s);
  configured_ = true;
  return {};
}

}  // namespace mesh::transports::nats
