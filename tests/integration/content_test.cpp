// File content by digest end to end (issue 16 part 4c, decision record 111): `mesh content push`
// stores a file in the control plane's content directory in ranges that each fit one broker
// message; a file resource declared with `source = "sha256:<hex>"` is fetched by mesh-host over
// mesh.content.<node>, verified, and written. A corrupted range, a digest the control plane lacks
// and bad content.put requests are refused, each with a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;

// Bytes that do not compress and do not repeat at any range size (a simple generator).
std::string pseudo_random(std::size_t n, std::uint64_t seed) {
  std::string s(n, '\0');
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s[i] = static_cast<char>(x >> 56);
  }
  return s;
}

std::string source_declaration(const std::string& path, const std::string& digest) {
  sdk::Value props = sdk::Value::object();
  props.set("source", digest);
  props.set("mode", "0644");
  sdk::Value r = sdk::Value::object();
  r.set("type", "file");
  r.set("id", path);
  r.set("properties", std::move(props));
  sdk::Value resources = sdk::Value::array();
  resources.as_array().push_back(std::move(r));
  sdk::Value d = sdk::Value::object();
  d.set("resources", std::move(resources));
  return d.to_json();
}

std::string status_of(const sdk::Message& m) {
  const std::string* s = m.header(protocol::kHeaderStatus);
  return s ? *s : "";
}

class ContentTest : public MeshTest {
 public:
  /// `mesh content push FILE --output json`: the digest it printed.
  std::string push(const fs::path& file) {
    auto r = mesh({"content", "push", file.string(), "--output", "json"}, 300000);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (r.exit_code != 0) return "";
    return json(r.out).get_string("digest");
  }
  fs::path stored(const std::string& digest) const {
    return dir() / "control" / "content" / "sha256" / digest.substr(7);
  }
  /// Waits for the one outcome of `delivery`.
  sdk::Value outcome(std::int64_t delivery, Host& h) {
    sdk::Value rep;
    EXPECT_TRUE(mesh::testing::eventually(
        [&] {
          rep = report(delivery);
          return count(rep, "applied") + count(rep, "failed") == 1;
        },
        300000))
        << rep.to_json().substr(0, 2048) << h.proc->stderr_text().substr(0, 4096);
    return rep;
  }
  /// A content.put request signed by `id`, as `mesh content push` sends it.
  sdk::Message put_request(const trust::OperatorIdentity& id, const std::string& signer, const std::string& digest,
                           std::int64_t size, std::int64_t offset, const std::string& data) {
    sdk::Value p = sdk::Value::object();
    p.set("digest", digest);
    p.set("size", size);
    p.set("offset", offset);
    p.set("upload", "0123456789abcdef0123");
    p.set("data", common::base64url_encode(data));
    auto m = protocol::make_message(protocol::api_subject("content.put"), p.to_json());
    trust::sign_request(m, trust::kHeaderOperator, signer, id.secret_key, common::now_ms());
    return m;
  }
};

TEST_F(ContentTest, AFiftyMegabyteFileIsPushedDeclaredByDigestDeliveredAndReadBackByteIdentical) {
  const std::string bytes = pseudo_random(50u << 20, 50);
  const fs::path file = dir() / "big.bin";
  write_text(file, bytes);
  const std::string digest = push(file);
  ASSERT_EQ(digest, "sha256:" + common::sha256_hex(bytes));
  ASSERT_EQ(fs::file_size(stored(digest)), bytes.size()) << "kept whole in the content directory";
  EXPECT_TRUE(fs::is_empty(dir() / "control" / "content" / "incoming")) << "no temporary file left";
  // Pushed again: the control plane already holds it, nothing is sent twice.
  auto again = mesh({"content", "push", file.string()});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("already stored " + digest), std::string::npos) << again.out;

  Host& h = add_host("content-01", "5s");
  start_host(h);
  const fs::path target = dir() / "delivered.bin";
  const std::string text = source_declaration(target.string(), digest);
  ASSERT_LT(text.size(), 1024u) << "the declaration carries the digest, not the bytes";
  const sdk::Value d = declare("content-01", text);
  const std::int64_t delivery = d.get_int("delivery", 0);
  ASSERT_GT(delivery, 0) << d.to_json();
  const sdk::Value rep = outcome(delivery, h);
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json().substr(0, 2048) << h.proc->stderr_text().substr(0, 4096);
  EXPECT_TRUE(read_text(target) == bytes) << "the delivered file is byte-identical";
  EXPECT_EQ(fs::file_size(h.state / "plugins" / "file" / "content" / "sha256" / digest.substr(7)), bytes.size()) << "kept in the cache";
}

TEST_F(ContentTest, ACorruptedRangeIsRefusedTheFileIsNotWrittenAndTheFailedReportNamesTheDigest) {
  const std::string bytes = pseudo_random(3u << 20, 3);
  const fs::path file = dir() / "three.bin";
  write_text(file, bytes);
  const std::string digest = push(file);
  ASSERT_FALSE(digest.empty());
  // The shared directory damaged (or a range swapped on the way): same size, one byte changed in
  // the third range.
  {
    std::fstream f(stored(digest), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(bytes.size() - 1000));
    f.put(static_cast<char>(bytes[bytes.size() - 1000] ^ 0x5a));
  }
  Host& h = add_host("content-02", "5s");
  start_host(h);
  const fs::path target = dir() / "corrupt.bin";
  const sdk::Value d = declare("content-02", source_declaration(target.string(), digest));
  const sdk::Value rep = outcome(d.get_int("delivery", 0), h);
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json();
  const std::string shown = rep.to_json();
  EXPECT_NE(shown.find("content " + digest), std::string::npos) << shown;
  EXPECT_NE(shown.find("corrupted or swapped range"), std::string::npos) << shown;
  EXPECT_FALSE(fs::exists(target)) << "never a file of unverified bytes";
  EXPECT_FALSE(fs::exists(h.state / "plugins" / "file" / "content" / "sha256" / digest.substr(7))) << "nothing unverified in the cache";
  EXPECT_TRUE(fs::is_empty(h.state / "plugins" / "file" / "content" / "incoming")) << "the temporary file is removed";
}

TEST_F(ContentTest, ADigestTheControlPlaneLacksIsAFailedReportNamingMeshContentPush) {
  Host& h = add_host("content-03", "5s");
  start_host(h);
  const std::string digest = "sha256:" + common::sha256_hex("never pushed\n");
  const fs::path target = dir() / "missing.txt";
  const sdk::Value d = declare("content-03", source_declaration(target.string(), digest));
  const sdk::Value rep = outcome(d.get_int("delivery", 0), h);
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json();
  const std::string shown = rep.to_json();
  EXPECT_NE(shown.find("content " + digest + " is not on the control plane"), std::string::npos) << shown;
  EXPECT_NE(shown.find("mesh content push FILE"), std::string::npos) << shown;
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(ContentTest, BadContentPutRequestsAreRefusedWithAClearErrorAndNothingIsStored) {
  auto admin = trust::load_operator_identity(admin_identity());
  ASSERT_TRUE(admin) << admin.error().message;
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected) << raw.connected.error().message;
  auto send = [&](const sdk::Message& m) {
    auto r = raw->request(m, 20s);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : sdk::Message{};
  };
  const std::string data = "the bytes of a small file\n";
  const std::string right = "sha256:" + common::sha256_hex(data);
  const std::string wrong = "sha256:" + common::sha256_hex("other bytes\n");

  // The announced digest is not the bytes': refused at the range that ends the file.
  auto r = send(put_request(*admin, admin->name, wrong, static_cast<std::int64_t>(data.size()), 0, data));
  EXPECT_EQ(status_of(r), "error") << r.body;
  EXPECT_NE(r.body.find("permission_denied"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("have " + right + ", not " + wrong + " as announced; nothing stored"), std::string::npos) << r.body;
  EXPECT_FALSE(fs::exists(stored(wrong)));
  EXPECT_FALSE(fs::exists(stored(right)));

  // An offset beyond the announced size.
  r = send(put_request(*admin, admin->name, right, static_cast<std::int64_t>(data.size()), 1000, "x"));
  EXPECT_EQ(status_of(r), "error") << r.body;
  EXPECT_NE(r.body.find("offset 1000 is beyond the file's size of " + std::to_string(data.size()) + " bytes"),
            std::string::npos)
      << r.body;
  // A malformed digest names the field.
  r = send(put_request(*admin, admin->name, "md5:abc", static_cast<std::int64_t>(data.size()), 0, data));
  EXPECT_EQ(status_of(r), "error") << r.body;
  EXPECT_NE(r.body.find("\"digest\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("64 lower-case hex"), std::string::npos) << r.body;

  // A signer that is no operator: refused before anything is read.
  r = send(put_request(*admin, "nobody", right, static_cast<std::int64_t>(data.size()), 0, data));
  EXPECT_EQ(status_of(r), "error") << r.body;
  EXPECT_NE(r.body.find("permission_denied"), std::string::npos) << r.body;
  // A reader may not store content (deployer or admin).
  auto add = mesh({"operator", "add", "look", "--role", "reader"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  auto reader = trust::parse_operator_identity(add.out, "look.identity");
  ASSERT_TRUE(reader) << reader.error().message;
  r = send(put_request(*reader, reader->name, right, static_cast<std::int64_t>(data.size()), 0, data));
  EXPECT_EQ(status_of(r), "error") << r.body;
  EXPECT_NE(r.body.find("permission_denied"), std::string::npos) << r.body;
  EXPECT_FALSE(fs::exists(stored(right))) << "nothing stored by a refused request";

  // The same request by the admin is stored.
  r = send(put_request(*admin, admin->name, right, static_cast<std::int64_t>(data.size()), 0, data));
  EXPECT_EQ(status_of(r), "ok") << r.body;
  EXPECT_EQ(read_text(stored(right)), data);
}

}  // namespace
}  // namespace mesh::itest
