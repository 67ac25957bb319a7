#include "mesh/cli/app.h"

#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cmd_publish.h"
#include "mesh/cli/client.h"
#include "mesh/cli/commands.h"
#include "mesh/cli/exit_codes.h"
#include "mesh/cli/locate.h"
#include "mesh/cli/render.h"
#include "mesh/cli/report_output.h"
#include "mesh/common/error_text.h"
#include "mesh/common/clock.h"
#include "mesh/common/config.h"
#include "mesh/common/duration.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/crypto.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"
#include <spdlog/spdlog.h>
#include "mesh/declaration/declaration.h"
#include "cmd_pipeline.h"
#include "mesh/loader/loader.h"

#ifndef MESH_VERSION
#define MESH_VERSION "0.0.0"
#endif

namespace mesh::cli {
namespace {

using sdk::ErrorCode;
using sdk::Value;

// A declaration larger than the broker's limit goes in parts (docs/protocol.md "Messages in
// parts"): what bounds it is what the control plane reassembles (limits.max_assembled, 64 MiB by
// default; the API message is ~18% larger than the file, and the control plane checks that).
constexpr std::size_t kMaxDeclarationBytes = protocol::parts::kDefaultMaxAssembled;
constexpr auto kReportPoll = std::chrono::milliseconds(200);

struct Globals {
  std::vector<std::string> servers;
  std::string config;
  std::string output = "text";
  std::string timeout = "5s";
  std::string log_level = "warn";
  std::string plugin_dir;
  std::string identity;
  std::string control_key;
};

// A failure to report: the exit code and what to print.
struct Failure {
  int code;
  std::string message;
};

Failure failure(const sdk::Error& e) {
  // Field paths help for bad input; elsewhere the message says it all.
  std::string msg = e.code == ErrorCode::InvalidArgument ? common::described(e) : e.message;
  return Failure{exit_code_for(e.code), msg};
}

/// "error: FILE: path: message\n" for one diagnostic; for several, "error: FILE: N problems:"
/// and one indented line each. Every line printable (common::printable): the texts may quote
/// what the file, or the control plane, said.
std::string diagnostics_text(const std::string& file, const declaration::Diagnostics& diagnostics) {
  if (diagnostics.size() == 1)
    return "error: " + common::printable(file + ": " + diagnostics.front().describe(), 4096) + "\n";
  std::string out = "error: " + common::printable(file, 4096) + ": " + std::to_string(diagnostics.size()) +
                    " problems:\n";
  for (const auto& d : diagnostics) out += "  " + common::printable(d.describe(), 4096) + "\n";
  return out;
}

std::string getenv_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Builds the client options from the flags, the environment and --config.
tl::expected<ClientOptions, Failure> client_options(const Globals& g) {
  ClientOptions o;
  auto timeout = common::parse_duration(g.timeout);
  if (!timeout || timeout->count() <= 0)
    return tl::unexpected(Failure{kExitUsage, "--timeout: " + (timeout ? std::string("must be positive")
                                                                       : timeout.error().message)});
  o.timeout = *timeout;

  std::optional<common::ConfigFile> file;
  Value transport_table = Value::object();
  std::string config_plugin_dir;
  const std::string config_path = !g.config.empty() ? g.config : getenv_str("NOX_MESH_CONFIG");
  if (!config_path.empty()) {
    auto f = common::ConfigFile::load(config_path);
    if (!f) return tl::unexpected(Failure{kExitUsage, common::described(f.error())});
    file = std::move(*f);
    // Only [transport] (and [plugins] dir) matter here: the file may be a host or control config.
    transport_table = file->table("transport");
    if (!transport_table.is_object())
      return tl::unexpected(failure(file->error_at("transport", "must be a table")));
    // A host config's broker user is the enrolment user (it may only enrol): with broker
    // permissions every request would be a permissions violation, seen only as a timeout. Say at
    // once which config and which broker user `mesh` needs.
    if (const Value node = file->table("node"); node.is_object() && !node.as_object().empty()) {
      if (const Value* user = transport_table.find("user"); user && user->is_string())
        return tl::unexpected(Failure{
            kExitUsage, config_path + " is a mesh-host config: its [transport] user \"" + user->as_string() +
                            "\" is the host's enrolment user, which may only enrol. mesh connects as the "
                            "operators' broker user: --config FILE (or NOX_MESH_CONFIG) naming a file whose "
                            "[transport] table has user = \"mesh-operator\" and its password_file"});
    }
    if (const Value* p = transport_table.find("plugin")) {
      if (!p->is_string()) return tl::unexpected(failure(file->error_at("transport.plugin", "must be a string")));
      o.transport_plugin = p->as_string();
    }
    Value plugins = file->table("plugins");
    if (const Value* d = plugins.find("dir")) {
      // A string or a list, as in the host's and the control plane's configs: the first
      // directory holding the transport plugin.
      auto dirs = file->string_or_list("plugins.dir", *d);
      if (!dirs) return tl::unexpected(failure(dirs.error()));
      config_plugin_dir = dirs->front();
      const auto found = loader::find_plugin_file(*dirs, "transport", o.transport_plugin);
      if (!found.path.empty()) config_plugin_dir = std::filesystem::path(found.path).parent_path().string();
    }
  }

  std::vector<std::string> servers = split_servers(g.servers);
  if (servers.empty()) servers = split_servers({getenv_str("NOX_MESH_SERVER")});
  if (servers.empty() && !file)
    return tl::unexpected(Failure{kExitUsage,
                                  "no control plane given: use --server URL, the NOX_MESH_SERVER "
                                  "environment variable, or --config FILE (or NOX_MESH_CONFIG)"});
  Value config = Value::object();
  for (const auto& [k, v] : transport_table.as_object())
    if (k != "plugin") config.set(k, v);
  if (!servers.empty()) {
    Value::Array list;
    for (const auto& s : servers) list.emplace_back(s);
    config.set("servers", Value(std::move(list)));
  }
  if (const Value* s = config.find("servers"); s && s->is_array()) {
    for (const auto& v : s->as_array())
      if (v.is_string()) o.servers += (o.servers.empty() ? "" : ",") + v.as_string();
  }
  if (o.servers.empty()) o.servers = "the configured servers";

  o.plugin_dir = resolve_plugin_dir(g.plugin_dir, getenv_str("NOX_MESH_PLUGIN_DIR"), config_plugin_dir,
                                    self_exe(), [](const std::string& d) {
                                      std::error_code ec;
                                      return std::filesystem::is_directory(d, ec);
                                    });
  o.transport_config = std::move(config);
  o.config_file = std::move(file);

  // The operator identity: --identity, else NOX_MESH_IDENTITY. Every request is signed with it.
  const std::string identity = !g.identity.empty() ? g.identity : getenv_str("NOX_MESH_IDENTITY");
  if (identity.empty())
    return tl::unexpected(Failure{kExitUsage,
                                  "no operator identity: use --identity FILE or the NOX_MESH_IDENTITY "
                                  "environment variable (mesh-control writes the first one to "
                                  "<state_dir>/admin.identity; `mesh operator add` makes more)"});
  auto id = trust::load_operator_identity(identity);
  if (!id) return tl::unexpected(Failure{kExitUsage, id.error().message});
  struct stat st {};
  if (::stat(identity.c_str(), &st) == 0 && (st.st_mode & 0077) != 0)
    common::logger()->warn("operator identity {} is readable by others (mode {:04o}); chmod 600 it", identity,
                           st.st_mode & 07777);
  o.identity = std::move(*id);

  // The control plane key replies are verified with: --control-key / NOX_MESH_CONTROL_KEY (hex,
  // or a file holding it, such as <control state_dir>/control.pub), else the identity's own.
  const std::string key_text = !g.control_key.empty() ? g.control_key : getenv_str("NOX_MESH_CONTROL_KEY");
  if (!key_text.empty()) {
    std::string hex = key_text;
    if (key_text.find('/') != std::string::npos || key_text.size() != 64) {
      auto f = common::read_file(key_text, 4096);
      if (!f) return tl::unexpected(Failure{kExitUsage, "--control-key " + key_text + ": " + f.error().message});
      hex = *f;
      while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ' || hex.back() == '\r')) hex.pop_back();
    }
    auto raw = common::from_hex(hex);
    if (!raw || raw->size() != 32)
      return tl::unexpected(Failure{kExitUsage, "--control-key: " + key_text +
                                                    " is not the control plane's public key (64 hex characters, "
                                                    "as in <control state_dir>/control.pub)"});
    o.control_key = std::move(*raw);
  } else {
    o.control_key = o.identity->control_key;
    o.identity_path = identity;
  }
  if (o.control_key.empty())
    return tl::unexpected(Failure{
        kExitUsage, "operator identity " + identity +
                        " names no control plane key, so no reply could be verified: add \"control_key\": \"<the "
                        "64 hex characters of <control state_dir>/control.pub>\" to it, or pass --control-key FILE "
                        "(or NOX_MESH_CONTROL_KEY); identities written by mesh-control and `mesh operator add` have it"});
  return o;
}

// That a (verified) reply is about what was asked: the delivery, the node.
std::optional<Failure> check_answer(const std::string& op, const Value& params, const Value& result) {
  auto mismatch = [&](const std::string& what, const std::string& asked, const std::string& got) {
    return Failure{kExitFailed, "the control plane's reply to " + op + " is about " + what + " " +
                                    common::printable(got, 64) + ", not " + asked + ": not believed"};
  };
  if (op == "report" && params.find("delivery")) {
    const std::int64_t asked = params.get_int("delivery", 0);
    if (result.get_int("delivery", 0) != asked)
      return mismatch("delivery", std::to_string(asked), std::to_string(result.get_int("delivery", 0)));
  }
  if (op == "node.show" && result.get_string("name") != params.get_string("node"))
    return mismatch("node", params.get_string("node"), result.get_string("name"));
  return std::nullopt;
}

tl::expected<std::unique_ptr<Client>, Failure> connect(const Globals& g) {
  auto o = client_options(g);
  if (!o) return tl::unexpected(o.error());
  auto client = Client::connect(*o);
  if (!client) return tl::unexpected(failure(client.error()));
  return std::move(*client);
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"mesh: the Nox Mesh operator command line", "mesh"};
  app.set_version_flag("--version", std::string("mesh ") + MESH_VERSION);
  app.require_subcommand(1);
  Globals g;
  app.add_option("--server", g.servers,
                 "broker URL of the control plane (repeatable; else $NOX_MESH_SERVER, comma-separated)");
  app.add_option("--config", g.config,
                 "a TOML file whose [transport] table is used (host, control or operator config; else "
                 "$NOX_MESH_CONFIG)");
  app.add_option("--output", g.output,
                 "text or json; for report, any installed report plugin: text, json, junit, ...")
      ->capture_default_str();
  app.add_option("--timeout", g.timeout, "how long to wait for the broker and each reply")
      ->capture_default_str();
  app.add_option("--log-level", g.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  app.add_option("--plugin-dir", g.plugin_dir,
                 "plugin folder (else $NOX_MESH_PLUGIN_DIR, the config's [plugins] dir, the install's)");
  app.add_option("--identity", g.identity,
                 "operator identity file that signs every request (else $NOX_MESH_IDENTITY)");
  app.add_option("--control-key", g.control_key,
                 "the control plane's public key (hex, or a file such as its control.pub) that replies must be "
                 "signed with (else $NOX_MESH_CONTROL_KEY, else the identity's control_key)");

  auto pipeline_commands = pipeline_cmd::register_commands(app);  // pipeline run, pipeline show

  // token
  auto* token = app.add_subcommand("token", "enrolment tokens");
  token->require_subcommand(1);
  std::string node, id, file, delivery_text, wait_text, ttl = "24h";
  bool reenrol = false, fail_on_outstanding = false;
  std::int64_t to = 0, limit = 50;
  auto* token_issue = token->add_subcommand("issue", "print a one-time enrolment token for NODE, once");
  token_issue->add_option("NODE", node, "node name")->required();
  token_issue->add_flag("--reenrol", reenrol, "the token may replace the identity of an enrolled node");
  token_issue->add_option("--ttl", ttl, "how long the token stays valid")->capture_default_str();
  auto* token_list = token->add_subcommand("list", "outstanding tokens (never their secrets)");
  auto* token_revoke = token->add_subcommand("revoke", "revoke a token by its id");
  token_revoke->add_option("ID", id, "token id (from token list)")->required();

  bool all_nodes = false, purge = false;
  auto* nodes = app.add_subcommand("nodes", "every node: eligible, last contact, revision, outcome");
  nodes->add_flag("--all", all_nodes, "removed nodes too, with when they were removed");
  auto* node_cmd = app.add_subcommand("node", "one node");
  node_cmd->require_subcommand(1);
  auto* node_show = node_cmd->add_subcommand("show", "briefing, owned resources, recent applies");
  node_show->add_option("NODE", node, "node name")->required();
  auto* node_remove = node_cmd->add_subcommand(
      "remove", "retire NODE (admin): its keys and broker credentials stop working; history is kept");
  node_remove->add_option("NODE", node, "node name")->required();
  node_remove->add_flag("--purge", purge, "also delete its revisions, reports and recovery copy");

  auto* declare = app.add_subcommand("declare", "write a new revision of NODE's declaration");
  declare->add_option("NODE", node, "node name")->required();
  declare->add_option("FILE", file, "declaration (JSON)")->required();

  auto* report = app.add_subcommand("report", "the delivery report (the latest when none is named)");
  report->add_option("DELIVERY", delivery_text, "delivery id");
  report->add_option("--wait", wait_text, "wait until no node is outstanding, at most this long");
  report->add_flag("--fail-on-outstanding", fail_on_outstanding, "exit 1 when a node is outstanding");

  auto* history = app.add_subcommand("history", "NODE's retained declaration revisions");
  history->add_option("NODE", node, "node name")->required();
  history->add_option("--limit", limit, "at most this many, newest first")->capture_default_str();

  auto* rollback = app.add_subcommand("rollback", "write a new revision equal to an older one");
  rollback->add_option("NODE", node, "node name")->required();
  rollback->add_option("--to", to, "the revision to return to")->required();

  auto* operator_cmd = app.add_subcommand("operator", "operator identities (admin only)");
  operator_cmd->require_subcommand(1);
  std::string op_name, role;
  auto* operator_add = operator_cmd->add_subcommand("add", "print a new operator identity, once");
  operator_add->add_option("NAME", op_name, "operator name")->required();
  operator_add->add_option("--role", role, "admin, deployer or reader")
      ->required()
      ->check(CLI::IsMember({"admin", "deployer", "reader"}));
  auto* operator_list = operator_cmd->add_subcommand("list", "operators and their roles (never secrets)");
  auto* operator_remove = operator_cmd->add_subcommand("remove", "remove an operator: its identity stops working");
  operator_remove->add_option("NAME", op_name, "operator name")->required();

  auto publish_commands = register_publish_commands(app);
  CommandRun command;  // set by a command registered from its own file (commands.h)
  register_fleet_commands(app, command);
  register_content_commands(app, command);

  for (CLI::App* sub : {token, token_issue, token_list, token_revoke, nodes, node_cmd, node_show, node_remove,
                        declare, report, history, rollback, operator_cmd, operator_add, operator_list,
                        operator_remove})
    sub->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }

  auto fail = [&](const Failure& f) {
    // Messages may echo what the control plane (or whoever answered) sent: printable only.
    err << "error: " << common::printable(f.message, 4096) << "\n";
    return f.code;
  };
  if (auto ok = common::init_logging("mesh", g.log_level); !ok)
    return fail({kExitUsage, "--log-level: " + ok.error().message});
  // Reports print through a report plugin (any installed one): `mesh report` and `mesh deploy`;
  // every other command prints text or json.
  auto* deploy_cmd = app.get_subcommand("deploy");
  const bool deploys = command && deploy_cmd && deploy_cmd->parsed();
  const bool prints_report = report->parsed() || deploys;
  if (g.output != "text" && g.output != "json" && !prints_report)
    return fail({kExitUsage, "--output " + g.output +
                                 " is only for mesh report and mesh deploy (report plugins); other commands print text or json"});
  if (pipeline_commands->parsed())
    return pipeline_commands->run(
        [&]() -> tl::expected<std::unique_ptr<Client>, pipeline_cmd::ConnectError> {
          auto c = connect(g);
          if (!c) return tl::unexpected(pipeline_cmd::ConnectError{c.error().code, c.error().message});
          return std::move(*c);
        },
        g.output == "json", out, err);
  if (command) {
    // A deploy's report plugin is loaded before anything is sent: an unknown --output writes
    // nothing.
    std::optional<ReportOutput> deploy_output;
    if (deploys && g.output != "json") {
      auto dirs = report_plugin_dirs(g.plugin_dir, g.config);
      if (!dirs) return fail(failure(dirs.error()));
      auto loaded = ReportOutput::load(*dirs, g.output);
      if (!loaded) return fail(failure(loaded.error()));
      deploy_output = std::move(*loaded);
    }
    CommandEnv env{[&](int& code) -> std::unique_ptr<Client> {
                     auto c = connect(g);
                     if (c) return std::move(*c);
                     code = fail(c.error());
                     return nullptr;
                   },
                   g.output, out, err,
                   [&](const Value& r, std::int64_t now) -> sdk::Result<std::string> {
                     if (!deploy_output)
                       return sdk::fail(sdk::ErrorCode::Internal, "no report plugin loaded for --output " + g.output);
                     return deploy_output->render(r, now);
                   }};
    return command(env);
  }
  const bool json = g.output == "json";
  if (publish_commands->parsed())
    return publish_commands->run(
        [&]() -> tl::expected<std::unique_ptr<Client>, CommandError> {
          auto c = connect(g);
          if (!c) return tl::unexpected(CommandError{c.error().code, c.error().message});
          return std::move(*c);
        },
        json, out, err);

  // Local checks first: bad input is refused before anything is sent.
  Value params = Value::object();
  std::string op;
  std::optional<trust::OperatorIdentity> new_operator;
  std::optional<common::KeyPair> reply_keys;
  std::optional<std::chrono::milliseconds> wait;
  std::optional<ReportOutput> report_output;
  if (token_issue->parsed()) {
    auto d = common::parse_duration(ttl);
    if (!d || d->count() <= 0) return fail({kExitUsage, "--ttl: " + (d ? std::string("must be positive") : d.error().message)});
    op = "token.issue";
    params.set("node", node);
    params.set("ttl_ms", static_cast<std::int64_t>(d->count()));
    params.set("reenrol", reenrol);
    // The token comes back sealed to a key made for this one request: it crosses the broker
    // unreadable to anyone but this process.
    reply_keys = common::generate_keypair();
    params.set("reply_key", common::to_hex(reply_keys->public_key));
  } else if (token_list->parsed()) {
    op = "token.list";
  } else if (token_revoke->parsed()) {
    op = "token.revoke";
    params.set("id", id);
  } else if (nodes->parsed()) {
    op = "nodes";
    if (all_nodes) params.set("all", true);
  } else if (node_remove->parsed()) {
    if (!protocol::valid_node_name(node))
      return fail({kExitUsage, "'" + node + "' is not a valid node name (1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit)"});
    op = "node.remove";
    params.set("node", node);
    params.set("purge", purge);
  } else if (node_show->parsed()) {
    op = "node.show";
    params.set("node", node);
  } else if (declare->parsed()) {
    if (!protocol::valid_node_name(node))
      return fail({kExitUsage, "'" + node + "' is not a valid node name (1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit)"});
    auto text = common::read_file(file, kMaxDeclarationBytes);
    if (!text) {
      // Over the size: say which bound it is (the control plane's default limits.max_assembled,
      // which a larger value there does not raise here).
      const std::string why = text.error().code == sdk::ErrorCode::InvalidArgument
                                  ? " (mesh declare sends at most 64 MiB, the default limits.max_assembled of the "
                                    "control plane, which also bounds the request there)"
                                  : "";
      return fail({kExitUsage, file + ": " + text.error().message + why});
    }
    auto parsed = common::parse_json(*text, common::JsonLimits{kMaxDeclarationBytes, 32});
    if (!parsed) return fail({kExitUsage, file + ": " + common::described(parsed.error())});
    // The shared shape check (the control plane runs it too, and the node's schemas when it has
    // them): every problem at once.
    declaration::CheckOptions shape;
    shape.expected_node = node;
    shape.reader_is_node = false;
    auto checked = declaration::check(*parsed, shape);
    if (!checked.ok()) {
      if (json) {
        Value answer = Value::object();
        answer.set("status", "error");
        answer.set("file", file);
        answer.set("diagnostics", declaration::to_json(checked.diagnostics));
        out << render_json(answer);
      }
      err << diagnostics_text(file, checked.diagnostics);
      return kExitUsage;
    }
    op = "declare";
    params.set("node", node);
    params.set("declaration", std::move(*text));
  } else if (report->parsed()) {
    op = "report";
    if (!delivery_text.empty()) {
      char* end = nullptr;
      long long v = std::strtoll(delivery_text.c_str(), &end, 10);
      if (*end != '\0' || v < 1 || delivery_text[0] == '+')
        return fail({kExitUsage, "DELIVERY: '" + delivery_text + "' is not a delivery id (a positive integer)"});
      params.set("delivery", static_cast<std::int64_t>(v));
    }
    if (!wait_text.empty()) {
      auto d = common::parse_duration(wait_text);
      if (!d) return fail({kExitUsage, "--wait: " + d.error().message});
      wait = *d;
    }
    // The report plugin is loaded before anything is sent: an unknown --output is bad usage.
    auto dirs = report_plugin_dirs(g.plugin_dir, g.config);
    if (!dirs) return fail(failure(dirs.error()));
    auto loaded = ReportOutput::load(*dirs, g.output);
    if (!loaded) return fail(failure(loaded.error()));
    report_output = std::move(*loaded);
  } else if (history->parsed()) {
    if (limit < 1 || limit > 1000) return fail({kExitUsage, "--limit: must be between 1 and 1000"});
    op = "history";
    params.set("node", node);
    params.set("limit", limit);
  } else if (rollback->parsed()) {
    if (to < 1) return fail({kExitUsage, "--to: must be a revision (1 or more)"});
    op = "rollback";
    params.set("node", node);
    params.set("to", to);
  } else if (operator_add->parsed()) {
    if (!trust::valid_operator_name(op_name))
      return fail({kExitUsage, "'" + op_name + "' is not an operator name (1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit)"});
    op = "operator.add";
    // The key pair is made here; only the public key is sent. The secret is printed once.
    new_operator = trust::OperatorIdentity{op_name, role, {}, {}, {}};
    auto kp = common::generate_keypair();
    new_operator->public_key = kp.public_key;
    new_operator->secret_key = kp.secret_key;
    params.set("name", op_name);
    params.set("role", role);
    params.set("public_key", common::to_hex(kp.public_key));
  } else if (operator_list->parsed()) {
    op = "operator.list";
  } else if (operator_remove->parsed()) {
    op = "operator.remove";
    params.set("name", op_name);
  } else {
    return fail({kExitUsage, "no command given (see --help)"});
  }

  auto client = connect(g);
  if (!client) return fail(client.error());
  Value refusal;
  auto result = (*client)->call(op, params, &refusal);
  if (!result && (op == "declare" || op == "rollback")) {
    // The control plane's check against the node's provider schemas: every problem, shown as
    // the local check shows its own (decision record 48).
    if (const Value* d = refusal.is_object() ? refusal.find("diagnostics") : nullptr; d && d->is_array()) {
      const auto diagnostics = declaration::from_json(*d);
      if (!diagnostics.empty()) {
        const std::string what = op == "declare" ? file : "revision " + std::to_string(to) + " of " + node;
        if (json) {
          Value answer = Value::object();
          answer.set("status", "error");
          if (op == "declare") answer.set("file", file);
          answer.set("node", node);
          answer.set("checked", refusal.get_string("checked", "schemas"));
          answer.set("diagnostics", declaration::to_json(diagnostics));
          out << render_json(answer);
        }
        err << diagnostics_text(what + " (refused by the control plane for node " + node + ")", diagnostics);
        return exit_code_for(diagnostics.front().code);
      }
    }
  }
  if (!result) return fail(failure(result.error()));
  if (auto wrong = check_answer(op, params, *result)) return fail(*wrong);
  if (reply_keys && result->find("token_sealed")) {
    auto raw = common::from_hex(result->get_string("token_sealed"));
    auto token = raw ? common::open_sealed(*raw, *reply_keys) : sdk::Result<std::string>(sdk::fail(raw.error()));
    if (!token) return fail({kExitFailed, "the control plane's token reply cannot be opened: " + token.error().message});
    result->erase("token_sealed");
    result->set("token", *token);
  }

  if (op == "report") {
    // --wait: the same delivery, polled until nothing is outstanding or the time is up.
    if (wait) {
      params.set("delivery", result->get_int("delivery", 0));
      const auto deadline = std::chrono::steady_clock::now() + *wait;
      std::chrono::steady_clock::duration last_call{};
      for (;;) {
        const Value* o = result->find("outstanding");
        if (!o || !o->is_array() || o->as_array().empty()) break;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        // As `mesh deploy --wait`: at least as far apart as the last answer took (a large fleet's
        // report is not free for the control plane).
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::max<std::chrono::steady_clock::duration>(kReportPoll, last_call), deadline - now));
        const auto asked = std::chrono::steady_clock::now();
        auto next = (*client)->call(op, params);
        last_call = std::chrono::steady_clock::now() - asked;
        if (!next) return fail(failure(next.error()));
        if (auto wrong = check_answer(op, params, *next)) return fail(*wrong);
        result = std::move(next);
      }
    }
    // The plugin gets printable strings unless it asks for them raw (json: the reply as it came).
    auto rendered = report_output->render(*result, common::now_ms());
    if (!rendered)
      return fail({kExitFailed, "--output " + report_output->name() + ": " + common::described(rendered.error())});
    out << *rendered;
    return report_exit_code(*result, fail_on_outstanding);
  }

  if (op == "operator.add") {
    // The identity file itself, in both output modes: `mesh operator add ci --role deployer >
    // ci.identity` (then chmod 600) is all it takes. It is shown once and stored nowhere else.
    // The control plane key the new identity verifies its replies with (from a verified reply).
    if (auto ck = common::from_hex(result->get_string("control_key")); ck && ck->size() == 32)
      new_operator->control_key = std::move(*ck);
    out << trust::operator_identity_json(*new_operator) << "\n";
    err << "operator " << new_operator->name << " (role " << new_operator->role
        << ") added; its identity was printed once: keep it in a file of mode 0600\n";
    return kExitOk;
  }
  if (!json && op != "operator.add") *result = printable_values(*result);  // what reaches a terminal
  if (const Value* w = (op == "declare" || op == "rollback") ? result->find("warnings") : nullptr; w && w->is_array())
    for (const auto& line : w->as_array())
      if (line.is_string()) err << "warning: " << common::printable(line.as_string(), 4096) << "\n";
  if (op == "declare" && !result->get_bool("eligible", true)) {
    // Declaring to an ineligible node works; the operator is told why it is ineligible.
    err << "warning: node " << node << " is not eligible for assignment: its latest briefing failed";
    if (const Value* f = result->find("briefing_failures"); f && f->is_array())
      for (const auto& l : f->as_array())
        err << "\n  fail   " << l.get_string("check") << ": " << l.get_string("detail");
    err << "\n(re-run `mesh-host brief --config host.toml` on the node once fixed)\n";
  }

  const std::int64_t now = common::now_ms();
  if (json) {
    out << render_json(*result);
  } else if (op == "token.issue") {
    out << render_token_issued_text(*result);
  } else if (op == "token.list") {
    out << render_tokens_text(*result);
  } else if (op == "token.revoke") {
    out << render_token_revoked_text(*result);
  } else if (op == "nodes") {
    out << render_nodes_text(*result, now);
  } else if (op == "node.show") {
    out << render_node_text(*result, now);
  } else if (op == "declare") {
    out << render_declared_text(*result);
  } else if (op == "history") {
    out << render_history_text(*result);
  } else if (op == "rollback") {
    out << render_rollback_text(*result, node);
  } else if (op == "operator.list") {
    for (const auto& o : result->as_array())
      out << o.get_string("name") << "  " << o.get_string("role") << "  added "
          << (o.find("added_at") && o.find("added_at")->is_string() ? o.get_string("added_at") : "at first start")
          << (o.get_string("added_by").empty() ? "" : " by " + o.get_string("added_by")) << "\n";
  } else if (op == "operator.remove") {
    out << "operator " << result->get_string("name") << " removed\n";
  } else if (op == "node.remove") {
    out << "node " << result->get_string("node") << " removed at " << result->get_string("removed_at")
        << (result->get_bool("purged", false) ? "; its history was deleted"
                                               : "; its history is kept (mesh nodes --all lists it)")
        << "\nto enrol it again, issue a new token: mesh token issue " << result->get_string("node") << "\n";
  }
  return kExitOk;
}

}  // namespace mesh::cli
