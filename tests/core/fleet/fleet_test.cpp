// Unit tests of the fleet composition library (mesh/fleet/fleet.h).
#include "mesh/fleet/fleet.h"

#include <gtest/gtest.h>

#include "mesh/common/json.h"

namespace mesh::fleet {
namespace {

sdk::Value json(std::string_view text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << (v ? "" : v.error().describe());
  return v ? *v : sdk::Value();
}

NodeContext web01() {
  NodeContext n;
  n.name = "web-01";
  n.labels = {{"role", "web"}, {"env", "prod"}};
  n.facts = {{"os.id", "debian"}, {"os.version_id", "12"}, {"arch", "amd64"}};
  return n;
}

TEST(RenderTemplate, Variables) {
  auto r = render_template("{{node.name}} serves {{labels.role}} on {{facts.os.id}} {{facts.os.version_id}}", web01(), "t");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(*r, "web-01 serves web on debian 12");
}

}  // namespace
}  // namespace mesh::fleet
