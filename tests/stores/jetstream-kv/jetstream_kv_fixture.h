// Shared set-up of the jetstream-kv store tests: a real nats-server with JetStream (or the
// 3-node cluster of tests/support) on loopback, a fresh stream (prefix) per test, and each store
// instance with its own local SQLite file in the test's temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "jetstream_kv_store.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "mesh/testing/nats_server.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::stores::jetstream_kv::testing {

/// The store's config for servers `urls`, stream `prefix`, `replicas`, local file `local`.
inline sdk::Value store_config(const std::vector<std::string>& urls, const std::string& prefix, int replicas,
                               const std::string& local) {
  sdk::Value c = sdk::Value::object();
  sdk::Value list = sdk::Value::array();
  for (const auto& u : urls) list.as_array().push_back(sdk::Value(u));
  c.set("servers", list);
  c.set("prefix", prefix);
  c.set("replicas", std::int64_t{replicas});
  c.set("local_path", local);
  return c;
}

/// A configured and opened store, or null with the error added as a test failure.
inline std::unique_ptr<JetStreamKvStore> open_store(const sdk::HostContext& host, const sdk::Value& config) {
  auto s = std::make_unique<JetStreamKvStore>(host);
  if (auto r = s->configure(config); !r) {
    ADD_FAILURE() << "configure: " << r.error().describe();
    return nullptr;
  }
  if (auto r = s->open(); !r) {
    ADD_FAILURE() << "open: " << r.error().describe();
    return nullptr;
  }
  return s;
}

/// A stream name no other test of this process used.
inline std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return "MESH_T" + std::to_string(::getpid()) + "_" + std::to_string(++n);
}


/// A real nats-server with JetStream on loopback, a temp folder for local files and a host
/// context: what the jetstream-kv tests beyond the conformance suite start from.
class JetStreamKvTest : public ::testing::Test {
 protected:
  JetStreamKvTest() {
    host_.logger = &logger_;
    host_.role = "tool";
  }
  std::string local(const std::string& name) const { return (dir_.path() / name).string(); }
  /// Adds a token for `node` and enrols it with key "aa"; fails the test on error.
  static void enrol(sdk::Store& s, const std::string& node) {
    ASSERT_TRUE(s.add_token(sdk::TokenRecord{"tok-" + node, node, "hash-" + node, 1000, 1'000'000, false, {}, false}));
    auto e = s.enrol("hash-" + node, node, "aa", 2000);
    ASSERT_TRUE(e) << e.error().describe();
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
  mesh::testing::TempDir dir_;
  mesh::testing::NatsServer server_{{}, true};
};

}  // namespace mesh::stores::jetstream_kv::testing
