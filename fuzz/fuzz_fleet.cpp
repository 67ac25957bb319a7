// The fleet library (mesh/fleet/fleet.h) on hostile module files, templates and selectors: what a
// deployer sends with `mesh module push` and `mesh assign`. The first byte picks the part (its
// value modulo 3); the rest is the text.
//   0: a template, rendered for a fixed node (labels role, env; facts os.id, arch). A refusal is
//      InvalidArgument naming the `where` prefix; a text without "{{" renders as itself.
//   1: a module file: parse_module; when accepted, the digest is 64 hex digits and is the same
//      for the module's canonical JSON parsed again; render_module for the node, with and
//      without a TemplateCache (used twice), gives the same result or the same error.
//   2: a selector: parse_selector; when accepted, to_string parses again to the same text, and
//      matches() runs; a refusal is InvalidArgument starting "selector: at position N: " with N
//      within the text + 1.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "mesh/fleet/fleet.h"

using namespace mesh;

namespace {

fleet::NodeContext node() {
  fleet::NodeContext n;
  n.name = "web-01";
  n.labels = {{"role", "web"}, {"env", ""}};
  n.facts = {{"os.id", "debian"}, {"arch", "amd64"}};
  return n;
}

void check_refusal(const sdk::Error& e, std::string_view what) {
  if (e.code != sdk::ErrorCode::InvalidArgument)
    fuzz::finding(std::string(what) + " refused with a code other than invalid_argument", e.describe());
}

void fuzz_template(std::string_view text) {
  auto r = fleet::render_template(text, node(), "where");
  if (!r) {
    check_refusal(r.error(), "render_template");
    if (r.error().message.rfind("where: ", 0) != 0) fuzz::finding("a template error without its prefix", r.error().message);
    return;
  }
  if (text.find("{{") == std::string_view::npos && *r != text)
    fuzz::finding("a text without a tag changed", *r);
}

void fuzz_module(std::string_view text) {
  auto m = fleet::parse_module(text, "fuzz.json");
  if (!m) {
    check_refusal(m.error(), "parse_module");
    if (m.error().message.rfind("fuzz.json: ", 0) != 0) fuzz::finding("a module error without its source", m.error().message);
    return;
  }
  if (m->digest.size() != 64 || m->digest.find_first_not_of("0123456789abcdef") != std::string::npos)
    fuzz::finding("a digest that is not 64 hex digits", m->digest);
  sdk::Value doc = sdk::Value::object();
  doc.set("module", m->name);
  doc.set("version", m->version);
  doc.set("resources", m->resources);
  auto again = fleet::parse_module(fleet::canonical_json(doc), "again");
  if (!again) fuzz::finding("the canonical JSON of an accepted module is refused", again.error().describe());
  if (again->digest != m->digest) fuzz::finding("the digest changed through canonical JSON", fleet::canonical_json(doc));

  const auto n = node();
  auto plain = fleet::render_module(*m, n);
  fleet::TemplateCache cache;
  for (int round = 0; round < 2; ++round) {
    auto cached = fleet::render_module(*m, n, cache);
    if (bool(plain) != bool(cached)) fuzz::finding("the cache changed whether a module renders");
    if (plain && !(*plain == *cached)) fuzz::finding("the cache changed a rendering", plain->to_json());
    if (!plain && plain.error().message != cached.error().message)
      fuzz::finding("the cache changed an error", plain.error().message + "\n" + cached.error().message);
  }
  if (!plain) {
    check_refusal(plain.error(), "render_module");
    return;
  }
  if (!plain->is_array() || plain->as_array().size() != m->resources.as_array().size())
    fuzz::finding("a rendering with another number of resources", plain->to_json());
  auto composed = fleet::compose({{"module a@1", *plain}});
  if (!composed) check_refusal(composed.error(), "compose");  // rendered ids may collide
  (void)fleet::diff(m->resources, *plain);
}

void fuzz_selector(std::string_view text) {
  auto s = fleet::parse_selector(text);
  if (!s) {
    check_refusal(s.error(), "parse_selector");
    const std::string& msg = s.error().message;
    constexpr std::string_view prefix = "selector: at position ";
    if (msg.rfind(prefix, 0) != 0) fuzz::finding("a selector error without its position", msg);
    const auto pos = std::stoull(msg.substr(prefix.size()));
    if (pos < 1 || pos > text.size() + 1) fuzz::finding("a selector error position outside the text", msg);
    return;
  }
  if (s->terms.empty()) fuzz::finding("an accepted selector without a term");
  const std::string canonical = fleet::to_string(*s);
  auto again = fleet::parse_selector(canonical);
  if (!again) fuzz::finding("the canonical text of an accepted selector is refused", canonical + "\n" + again.error().message);
  if (fleet::to_string(*again) != canonical) fuzz::finding("to_string does not round-trip", canonical);
  if (fleet::matches(*s, node()) != fleet::matches(*again, node()))
    fuzz::finding("the canonical selector matches differently", canonical);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t sel = in.byte();
  const std::string_view text = in.rest();
  switch (sel % 3) {
    case 0: fuzz_template(text); break;
    case 1: fuzz_module(text); break;
    default: fuzz_selector(text); break;
  }
  return 0;
}
