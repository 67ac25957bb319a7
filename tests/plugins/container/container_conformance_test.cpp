// The SDK's provider conformance suite, run on the container provider against the real podman of
// the shared sandbox: every sample goes through plan-has-no-side-effects, read-after-apply,
// plan-after-apply, remove-twice and ensure-absent; every bad input must be refused with its path.
#include <memory>
#include <mutex>
#include <string>

#include "container_test_support.h"
#include "mesh/sdk/testing/conformance.h"

namespace mesh::plugins::container::test {
namespace {

namespace mt = mesh::sdk::testing;
using sdk::Value;

[[maybe_unused]] auto* const podman_env =
    ::testing::AddGlobalTestEnvironment(new mesh::testing::PodmanEnvironment);

Value strings(std::initializer_list<const char*> items) {
  Value::Array a;
  for (const char* s : items) a.emplace_back(s);
  return Value(std::move(a));
}

Value env_of(const char* key, const char* value) {
  Value v = Value::object();
  v.set(key, value);
  return v;
}

// A second image (another digest) for the image-update sample, imported once per binary.
std::string other_image(mesh::testing::PodmanSandbox& box) {
  static std::once_flag once;
  static std::string reference;
  std::call_once(once, [&] { reference = box.import_image("localhost/mesh-other:latest", "other").reference; });
  return reference;
}

mt::ProviderConformance container_conformance() {
  mesh::testing::PodmanSandbox* box = mesh::testing::shared_podman_sandbox();
  // While gtest registers tests there is no sandbox yet: only the sample names matter then.
  const std::string image =
      box ? box->image().reference : "localhost/mesh-test@sha256:" + std::string(64, '0');
  const std::string image2 =
      box ? other_image(*box) : "localhost/mesh-other@sha256:" + std::string(64, '0');

  mt::ProviderConformance c;
  c.make_provider = [box](const sdk::HostContext& host) -> std::unique_ptr<sdk::Provider> {
    if (!box) {
      ADD_FAILURE() << "no podman sandbox";
      return nullptr;
    }
    return make_sandbox_provider(host, *box);
  };
  auto container = [&image](const char* name,
                            std::initializer_list<std::pair<std::string, Value>> props) {
    auto r = mt::make_resource("container", std::string("conf-") + name, props);
    if (!r.properties.find("image")) r.properties.set("image", image);
    return r;
  };
  const Value sleep = strings({"sleep", "1000"});
  c.samples = {
      {"create", container("create", {{"command", sleep}, {"env", env_of("A", "1")}})},
      {"create_stopped", container("stopped", {{"command", sleep}, {"running", false}})},
      {"update_env", container("env", {{"command", sleep}, {"env", env_of("A", "2")}}),
       container("env", {{"command", sleep}, {"env", env_of("A", "1")}})},
      {"update_image", container("image", {{"command", sleep}, {"image", image2}}),
       container("image", {{"command", sleep}})},
      {"start_stopped", container("start", {{"command", sleep}}),
       container("start", {{"command", sleep}, {"running", false}})},
      {"ensure_absent", container("absent", {{"command", sleep}, {"ensure", "absent"}}),
       container("absent", {{"command", sleep}})},
  };
  c.bad_resources = {
      {"name_with_slash", container("a/b", {}), "id"},
      {"name_leading_dash", mt::make_resource("container", "-x", {{"image", image}}), "id"},
      {"empty_name", mt::make_resource("container", "", {{"image", image}}), "id"},
      {"no_image", mt::make_resource("container", "conf-noimage", {}), "properties.image"},
      {"empty_image", container("e", {{"image", ""}}), "properties.image"},
      {"short_digest", container("d", {{"image", "busybox@sha256:abc"}}), "properties.image"},
      {"image_is_option", container("o", {{"image", "--privileged"}}), "properties.image"},
      {"image_not_string", container("n", {{"image", 3}}), "properties.image"},
      {"env_bad_name", container("v", {{"env", env_of("1BAD", "x")}}), "properties.env.1BAD"},
      {"env_not_map", container("m", {{"env", strings({"A=1"})}}), "properties.env"},
      {"port_without_host", container("p", {{"ports", strings({"80"})}}), "properties.ports[0]"},
      {"port_range", container("r", {{"ports", strings({"80:80", "8000-8010:80"})}}),
       "properties.ports[1]"},
      {"volume_relative", container("w", {{"volumes", strings({"data:/x", "rel/x:/y"})}}),
       "properties.volumes[1]"},
      {"volume_mode", container("x", {{"volumes", strings({"/a:/b:rx"})}}), "properties.volumes[0]"},
      {"restart_unknown", container("y", {{"restart", "sometimes"}}), "properties.restart"},
      {"running_not_bool", container("z", {{"running", "yes"}}), "properties.running"},
      {"command_not_list", container("c", {{"command", "sleep 1000"}}), "properties.command"},
      {"bad_ensure", container("f", {{"ensure", "gone"}}), "properties.ensure"},
      {"unknown_property", container("u", {{"privileged", true}}), "properties.privileged"},
  };
  c.observe = [box](const sdk::ResourceId& rid) -> std::string {
    if (!box) return "no sandbox";
    return podman_inspect(*box, rid.id,
                          "{{.Id}} {{.State.Status}} {{.State.StartedAt}} {{.RestartCount}}");
  };
  return c;
}

}  // namespace

MESH_INSTANTIATE_PROVIDER_CONFORMANCE(ContainerProvider, container_conformance);

}  // namespace mesh::plugins::container::test
