// The lease on background work (core/control/src/lease.h, decision record 91) over two sqlite
// store objects on one file, as two mesh-control processes would share it. Time is the tick's
// argument: no waiting.
#include <gtest/gtest.h>

#include <filesystem>

#include "lease.h"
#include "mesh/sdk/value.h"
#include "mesh/testing/plugins.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::control::detail {
namespace {

using std::chrono::milliseconds;

class LeaseTest : public ::testing::Test {
 public:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      auto loaded = mesh::testing::load_plugin("store", "sqlite");
      ASSERT_TRUE(loaded) << loaded.error().describe();
      plugins_[i] = *loaded;
      stores_[i] = plugins_[i].as<sdk::Store>();
      ASSERT_TRUE(stores_[i]);
      sdk::Value config = sdk::Value::object();
      config.set("path", (tmp_.path() / "mesh.db").string());
      ASSERT_TRUE(stores_[i]->configure(sdk::apply_defaults(stores_[i]->config_schema(), config)));
      ASSERT_TRUE(stores_[i]->open());
    }
  }

  static constexpr milliseconds kTtl{3000};
  static constexpr std::int64_t kT0 = 1'800'000'000'000;
  mesh::testing::TempDir tmp_;
  loader::LoadedPlugin plugins_[2];
  std::shared_ptr<sdk::Store> stores_[2];
};

TEST_F(LeaseTest, OneHolderRenewsAndAnotherTakesOverOnlyAfterExpiry) {
  Lease a(stores_[0], "background", "aaaa", kTtl);
  Lease b(stores_[1], "background", "bbbb", kTtl);
  EXPECT_EQ(a.renew_every(), milliseconds(1000));

  auto ra = a.tick(kT0);
  EXPECT_TRUE(ra.held);
  EXPECT_TRUE(ra.taken);
  EXPECT_TRUE(a.held(kT0 + 1000));
  auto rb = b.tick(kT0 + 10);
  EXPECT_FALSE(rb.held) << "held by a, not expired";
  EXPECT_FALSE(b.held(kT0 + 10));

  // a renews: still held, not "taken" again; b still waits.
  ra = a.tick(kT0 + 1000);
  EXPECT_TRUE(ra.held);
  EXPECT_FALSE(ra.taken);
  EXPECT_FALSE(b.tick(kT0 + 3500).held) << "renewed at +1000: valid until +4000";
  // a stops acting a tenth of the lease before its expiry.
  EXPECT_TRUE(a.held(kT0 + 3600));
  EXPECT_FALSE(a.held(kT0 + 3800));

  // a dies (no more ticks): b takes over once it has expired, and learns that a departed.
  rb = b.tick(kT0 + 4001);
  EXPECT_TRUE(rb.held);
  EXPECT_TRUE(rb.taken);
  ASSERT_EQ(rb.departed.size(), 1u);
  EXPECT_EQ(rb.departed[0], "aaaa");
  EXPECT_TRUE(b.tick(kT0 + 5000).departed.empty()) << "a departure is reported once";

  // a comes back late: it lost the lease and does not get it back while b renews.
  ra = a.tick(kT0 + 5100);
  EXPECT_FALSE(ra.held);
  EXPECT_FALSE(a.held(kT0 + 5100));
  EXPECT_TRUE(b.tick(kT0 + 6000).held);
  EXPECT_TRUE(b.tick(kT0 + 6000).departed.empty()) << "a renewed its membership: not departed";
}

TEST_F(LeaseTest, ReleaseHandsOverAtOnceAndACopiedInstanceIdIsAnotherHolder) {
  Lease a(stores_[0], "background", "aaaa", kTtl);
  Lease copy(stores_[1], "background", "aaaa", kTtl);  // the same id in a second process
  ASSERT_TRUE(a.tick(kT0).held);
  EXPECT_FALSE(copy.tick(kT0 + 10).held) << "same instance id, another run: not the holder";
  a.release(kT0 + 20);
  EXPECT_FALSE(a.held(kT0 + 20));
  auto r = copy.tick(kT0 + 30);
  EXPECT_TRUE(r.held) << "released: taken at the next round";
  EXPECT_TRUE(r.departed.empty()) << "a clean stop is no departure";
  a.release(kT0 + 40);  // idempotent, and does not touch a lease it no longer holds
  EXPECT_TRUE(copy.tick(kT0 + 50).held);
}

TEST_F(LeaseTest, TwoInstancesRacingForAFreeLeaseOneWins) {
  Lease a(stores_[0], "background", "aaaa", kTtl);
  Lease b(stores_[1], "background", "bbbb", kTtl);
  const bool ha = a.tick(kT0).held;
  const bool hb = b.tick(kT0).held;
  EXPECT_NE(ha, hb) << "exactly one holder";
  // A corrupt lease record reads as expired: the next round's compare-and-swap decides.
  sdk::RecordWrite w;
  w.ns = kLeaseNs;
  w.key = "background";
  w.value = "not json";
  ASSERT_TRUE(stores_[0]->put_records({w}, kT0 + 1));
  const bool ha2 = a.tick(kT0 + 2).held;
  const bool hb2 = b.tick(kT0 + 3).held;
  EXPECT_TRUE(ha2) << "the first to try takes a lease whose record does not parse";
  EXPECT_FALSE(hb2) << "never both";
}

}  // namespace
}  // namespace mesh::control::detail
