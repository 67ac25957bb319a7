#include "spec.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <set>

namespace mesh::plugins::container {
namespace {

namespace json = boost::json;
using sdk::ErrorCode;
using sdk::Value;

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// [a-zA-Z0-9][a-zA-Z0-9_.-]*: container names and named volumes.
bool is_simple_name(std::string_view s) {
  if (s.empty() || !is_alnum(s[0])) return false;
  for (char c : s)
    if (!is_alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

bool is_normalised_absolute(std::string_view p) {
  if (p.empty() || p[0] != '/') return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  std::size_t start = 1;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

std::optional<int> parse_port_number(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535) return std::nullopt;
  if (s[0] == '0') return std::nullopt;  // "080" would not compare equal to what the engine says
  return v;
}

// --- Boost.JSON helpers: missing members and nulls read as empty --------------------------------

const json::value* member(const json::value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  auto it = v.as_object().find(key);
  return it == v.as_object().end() ? nullptr : &it->value();
}
const json::value* path(const json::value& v, std::initializer_list<std::string_view> keys) {
  const json::value* cur = &v;
  for (auto k : keys) {
    cur = member(*cur, k);
    if (!cur) return nullptr;
  }
  return cur;
}
std::string str(const json::value* v) {
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
bool boolean(const json::value* v) { return v && v->is_bool() && v->as_bool(); }
std::int64_t integer(const json::value* v) {
  if (!v) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<std::int64_t>(v->as_double());
  return 0;
}

std::string format_host_ip(std::string ip) {
  if (ip.empty() || ip == "0.0.0.0" || ip == "::") return {};
  if (ip.find(':') != std::string::npos && ip.front() != '[') ip = "[" + ip + "]";
  return ip;
}

Value string_list(const std::vector<std::string>& items) {
  Value::Array a;
  for (const auto& s : items) a.emplace_back(s);
  return Value(std::move(a));
}

std::vector<std::string> strings_of(const Value* v) {
  std::vector<std::string> out;
  if (v && v->is_array())
    for (const auto& e : v->as_array())
      if (e.is_string()) out.push_back(e.as_string());
  return out;
}

}  // namespace

std::string strip_sha256(std::string_view id) {
  if (id.substr(0, 7) == "sha256:") id.remove_prefix(7);
  return std::string(id);
}

sdk::Result<void> check_name(std::string_view name) {
  if (name.empty()) return sdk::fail(ErrorCode::InvalidArgument, "container name is empty", "id");
  if (name.size() > 255)
    return sdk::fail(ErrorCode::InvalidArgument, "container name is longer than 255 bytes", "id");
  if (!is_simple_name(name))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + std::string(name.substr(0, 64)) +
                         "' is not a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)",
                     "id");
  return {};
}

sdk::Result<void> check_image(std::string_view image) {
  const std::string where = "properties.image";
  if (image.empty()) return sdk::fail(ErrorCode::InvalidArgument, "is empty", where);
  if (image.size() > 512)
    return sdk::fail(ErrorCode::InvalidArgument, "is longer than 512 bytes", where);
  for (char c : image)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "must be printable ASCII without spaces (an image reference)", where);
  if (image[0] == '-' || image[0] == '/' || image[0] == ':' || image[0] == '@')
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + std::string(image) + "' is not an image reference", where);
  if (auto at = image.find('@'); at != std::string_view::npos) {
    std::string_view digest = image.substr(at + 1);
    if (digest.substr(0, 7) != "sha256:" || !is_hex64(digest.substr(7)) || at == 0)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "'" + std::string(image) +
                           "': a digest reference is name@sha256:<64 lower-case hex digits>",
                       where);
  } else if (image.substr(0, 7) == "sha256:" && !is_hex64(image.substr(7))) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + std::string(image) + "': an image ID is sha256:<64 lower-case hex digits>",
                     where);
  }
  return {};
}

sdk::Result<std::string> canonical_port(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + std::string(text) + "' " + why +
                         " (expected [host_ip:]host_port:container_port[/tcp|/udp|/sctp])",
                     where);
  };
  std::string_view rest = text;
  std::string proto = "tcp";
  if (auto slash = rest.rfind('/'); slash != std::string_view::npos) {
    proto = std::string(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
    if (proto != "tcp" && proto != "udp" && proto != "sctp") return bad("has an unknown protocol");
  }
  auto last = rest.rfind(':');
  if (last == std::string_view::npos) return bad("names no host port");
  std::string_view container_port = rest.substr(last + 1);
  rest = rest.substr(0, last);
  std::string_view host_port = rest;
  std::string ip;
  if (auto c = rest.rfind(':'); c != std::string_view::npos) {
    host_port = rest.substr(c + 1);
    std::string_view ip_part = rest.substr(0, c);
    if (ip_part.empty()) return bad("has an empty host IP");
    bool bracketed = ip_part.front() == '[' && ip_part.back() == ']';
    for (char ch : ip_part)
      if (!(std::isxdigit(static_cast<unsigned char>(ch)) || ch == '.' ||
            (bracketed && (ch == ':' || ch == '[' || ch == ']'))))
        return bad("has an invalid host IP");
    ip = format_host_ip(bracketed ? std::string(ip_part.substr(1, ip_part.size() - 2))
                                  : std::string(ip_part));
  }
  auto h = parse_port_number(host_port);
  auto p = parse_port_number(container_port);
  if (!h || !p) return bad("needs port numbers 1-65535 (no ranges)");
  std::string out = ip.empty() ? std::string() : ip + ":";
  out += std::to_string(*h) + ":" + std::to_string(*p) + "/" + proto;
  return out;
}

sdk::Result<std::string> canonical_volume(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + std::string(text) + "' " + why +
                         " (expected host_path:container_path[:ro|:rw] or "
                         "volume_name:container_path[:ro|:rw])",
                     where);
  };
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    auto c = text.find(':', start);
    parts.push_back(text.substr(start, c == std::string_view::npos ? c : c - start));
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return bad("is not source:destination[:mode]");
  const std::string_view source = parts[0], dest = parts[1];
  bool read_only = false;
  if (parts.size() == 3) {
    if (parts[2] == "ro") read_only = true;
    else if (parts[2] != "rw") return bad("has a mode other than ro or rw");
  }
  if (source.empty() || (source[0] == '/' ? !is_normalised_absolute(source)
                                          : !is_simple_name(source)))
    return bad("needs an absolute, normalised host path or a volume name as its source");
  if (!is_normalised_absolute(dest) || dest == "/")
    return bad("needs an absolute, normalised container path (not /) as its destination");
  return std::string(source) + ":" + std::string(dest) + (read_only ? ":ro" : "");
}

sdk::Result<ContainerSpec> parse_spec(const sdk::Resource& want) {
  if (auto ok = check_name(want.rid.id); !ok) return sdk::fail(ok.error());
  const Value& p = want.properties;
  ContainerSpec spec;
  spec.name = want.rid.id;
  spec.absent = p.get_string("ensure", "present") == "absent";
  spec.image = p.get_string("image");
  if (auto ok = check_image(spec.image); !ok) return sdk::fail(ok.error());

  for (const auto& s : strings_of(p.find("command"))) {
    if (has_nul(s))
      return sdk::fail(ErrorCode::InvalidArgument, "contains a NUL byte", "properties.command");
    spec.command.push_back(s);
  }
  if (const Value* env = p.find("env"); env && env->is_object()) {
    std::map<std::string, std::string> sorted;
    for (const auto& [k, v] : env->as_object()) {
      const std::string where = "properties.env." + k;
      bool ok = !k.empty() && (std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_');
      for (char c : k) ok = ok && (is_alnum(c) || c == '_');
      if (!ok)
        return sdk::fail(ErrorCode::InvalidArgument,
                         "'" + k + "' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", where);
      if (!v.is_string() || has_nul(v.as_string()))
        return sdk::fail(ErrorCode::InvalidArgument, "must be a string without NUL bytes", where);
      sorted[k] = v.as_string();
    }
    spec.env.assign(sorted.begin(), sorted.end());
  }
  std::set<std::string> ports, volumes;
  const auto port_list = strings_of(p.find("ports"));
  for (std::size_t i = 0; i < port_list.size(); ++i) {
    auto c = canonical_port(port_list[i], "properties.ports[" + std::to_string(i) + "]");
    if (!c) return sdk::fail(c.error());
    ports.insert(*c);
  }
  const auto volume_list = strings_of(p.find("volumes"));
  for (std::size_t i = 0; i < volume_list.size(); ++i) {
    auto c = canonical_volume(volume_list[i], "properties.volumes[" + std::to_string(i) + "]");
    if (!c) return sdk::fail(c.error());
    volumes.insert(*c);
  }
  spec.ports.assign(ports.begin(), ports.end());
  spec.volumes.assign(volumes.begin(), volumes.end());
  spec.restart = p.get_string("restart", "no");
  if (spec.restart != "no" && spec.restart != "always" && spec.restart != "on-failure" &&
      spec.restart != "unless-stopped")
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + spec.restart + "' is not one of: no, always, on-failure, unless-stopped",
                     "properties.restart");
  spec.running = p.get_bool("running", true);
  return spec;
}

Value config_document(const ContainerSpec& spec) {
  Value doc = Value::object();
  doc.set("command", string_list(spec.command));
  Value env = Value::object();
  for (const auto& [k, v] : spec.env) env.set(k, v);
  doc.set("env", std::move(env));
  doc.set("image", spec.image);
  doc.set("ports", string_list(spec.ports));
  doc.set("restart", spec.restart);
  doc.set("volumes", string_list(spec.volumes));
  return doc;
}

std::string config_hash(const ContainerSpec& spec) {
  return sha256_hex(canonical_json(config_document(spec)));
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  auto num = [&](std::size_t pos, std::size_t len) -> std::optional<int> {
    if (pos + len > t.size()) return std::nullopt;
    int v = 0;
    for (std::size_t i = pos; i < pos + len; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) return std::nullopt;
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') ||
      t[13] != ':' || t[16] != ':')
    return std::nullopt;
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       sec = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !sec || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 ||
      *h > 23 || *mi > 59 || *sec > 60)
    return std::nullopt;
  std::size_t pos = 19;
  std::int64_t nanos = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
      if (digits < 9) nanos = nanos * 10 + (t[pos] - '0'), ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    while (digits++ < 9) nanos *= 10;
  }
  int offset_minutes = 0;
  if (pos < t.size() && (t[pos] == 'Z' || t[pos] == 'z')) {
    ++pos;
  } else if (pos < t.size() && (t[pos] == '+' || t[pos] == '-')) {
    auto oh = num(pos + 1, 2), om = num(pos + 4, 2);
    if (!oh || !om || pos + 3 >= t.size() || t[pos + 3] != ':') return std::nullopt;
    offset_minutes = (*oh * 60 + *om) * (t[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != t.size()) return std::nullopt;
  using namespace std::chrono;
  const sys_days date =
      year{*y} / month{static_cast<unsigned>(*mo)} / day{static_cast<unsigned>(*d)};
  return time_point_cast<system_clock::duration>(
      date + hours{*h} + minutes{*mi} + seconds{*sec} + nanoseconds{nanos} -
      minutes{offset_minutes});
}

sdk::Result<std::optional<sdk::State>> state_from_inspect(std::string_view text,
                                                          std::chrono::system_clock::time_point now,
                                                          std::chrono::milliseconds settle) {
  json::value root;
  try {
    root = json::parse(json::string_view(text.data(), text.size()));
  } catch (const std::exception& e) {
    return sdk::fail(ErrorCode::Failed,
                     std::string("cannot parse the engine's inspect output: ") + e.what());
  }
  if (!root.is_array())
    return sdk::fail(ErrorCode::Failed, "the engine's inspect output is not a JSON array");
  if (root.as_array().empty()) return std::optional<sdk::State>();
  const json::value& c = root.as_array().front();
  if (!c.is_object())
    return sdk::fail(ErrorCode::Failed, "the engine's inspect output holds no object");

  Value s = Value::object();
  s.set("ensure", "present");
  s.set("id", str(member(c, "Id")));
  const json::value* labels = path(c, {"Config", "Labels"});
  const json::value* image_label = labels ? member(*labels, kImageLabel) : nullptr;
  const json::value* hash_label = labels ? member(*labels, kConfigLabel) : nullptr;
  s.set("image", image_label && image_label->is_string() ? str(image_label)
                                                         : str(path(c, {"Config", "Image"})));
  s.set("image_id", strip_sha256(str(member(c, "Image"))));
  s.set("image_digest", str(member(c, "ImageDigest")));
  const bool running = boolean(path(c, {"State", "Running"}));
  const bool paused = boolean(path(c, {"State", "Paused"}));
  const std::string started_at = str(path(c, {"State", "StartedAt"}));
  bool settled = true;
  if (auto started = parse_rfc3339(started_at)) settled = now - *started >= settle;
  s.set("running", running && !paused && settled);
  s.set("paused", paused);
  s.set("state", str(path(c, {"State", "Status"})));
  s.set("exit_code", integer(path(c, {"State", "ExitCode"})));
  s.set("started_at", started_at);
  s.set("restart_count", integer(member(c, "RestartCount")));
  std::string restart = str(path(c, {"HostConfig", "RestartPolicy", "Name"}));
  s.set("restart", restart.empty() ? std::string("no") : restart);
  s.set("config_hash", hash_label && hash_label->is_string() ? Value(str(hash_label)) : Value());

  Value::Array command;
  if (const json::value* cmd = path(c, {"Config", "Cmd"}); cmd && cmd->is_array())
    for (const auto& e : cmd->as_array())
      if (e.is_string()) command.emplace_back(std::string(e.as_string()));
  s.set("command", Value(std::move(command)));

  Value env = Value::object();
  if (const json::value* e = path(c, {"Config", "Env"}); e && e->is_array())
    for (const auto& item : e->as_array()) {
      if (!item.is_string()) continue;
      std::string_view kv(item.as_string().data(), item.as_string().size());
      auto eq = kv.find('=');
      if (eq == std::string_view::npos) env.set(std::string(kv), "");
      else env.set(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
  s.set("env", std::move(env));

  std::set<std::string> ports;
  if (const json::value* pb = path(c, {"HostConfig", "PortBindings"}); pb && pb->is_object())
    for (const auto& [key, bindings] : pb->as_object()) {
      std::string_view k(key.data(), key.size());
      std::string container_port(k.substr(0, k.find('/')));
      std::string proto = k.find('/') == std::string_view::npos
                              ? std::string("tcp")
                              : std::string(k.substr(k.find('/') + 1));
      if (!bindings.is_array()) continue;
      for (const auto& b : bindings.as_array()) {
        std::string ip = format_host_ip(str(member(b, "HostIp")));
        std::string host = str(member(b, "HostPort"));
        if (host.empty()) continue;
        ports.insert((ip.empty() ? "" : ip + ":") + host + ":" + container_port + "/" + proto);
      }
    }
  s.set("ports", string_list({ports.begin(), ports.end()}));

  std::set<std::string> volumes;
  if (const json::value* mounts = member(c, "Mounts"); mounts && mounts->is_array())
    for (const auto& m : mounts->as_array()) {
      const std::string type = str(member(m, "Type"));
      const std::string source = type == "volume" ? str(member(m, "Name")) : str(member(m, "Source"));
      const std::string dest = str(member(m, "Destination"));
      if (source.empty() || dest.empty()) continue;
      const json::value* rw = member(m, "RW");
      const bool read_only = rw && rw->is_bool() && !rw->as_bool();
      volumes.insert(source + ":" + dest + (read_only ? ":ro" : ""));
    }
  s.set("volumes", string_list({volumes.begin(), volumes.end()}));
  return std::optional<sdk::State>(sdk::State{std::move(s)});
}

sdk::Result<std::string> image_id_from_inspect(std::string_view text) {
  json::value root;
  try {
    root = json::parse(json::string_view(text.data(), text.size()));
  } catch (const std::exception& e) {
    return sdk::fail(ErrorCode::Failed,
                     std::string("cannot parse the engine's image inspect output: ") + e.what());
  }
  if (!root.is_array() || root.as_array().empty())
    return sdk::fail(ErrorCode::Failed, "the engine's image inspect output names no image");
  std::string id = strip_sha256(str(member(root.as_array().front(), "Id")));
  if (id.empty()) return sdk::fail(ErrorCode::Failed, "the engine's image inspect output has no Id");
  return id;
}

sdk::Plan compute_plan(const sdk::Resource& want, const ContainerSpec& spec,
                       const std::optional<sdk::State>& observed) {
  sdk::Plan plan;
  plan.rid = want.rid;
  plan.desired = want;
  if (spec.absent) {
    if (observed) {
      plan.action = sdk::PlanAction::Remove;
      plan.changes.push_back({"properties.ensure", Value("present"), Value("absent")});
    }
    return plan;
  }
  if (!observed) {
    plan.action = sdk::PlanAction::Create;
    plan.changes.push_back({"properties.ensure", Value(), Value("present")});
    return plan;
  }
  const Value& o = observed->properties;
  auto& changes = plan.changes;
  auto observed_or_null = [&](std::string_view key) {
    const Value* v = o.find(key);
    return v ? *v : Value();
  };

  // 1, 2: the image.
  const std::string observed_image = o.get_string("image");
  if (observed_image != spec.image) {
    changes.push_back({"properties.image", observed_or_null("image"), Value(spec.image)});
  } else if (const Value* ref_id = o.find("image_ref_id"); ref_id && ref_id->is_string() &&
                                                           !ref_id->as_string().empty() &&
                                                           ref_id->as_string() !=
                                                               o.get_string("image_id")) {
    changes.push_back({"properties.image_id", observed_or_null("image_id"), *ref_id});
  }
  // 3: the configuration hash.
  const std::string want_hash = config_hash(spec);
  const Value* have_hash = o.find("config_hash");
  if (!have_hash || !have_hash->is_string() || have_hash->as_string() != want_hash)
    changes.push_back({"properties.config_hash", have_hash ? *have_hash : Value(), Value(want_hash)});
  // 4: what the engine says the container has.
  if (!spec.command.empty()) {
    Value want_cmd = string_list(spec.command);
    if (observed_or_null("command") != want_cmd)
      changes.push_back({"properties.command", observed_or_null("command"), want_cmd});
  }
  if (!spec.env.empty()) {
    const Value* have_env = o.find("env");
    Value want_env = Value::object(), seen = Value::object();
    bool differs = false;
    for (const auto& [k, v] : spec.env) {
      want_env.set(k, v);
      const Value* h = have_env ? have_env->find(k) : nullptr;
      if (h) seen.set(k, *h);
      differs = differs || !h || !(*h == Value(v));
    }
    if (differs) changes.push_back({"properties.env", std::move(seen), std::move(want_env)});
  }
  auto subset = [&](const char* key, const std::vector<std::string>& want_items) {
    if (want_items.empty()) return;
    const auto have = strings_of(o.find(key));
    const std::set<std::string> have_set(have.begin(), have.end());
    for (const auto& w : want_items)
      if (!have_set.count(w)) {
        changes.push_back({std::string("properties.") + key, observed_or_null(key),
                           string_list(want_items)});
        return;
      }
  };
  subset("ports", spec.ports);
  subset("volumes", spec.volumes);
  if (o.get_string("restart", "no") != spec.restart)
    changes.push_back({"properties.restart", observed_or_null("restart"), Value(spec.restart)});

  // 5: running.
  const bool running = o.get_bool("running", false);
  const bool paused = o.get_bool("paused", false);
  if (spec.running && !running)
    changes.push_back({"properties.running", paused ? Value("paused") : Value(false), Value(true)});
  else if (!spec.running && (running || paused))
    changes.push_back({"properties.running", paused ? Value("paused") : Value(true), Value(false)});

  plan.action = changes.empty() ? sdk::PlanAction::None : sdk::PlanAction::Update;
  return plan;
}

bool only_running_changes(const sdk::Plan& plan) {
  if (plan.changes.empty()) return false;
  for (const auto& c : plan.changes)
    if (c.path != "properties.running") return false;
  return true;
}

}  // namespace mesh::plugins::container
