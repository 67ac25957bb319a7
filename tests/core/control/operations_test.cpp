// The table of operations (decision record 46) is the only list of the operator API: roles,
// nonce treatment and the documentation are derived from it. What each operation does on the
// wire (routed, refused by role, retried) is in control_plane_test.cpp
// (ControlPlaneOperationsTest), against the same table.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mesh/control/operations.h"
#include "mesh/control/trust.h"

namespace mesh::control {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The behaviour before the table, pinned: the three lists it replaced said exactly this.
TEST(OperationsTest, TheTableSaysWhatTheThreeListsItReplacedSaid) {
  struct Row {
    const char* name;
    Role role;
    Mutating mutating;
  };
  const std::vector<Row> expected = {
      {"token.issue", Role::admin, Mutating::yes},      {"token.list", Role::admin, Mutating::no},
      {"token.revoke", Role::admin, Mutating::yes},     {"operator.add", Role::admin, Mutating::yes},
      {"operator.list", Role::admin, Mutating::no},     {"operator.remove", Role::admin, Mutating::yes},
      {"nodes", Role::reader, Mutating::no},            {"node.remove", Role::admin, Mutating::yes},
      {"node.show", Role::reader, Mutating::no},        {"declare", Role::deployer, Mutating::idempotent},
      {"report", Role::reader, Mutating::no},           {"history", Role::reader, Mutating::no},
      {"rollback", Role::deployer, Mutating::idempotent},
      {"module.push", Role::deployer, Mutating::yes},   {"module.list", Role::reader, Mutating::no},
      {"module.show", Role::reader, Mutating::no},      {"node.label", Role::deployer, Mutating::yes},
      {"assign", Role::deployer, Mutating::yes},        {"unassign", Role::admin, Mutating::yes},
      {"assignments", Role::reader, Mutating::no},      {"deploy", Role::deployer, Mutating::idempotent},
      {"deploy.show", Role::reader, Mutating::no},
      // The publish operations (decision record 59).
      {"publish.part", Role::deployer, Mutating::yes},  {"publish", Role::deployer, Mutating::yes},
      {"repository.key", Role::reader, Mutating::no},
      // Content by digest (decision record 111).
      {"content.put", Role::deployer, Mutating::yes},
      // The pipeline operations (decision record 62).
      {"pipeline.run", Role::deployer, Mutating::idempotent}, {"pipeline.show", Role::reader, Mutating::no},
  };
  const auto ops = api_operations();
  ASSERT_EQ(ops.size(), expected.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].name, expected[i].name);
    EXPECT_EQ(ops[i].role, expected[i].role) << ops[i].name;
    EXPECT_EQ(ops[i].mutating, expected[i].mutating) << ops[i].name;
  }
}

TEST(OperationsTest, NamesAreUniqueSubjectTokens) {
  std::set<std::string> seen;
  for (const auto& op : api_operations()) {
    EXPECT_TRUE(seen.insert(std::string(op.name)).second) << "listed twice: " << op.name;
    EXPECT_FALSE(op.name.empty());
    EXPECT_EQ(op.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz."), std::string_view::npos) << op.name;
    ASSERT_TRUE(find_api_operation(op.name)) << op.name;
    EXPECT_EQ(find_api_operation(op.name)->name, op.name);
  }
  EXPECT_FALSE(find_api_operation("frobnicate"));
  EXPECT_FALSE(find_api_operation(""));
  EXPECT_FALSE(find_api_operation("nodes.")) << "no prefix match";
}

TEST(OperationsTest, AWriteNeedsMoreThanReaderAndOnlyRevisionWritesAreIdempotent) {
  for (const auto& op : api_operations()) {
    if (op.mutating != Mutating::no) {
      EXPECT_NE(op.role, Role::reader) << op.name << " writes";
    }
    if (op.role == Role::reader) {
      EXPECT_EQ(op.mutating, Mutating::no) << op.name;
    }
    // An idempotent operation's answer is stored in the store: never one that may hold a secret.
    if (op.mutating == Mutating::idempotent) {
      // pipeline.run's answer is the run's first record (names, times, no secret).
      EXPECT_TRUE(op.name == "declare" || op.name == "rollback" || op.name == "deploy" || op.name == "pipeline.run") << op.name;
    }
  }
}

TEST(OperationsTest, RoleCheckIsDerivedFromTheTable) {
  for (const auto& op : api_operations()) {
    EXPECT_EQ(role_needed(op.name), to_string(op.role)) << op.name;
    for (Role r : {Role::reader, Role::deployer, Role::admin})
      EXPECT_EQ(role_allows(to_string(r), op.name), static_cast<int>(r) >= static_cast<int>(op.role))
          << to_string(r) << " " << op.name;
    EXPECT_FALSE(role_allows("root", op.name));
    EXPECT_FALSE(role_allows("", op.name));
    EXPECT_FALSE(role_allows("Admin", op.name));
  }
  // An unknown name needs admin (and is then answered unsupported).
  EXPECT_EQ(role_needed("frobnicate"), "admin");
  EXPECT_FALSE(role_allows("deployer", "frobnicate"));
  EXPECT_TRUE(role_allows("admin", "frobnicate"));
}

TEST(OperationsTest, RoleAndMutatingNames) {
  for (Role r : {Role::reader, Role::deployer, Role::admin}) EXPECT_EQ(parse_role(to_string(r)), r);
  EXPECT_FALSE(parse_role("root"));
  EXPECT_EQ(to_string(Mutating::no), "no");
  EXPECT_EQ(to_string(Mutating::yes), "yes");
  EXPECT_EQ(to_string(Mutating::idempotent), "idempotent");
}

// docs/protocol.md shows the table as generated, and its API table lists the same operations in
// the same order.
TEST(OperationsTest, ProtocolDocumentShowsTheTable) {
  const std::string doc = read_text(std::string(MESH_TEST_SOURCE_DIR) + "/docs/protocol.md");
  ASSERT_FALSE(doc.empty());
  const std::string generated = api_operations_markdown();
  const auto heading = doc.find("### Operations, roles and retries");
  ASSERT_NE(heading, std::string::npos);
  const auto table = doc.find("| operation | least role | mutating |", heading);
  ASSERT_NE(table, std::string::npos);
  EXPECT_EQ(doc.substr(table, generated.size()), generated)
      << "docs/protocol.md \"Operations, roles and retries\" differs from the table; it should read:\n"
      << generated;

  // The parameters table of "### API (`mesh.api.<operation>`)": its rows' first cells.
  const auto api = doc.find("### API (`mesh.api.<operation>`)");
  ASSERT_NE(api, std::string::npos);
  auto pos = doc.find("| operation | parameters | result |", api);
  ASSERT_NE(pos, std::string::npos);
  std::vector<std::string> listed;
  std::istringstream lines(doc.substr(pos));
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // separator
  while (std::getline(lines, line) && line.rfind("| `", 0) == 0) {
    const auto end = line.find('`', 3);
    listed.push_back(line.substr(3, end - 3));
  }
  std::vector<std::string> names;
  for (const auto& op : api_operations()) names.emplace_back(op.name);
  EXPECT_EQ(listed, names) << "docs/protocol.md's API table lists other operations than the table";
}

TEST(OperationsTest, MarkdownHasOneRowPerOperation) {
  const std::string md = api_operations_markdown();
  std::size_t rows = 0;
  for (char c : md) rows += c == '\n';
  EXPECT_EQ(rows, api_operations().size() + 2);
  EXPECT_NE(md.find("| `declare` | deployer | idempotent |\n"), std::string::npos) << md;
}

}  // namespace
}  // namespace mesh::control
