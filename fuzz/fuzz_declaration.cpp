// mesh::engine::parse_declaration, the host's declaration parser, with the real file provider
// (plugins/file, linked as its static library) and an in-fuzzer provider `svc` whose schema uses
// every attribute type; the same text also goes through the control plane's shape check
// (mesh::control::parse_declaration_text), which `mesh declare` and mesh.api.declare use.
//
// Input: one selector byte, then the declaration text.
//   bit 0: allow_revision (as for pushed declarations)   bit 1: expected_node "web-01"
//   bit 2: the file provider confined to allowed_roots /etc and /srv
//   bits 3-5: max_depth 4..32                            bit 6: max_bytes 512 instead of 64 KiB
// Invariants: refusals are InvalidArgument with a message (no Internal: that is an exception
// caught at the provider boundary); an accepted declaration has unique type:id, every resource
// after all it requires, a 64-hex digest; and what the host accepts as an operator file (no
// revision), the control plane accepts too.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "file_provider.h"
#include "fuzz_support.h"
#include "mesh/control/declaration.h"
#include "mesh/engine/declaration.h"

using namespace mesh;

namespace {

sdk::NullLogger g_null_logger;
const sdk::HostContext g_host{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &g_null_logger, "", "tool"};

/// A provider with no side effects whose schema has one attribute of each type; validate()
/// refuses ids with a '/' and a negative `count`.
class SvcProvider final : public sdk::Provider {
 public:
  SvcProvider() : sdk::Provider(g_host) {}
  const sdk::Schema& schema() const noexcept override {
    static const sdk::Schema kSchema{
        "svc",
        "fuzz provider",
        {
            {"state", sdk::ValueType::String, false, "", {"running", "stopped"}, sdk::Value("running")},
            {"enabled", sdk::ValueType::Bool, false, "", {}, sdk::Value(true)},
            {"count", sdk::ValueType::Int, false, ""},
            {"ratio", sdk::ValueType::Number, false, ""},
            {"args", sdk::ValueType::StringList, false, ""},
            {"env", sdk::ValueType::StringMap, false, ""},
            {"extra", sdk::ValueType::Any, false, ""},
            {"unit", sdk::ValueType::String, true, ""},
        },
        {{"count", "ratio"}}};
    return kSchema;
  }

 protected:
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override {
    const sdk::Resource& want = req.resource;
    if (want.rid.id.find('/') != std::string::npos)
      resp.errors.push_back({sdk::ErrorCode::InvalidArgument, "must not contain '/'", "id"});
    if (const sdk::Value* c = want.properties.find("count"); c && c->as_int() < 0)
      resp.errors.push_back({sdk::ErrorCode::InvalidArgument, "must be >= 0", "properties.count"});
    return {};
  }
  sdk::Result<void> do_read(const sdk::ReadRequest&, sdk::ReadResponse&) override { return {}; }
  sdk::Result<void> do_plan(const sdk::PlanRequest&, sdk::PlanResponse&) override {
    return sdk::fail(sdk::ErrorCode::Unsupported, "fuzz");
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest&, sdk::ApplyResponse&) override {
    return sdk::fail(sdk::ErrorCode::Unsupported, "fuzz");
  }
  sdk::Result<void> do_remove(const sdk::RemoveRequest&, sdk::RemoveResponse&) override {
    return sdk::fail(sdk::ErrorCode::Unsupported, "fuzz");
  }
};

engine::ProviderRegistry make_registry(bool confined) {
  auto file = std::make_shared<plugins::file::FileProvider>(g_host);
  sdk::Value cfg = sdk::Value::object();
  if (confined) cfg.set("allowed_roots", sdk::Value(sdk::Value::Array{sdk::Value("/etc"), sdk::Value("/srv")}));
  if (auto ok = file->configure(sdk::apply_defaults(file->config_schema(), cfg)); !ok)
    fuzz::finding("file provider configure", ok.error().describe());
  engine::ProviderRegistry r;
  if (!r.add("file", file) || !r.add("svc", std::make_shared<SvcProvider>()))
    fuzz::finding("registry add");
  return r;
}

const engine::ProviderRegistry& registry(bool confined) {
  static const engine::ProviderRegistry open = make_registry(false);
  static const engine::ProviderRegistry roots = make_registry(true);
  return confined ? roots : open;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  (void)registry(false);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t sel = in.byte();
  engine::ParseOptions opts;
  opts.allow_revision = sel & 1;
  if (sel & 2) opts.expected_node = "web-01";
  const bool confined = sel & 4;
  opts.max_depth = 4 + 4 * ((sel >> 3) & 7);
  opts.max_bytes = (sel & 0x40) ? 512 : 64 * 1024;
  const std::string_view text = in.rest();

  auto decl = engine::parse_declaration(text, registry(confined), opts);
  if (!decl) {
    const auto& e = decl.error();
    if (e.code != sdk::ErrorCode::InvalidArgument)
      fuzz::finding("parse_declaration refused with a code other than invalid_argument", e.describe());
    if (e.message.empty()) fuzz::finding("parse_declaration refused without a message");
  } else {
    if (!is_hex64(decl->digest)) fuzz::finding("digest is not 64 lower-case hex digits", decl->digest);
    if (!opts.allow_revision && decl->revision != 0) fuzz::finding("a revision was accepted when not allowed");
    if (!opts.expected_node.empty() && !decl->node.empty() && decl->node != opts.expected_node)
      fuzz::finding("a declaration for another node was accepted", decl->node);
    std::set<std::string> seen;
    for (const auto& r : decl->resources) {
      const std::string key = r.rid.type + ":" + r.rid.id;
      if (r.rid.id.empty() || r.rid.type.empty()) fuzz::finding("empty type or id accepted", key);
      if (r.rid.id.find('\0') != std::string::npos) fuzz::finding("NUL in an id accepted", key);
      if (!seen.insert(key).second) fuzz::finding("duplicate resource accepted", key);
      for (const auto& req : r.depends_on)
        if (!seen.count(req.type + ":" + req.id))
          fuzz::finding("resource ordered before what it requires", key + " requires " + req.type + ":" + req.id);
    }
  }

  // The control plane's check of an operator's file: whatever the host accepts without a
  // revision (a file given to `mesh declare`), the control plane must accept too.
  const std::string node = opts.expected_node.empty() ? "web-01" : opts.expected_node;
  auto shape = control::parse_declaration_text(text, node, common::JsonLimits{opts.max_bytes, opts.max_depth});
  if (!shape) {
    if (shape.error().code != sdk::ErrorCode::InvalidArgument)
      fuzz::finding("parse_declaration_text refused with a code other than invalid_argument",
                    shape.error().describe());
    // No known difference left: the engine requires `properties` and refuses `"node": ""` as
    // the control plane does (docs/protocol.md "API", declare).
    const auto& e = shape.error();
    if (decl && !opts.allow_revision && (decl->node.empty() || decl->node == node))
      fuzz::finding("the host accepts a declaration the control plane refuses", e.describe());
  } else {
    // What the control plane stores and pushes must parse on the host, within the same limits
    // but for the added revision.
    const std::string pushed = control::render_declaration(*shape->find("resources"), node, 7);
    engine::ParseOptions host = opts;
    host.allow_revision = true;
    host.expected_node = node;
    host.max_bytes = pushed.size();
    auto again = engine::parse_declaration(pushed, registry(confined), host);
    if (decl && !again)
      fuzz::finding("the control plane's rendering of an accepted declaration is refused by the host",
                    again.error().describe() + "\n" + pushed);
  }
  return 0;
}
