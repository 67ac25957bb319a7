// The SDK's provider conformance suite, run on the file provider: every case below goes through
// plan-has-no-side-effects, read-after-apply, plan-after-apply, remove-twice and ensure-absent,
// and every bad input must be refused with the path given.
#include <unistd.h>

#include <climits>
#include <memory>
#include <string>

#include "file_provider.h"
#include "file_test_support.h"
#include "mesh/sdk/testing/conformance.h"

namespace mesh::plugins::file::test {
namespace {

namespace mt = mesh::sdk::testing;
using sdk::Value;

mt::ProviderConformance file_conformance() {
  auto dir = std::make_shared<TempDir>();
  const std::string root = dir->path();
  mt::ProviderConformance c;
  c.make_provider = [root](const sdk::HostContext& host) -> std::unique_ptr<sdk::Provider> {
    auto provider = std::make_unique<FileProvider>(host);
    Value config = Value::object();
    config.set("allowed_roots", Value(Value::Array{Value(root)}));
    if (auto ok = provider->configure(config); !ok) {
      ADD_FAILURE() << "configure: " << ok.error().describe();
      return nullptr;
    }
    return provider;
  };
  auto file = [&root](const std::string& name,
                      std::initializer_list<std::pair<std::string, Value>> props) {
    return mt::make_resource("file", root + "/" + name, props);
  };

  c.samples = {
      {"create", file("create.txt", {{"content", "hello\n"}, {"mode", "0640"}})},
      {"create_without_content", file("touched", {{"mode", "0600"}})},
      {"create_three_digit_mode", file("three", {{"content", "x"}, {"mode", "600"}})},
      {"create_setuid", file("suid", {{"content", "#!/bin/sh\n"}, {"mode", "4755"}})},
      {"update_content", file("update.txt", {{"content", "new\n"}}),
       file("update.txt", {{"content", "old\n"}})},
      {"update_mode_only", file("mode.txt", {{"content", "same\n"}, {"mode", "0600"}}),
       file("mode.txt", {{"content", "same\n"}, {"mode", "0644"}})},
      {"update_mode_unmanaged_content", file("mode2.txt", {{"mode", "0755"}}),
       file("mode2.txt", {{"content", "kept\n"}, {"mode", "0644"}})},
      {"content_base64", file("binary", {{"content_base64", "AAEC/w=="}, {"mode", "0644"}})},
      {"text_to_base64", file("switch", {{"content_base64", "AP8A/w=="}}),
       file("switch", {{"content", "text\n"}})},
      {"empty_content", file("empty", {{"content", ""}})},
      {"empty_base64", file("empty64", {{"content_base64", ""}})},
      {"ensure_absent", file("gone.txt", {{"ensure", "absent"}}),
       file("gone.txt", {{"content", "bye\n"}})},
      {"ensure_absent_of_nothing", file("never.txt", {{"ensure", "absent"}})},
  };
  // Changing the owner needs root; as root, numeric and named ids must compare equal.
  if (::geteuid() == 0)
    c.samples.push_back(
        {"update_owner",
         file("owned.txt", {{"content", "x"}, {"owner", "65534"}, {"group", "65534"}}),
         file("owned.txt", {{"content", "x"}, {"owner", "root"}, {"group", "0"}})});

  std::string nul_path = root + "/a";
  nul_path.push_back('\0');
  nul_path += "b";
  c.bad_resources = {
      {"relative_path", mt::make_resource("file", "relative/x", {{"content", "x"}}), "id"},
      {"dot_dot", file("a/../b", {{"content", "x"}}), "id"},
      {"dot", file("./b", {{"content", "x"}}), "id"},
      {"double_slash", file("/b", {{"content", "x"}}), "id"},
      {"trailing_slash", file("b/", {{"content", "x"}}), "id"},
      {"nul_byte", mt::make_resource("file", nul_path, {{"content", "x"}}), "id"},
      {"longer_than_path_max", file(std::string(PATH_MAX, 'a'), {{"content", "x"}}), "id"},
      {"component_longer_than_name_max", file(std::string(NAME_MAX + 1, 'a'), {}), "id"},
      {"root_itself", mt::make_resource("file", "/", {}), "id"},
      {"outside_allowed_roots", mt::make_resource("file", root + "-outside/x", {{"content", "x"}}),
       "id"},
      {"invalid_utf8", file("u1", {{"content", std::string("ok\xff\xfe")}}), "properties.content"},
      {"overlong_utf8", file("u2", {{"content", std::string("\xc0\xaf")}}), "properties.content"},
      {"surrogate_utf8", file("u3", {{"content", std::string("\xed\xa0\x80")}}),
       "properties.content"},
      {"truncated_utf8", file("u4", {{"content", std::string("\xe2\x82")}}), "properties.content"},
      {"bad_base64_alphabet", file("b1", {{"content_base64", "not base64!"}}),
       "properties.content_base64"},
      {"bad_base64_padding", file("b2", {{"content_base64", "YQ"}}), "properties.content_base64"},
      {"content_and_base64", file("both", {{"content", "x"}, {"content_base64", "eA=="}}),
       "properties.content_base64"},
      {"mode_not_octal", file("m1", {{"mode", "0999"}}), "properties.mode"},
      {"mode_symbolic", file("m2", {{"mode", "rwx"}}), "properties.mode"},
      {"mode_five_digits", file("m3", {{"mode", "12345"}}), "properties.mode"},
      {"mode_two_digits", file("m4", {{"mode", "64"}}), "properties.mode"},
      {"mode_as_number", file("m5", {{"mode", 644}}), "properties.mode"},
      {"unknown_owner", file("o1", {{"owner", "no-such-user-nox-mesh"}}), "properties.owner"},
      {"unknown_group", file("o2", {{"group", "no-such-group-nox-mesh"}}), "properties.group"},
      {"owner_out_of_range", file("o3", {{"owner", "4294967295"}}), "properties.owner"},
      {"empty_owner", file("o4", {{"owner", ""}}), "properties.owner"},
      {"bad_ensure", file("e1", {{"ensure", "gone"}}), "properties.ensure"},
      {"unknown_property", file("p1", {{"colour", "red"}}), "properties.colour"},
  };
  c.observe = [](const sdk::ResourceId& rid) { return fingerprint(rid.id); };
  c.keep_alive = dir;
  return c;
}

}  // namespace

MESH_INSTANTIATE_PROVIDER_CONFORMANCE(FileProvider, file_conformance);

}  // namespace mesh::plugins::file::test
