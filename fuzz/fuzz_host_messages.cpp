// What mesh-host does with the messages it receives and the reports it sends. The daemon's
// handlers (core/host/src/daemon.cpp: on_declaration / check_declaration_message, fetch_latest,
// apply_text, send_refusals, recover_orphans) are members of a class internal to daemon.cpp that
// only runs as the whole daemon (identity, state directory, loaded plugins, a connected
// transport), so this target drives the pieces they are made of, in the daemon's order and with
// its options:
//   0 a pushed declaration (mesh.decl.<node>) or the reply to mesh.latest.<node>: size, protocol
//     version, addressee (Mesh-Node), Mesh-Revision, the control key's signature
//     (trust::verify_declaration), then mesh::engine::parse_declaration with the daemon's options
//     (the node's name expected, a revision allowed, the message limit) and the real file
//     provider. A refused message becomes the "refused" report send_refusals() builds (which
//     parses apply_report_json's output again, with the default limits); an unparsable one the
//     "invalid declaration" apply report.
//   1 the reply to mesh.recovery.<node>: parse_json with depth 8 and the `owned` list;
//   2 the report bodies the host builds (apply_report_json, drift_report_json) from strings
//     that come from providers and backends, and apply_report_text.
// Input: byte 0 picks the piece (mod 3); byte 1 (piece 0): bit 0 Mesh-Protocol from the next
// input line instead of "1.0"; bit 1 Mesh-Node from the next line instead of "web-01"; bit 2
// Mesh-Revision from the next line instead of "7"; bit 3 unsigned, bit 4 signed for revision 8
// (a signature that does not match), else signed with the control key as the control plane
// signs. For piece 2 the fields are '\n'-separated.
// Invariants: refusals are InvalidArgument / Unsupported / PermissionDenied; every report body
// the host builds parses as JSON with the limits the daemon and the control plane use (a report
// the control plane refuses is dropped by the host for good, and send_refusals() dereferences
// the parse result unchecked).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "file_provider.h"
#include "fuzz_support.h"
#include "mesh/common/json.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/engine/declaration.h"
#include "mesh/host/report.h"

using namespace mesh;

namespace {

constexpr std::size_t kMaxBody = 4096;  // the daemon's max_body_ (broker max_payload, [limits])
constexpr const char* kNode = "web-01";

sdk::NullLogger g_null_logger;
const sdk::HostContext g_host{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &g_null_logger, "", "host"};

const engine::ProviderRegistry& registry() {
  static const engine::ProviderRegistry r = [] {
    engine::ProviderRegistry reg;
    auto file = std::make_shared<plugins::file::FileProvider>(g_host);
    if (!file->configure(sdk::apply_defaults(file->config_schema(), sdk::Value::object())) ||
        !reg.add("file", file))
      fuzz::finding("file provider setup");
    return reg;
  }();
  return r;
}

const common::KeyPair& control_keys() {
  static const common::KeyPair k = common::keypair_from_seed(std::string(32, '\x01'));
  return k;
}

void report_must_parse(const std::string& body, const char* what) {
  auto v = common::parse_json(body);  // the limits of send_refusals() and of the control plane
  if (!v) fuzz::finding(std::string(what) + " builds a body the control plane cannot parse",
                        v.error().describe() + "\n" + body);
  if (!v->is_object() || v->get_string("node") != kNode)
    fuzz::finding(std::string(what) + " lost the node", body);
}

// daemon.cpp send_refusals(): the report of a refused declaration message.
void refusal_report(std::uint64_t revision, const std::string& reason) {
  if (revision == 0) return;  // queue_refusal(): nothing a report could name
  engine::ApplyResult r;
  r.revision = revision;
  r.outcome = "refused";
  r.reason = reason;
  r.owned = {"file:/etc/motd"};
  report_must_parse(host::apply_report_json(kNode, r, 1'700'000'000'000), "the refusal report");
}

void pushed_declaration(fuzz::Input& in, std::uint8_t flags) {
  sdk::Message m = protocol::make_message(protocol::decl_subject(kNode));
  if (flags & 1) m.set_header(protocol::kHeaderProtocol, std::string(in.field()));
  m.set_header(protocol::kHeaderNode, (flags & 2) ? std::string(in.field()) : std::string(kNode));
  m.set_header(protocol::kHeaderRevision, (flags & 4) ? std::string(in.field()) : std::string("7"));
  m.body = std::string(in.rest());
  if (!(flags & 8)) {
    std::uint64_t signed_rev = (flags & 16) ? 8 : std::strtoull(m.header(protocol::kHeaderRevision)->c_str(), nullptr, 10);
    trust::sign_declaration(m, *m.header(protocol::kHeaderNode), signed_rev, control_keys().secret_key);
  }

  // check_declaration_message(), in its order.
  std::uint64_t claimed = 0;
  if (const std::string* h = m.header(protocol::kHeaderRevision)) claimed = std::strtoull(h->c_str(), nullptr, 10);
  auto refuse = [&](const sdk::Error& e) {
    if (e.code != sdk::ErrorCode::InvalidArgument && e.code != sdk::ErrorCode::Unsupported &&
        e.code != sdk::ErrorCode::PermissionDenied)
      fuzz::finding("a declaration message refused with an unexpected code", e.describe());
    refusal_report(claimed, e.message);
  };
  if (m.body.size() > kMaxBody)
    return refuse(sdk::Error{sdk::ErrorCode::InvalidArgument, "body over the limit", {}});
  if (auto v = protocol::check_version(m); !v) return refuse(v.error());
  const std::string* to = m.header(protocol::kHeaderNode);
  if (!to || *to != kNode)
    return refuse(sdk::Error{sdk::ErrorCode::PermissionDenied,
                             "misaddressed: the declaration is for node '" + (to ? *to : std::string()) + "'", {}});
  if (claimed == 0) return refuse(sdk::Error{sdk::ErrorCode::InvalidArgument, "no revision header", {}});
  if (auto ok = trust::verify_declaration(m, kNode, claimed, control_keys().public_key); !ok) {
    if (!(flags & 8) && !(flags & 16)) fuzz::finding("a declaration signed as the control plane signs does not verify");
    return refuse(ok.error());
  }

  // apply_text().
  engine::ParseOptions opts;
  opts.max_bytes = kMaxBody;
  opts.expected_node = kNode;
  opts.allow_revision = true;
  auto decl = engine::parse_declaration(m.body, registry(), opts);
  if (decl) {
    if (!decl->node.empty() && decl->node != kNode) fuzz::finding("declaration for another node accepted");
    if (decl->revision != claimed)
      refusal_report(claimed, "the body says revision " + std::to_string(decl->revision) +
                                  " but the signed header says " + std::to_string(claimed));
    return;
  }
  if (decl.error().code != sdk::ErrorCode::InvalidArgument)
    fuzz::finding("parse_declaration refused with a code other than invalid_argument", decl.error().describe());
  // A declaration the host cannot read is reported as a failed apply.
  engine::ApplyResult r;
  r.revision = claimed;
  r.outcome = "failed";
  r.reason = "invalid declaration: " + decl.error().message;
  r.owned = {"file:/etc/motd"};
  report_must_parse(host::apply_report_json(kNode, r, 1'700'000'000'000), "the invalid-declaration report");
}

void recovery(fuzz::Input& in) {
  auto v = common::parse_json(in.rest(), common::JsonLimits{kMaxBody, 8});
  if (!v) {
    if (v.error().code != sdk::ErrorCode::InvalidArgument) fuzz::finding("parse_json code", v.error().describe());
    return;
  }
  // daemon.cpp recover_orphans: only string entries of an `owned` array are used.
  std::vector<std::string> orphans;
  if (const sdk::Value* owned = v->find("owned"); owned && owned->is_array())
    for (const auto& o : owned->as_array())
      if (o.is_string() && o.as_string() != "file:/etc/motd") orphans.push_back(o.as_string());
}

void reports(fuzz::Input& in) {
  engine::ApplyResult r;
  r.revision = in.byte();
  r.outcome = std::string(in.field());
  r.failed_resource = std::string(in.field());
  r.reason = std::string(in.field());
  for (int i = 0; i < 2 && !in.empty(); ++i) r.owned.emplace_back(in.field());
  engine::ResourceOutcome ro;
  ro.resource = std::string(in.field());
  ro.outcome = std::string(in.field());
  ro.reason = std::string(in.field());
  ro.changes.push_back(sdk::Change{std::string(in.field()), sdk::Value(), sdk::Value()});
  r.resources.push_back(ro);
  report_must_parse(host::apply_report_json(kNode, r, 1'700'000'000'000), "apply_report_json");
  (void)host::apply_report_text(r, in.byte() & 1);

  std::vector<engine::DriftItem> items;
  while (!in.empty()) {
    engine::DriftItem d;
    d.resource = std::string(in.field());
    d.found = std::string(in.field());
    d.action = std::string(in.field());
    items.push_back(std::move(d));
  }
  report_must_parse(host::drift_report_json(kNode, "scan-1", r.revision, items, 1'700'000'000'000),
                    "drift_report_json");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  (void)registry();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t pick = in.byte();
  const std::uint8_t flags = in.byte();
  switch (pick % 3) {
    case 0: pushed_declaration(in, flags); break;
    case 1: recovery(in); break;
    default: reports(in); break;
  }
  return 0;
}
