// Connecting, retrying in the background, server restarts and link events.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "mesh/testing/nats_server.h"
#include "test_support.h"

namespace mesh::transports::nats::test {
namespace {

using mesh::testing::eventually;
using sdk::ErrorCode;
using sdk::LinkEvent;
using sdk::Message;

using NatsTransportLinkTest = TransportTestBase;

TEST_F(NatsTransportLinkTest, NobodyListeningWithoutRetryIsUnavailable) {
  const int port = mesh::testing::free_tcp_port();
  auto t = make(config_for("nats://127.0.0.1:" + std::to_string(port)));
  EventRecorder events;
  t->on_link_event(events.handler());
  const auto start = std::chrono::steady_clock::now();
  auto r = t->connect(1s, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable) << describe(r.error());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_FALSE(t->connected());
  EXPECT_EQ(t->publish(Message{"a", "", {}, "x"}).error().code, ErrorCode::Unavailable);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(events.events().empty());
  t->close();
  EXPECT_TRUE(events.events().empty());  // there never was a connection to close
}

TEST_F(NatsTransportLinkTest, RetryInBackgroundConnectsOnceTheServerStarts) {
  mesh::testing::NatsServer server;
  server.stop();  // a host started while the broker is down
  auto t = make(config_for(server.url()));
  EventRecorder events;
  t->on_link_event(events.handler());
  auto r = t->connect(500ms, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable) << describe(r.error());
  EXPECT_FALSE(t->connected());
  EXPECT_EQ(t->connect(500ms, true).error().code, ErrorCode::Unavailable);  // still trying
  // Subscriptions and publishes made meanwhile are sent once connected.
  Inbox inbox;
  auto early_sub = t->subscribe("mesh.early", "", inbox.handler());
  ASSERT_TRUE(early_sub) << describe(early_sub.error());
  EXPECT_TRUE(t->publish(Message{"mesh.early", "", {}, "buffered"}));
  EXPECT_EQ(t->request(Message{"mesh.early", "", {}, "?"}, 1s).error().code,
            ErrorCode::Unavailable);
  EXPECT_EQ(t->flush(200ms).error().code, ErrorCode::Unavailable);

  std::this_thread::sleep_for(700ms);  // a few failed rounds
  server.start();
  ASSERT_TRUE(eventually([&] { return events.count(LinkEvent::Connected) == 1; }, 10000))
      << logger_.dump();
  EXPECT_TRUE(t->connected());
  EXPECT_TRUE(t->connect(500ms, true));  // now simply OK
  EXPECT_EQ(t->max_payload_bytes(), 1024u * 1024u);
  EXPECT_TRUE(logger_.contains({"transport=nats event=connected server=nats://127.0.0.1:" +
                                std::to_string(server.port())}));
  ASSERT_TRUE(t->publish(Message{"mesh.early", "", {}, "after"}));
  ASSERT_TRUE(t->flush(2s));
  ASSERT_TRUE(inbox.wait_for(2)) << inbox.size();
  EXPECT_EQ(inbox.messages().back().body, "after");
  early_sub->reset();
  t->close();
  EXPECT_EQ(events.count(LinkEvent::Closed), 1);
}

TEST_F(NatsTransportLinkTest, ServerRestartReconnectsAndSubscriptionsResume) {
  mesh::testing::NatsServer server;
  auto t = make(config_for(server.url()));
  EventRecorder events;
  t->on_link_event(events.handler());
  ASSERT_TRUE(t->connect(2s, false));
  EXPECT_EQ(events.count(LinkEvent::Connected), 0);  // connect() itself reported success
  Inbox inbox;
  auto sub = t->subscribe("mesh.restart", "", inbox.handler());
  ASSERT_TRUE(sub);
  ASSERT_TRUE(t->publish(Message{"mesh.restart", "", {}, "before"}));
  ASSERT_TRUE(inbox.wait_for(1));

  server.stop();
  ASSERT_TRUE(eventually([&] { return events.count(LinkEvent::Disconnected) == 1; }, 10000))
      << logger_.dump();
  EXPECT_FALSE(t->connected());
  EXPECT_TRUE(logger_.contains({"transport=nats event=disconnected server=" + server.url()},
                               sdk::LogLevel::Warn))
      << logger_.dump();
  // While disconnected: publishes are buffered, requests fail fast.
  EXPECT_TRUE(t->publish(Message{"mesh.restart", "", {}, "during"}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(t->request(Message{"mesh.restart", "", {}, "?"}, 5s).error().code,
            ErrorCode::Unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);

  server.start();
  ASSERT_TRUE(eventually([&] { return events.count(LinkEvent::Reconnected) == 1; }, 10000))
      << logger_.dump();
  EXPECT_TRUE(t->connected());
  EXPECT_TRUE(logger_.contains({"transport=nats event=reconnected server=" + server.url()}));
  ASSERT_TRUE(t->publish(Message{"mesh.restart", "", {}, "after"}));
  ASSERT_TRUE(t->flush(2s));
  ASSERT_TRUE(inbox.wait_for(3)) << inbox.size();
  std::vector<std::string> bodies;
  for (const auto& m : inbox.messages()) bodies.push_back(m.body);
  EXPECT_EQ(bodies, (std::vector<std::string>{"before", "during", "after"}));

  // A second restart works the same way.
  server.stop();
  ASSERT_TRUE(eventually([&] { return events.count(LinkEvent::Disconnected) == 2; }, 10000));
  server.start();
  ASSERT_TRUE(eventually([&] { return events.count(LinkEvent::Reconnected) == 2; }, 10000));
  ASSERT_TRUE(t->publish(Message{"mesh.restart", "", {}, "again"}));
  ASSERT_TRUE(inbox.wait_for(4));

  sub->reset();
  t->close();
  EXPECT_EQ(events.count(LinkEvent::Closed), 1);
  EXPECT_EQ(events.count(LinkEvent::Disconnected), 2);  // the deliberate close is not one
  EXPECT_EQ(events.events().back(), LinkEvent::Closed);
}

TEST_F(NatsTransportLinkTest, CloseWhileRetryingInBackground) {
  const int port = mesh::testing::free_tcp_port();
  auto t = make(config_for("nats://127.0.0.1:" + std::to_string(port)));
  EventRecorder events;
  t->on_link_event(events.handler());
  EXPECT_EQ(t->connect(200ms, true).error().code, ErrorCode::Unavailable);
  std::this_thread::sleep_for(300ms);
  const auto start = std::chrono::steady_clock::now();
  t->close();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(events.count(LinkEvent::Connected), 0);
  EXPECT_EQ(events.count(LinkEvent::Closed), 1);
  t.reset();
}

TEST_F(NatsTransportLinkTest, LinkHandlerMayCloseTheTransport) {
  mesh::testing::NatsServer server;
  auto t = make(config_for(server.url()));
  NatsTransport* raw = t.get();
  std::atomic<bool> handler_returned{false};
  t->on_link_event([raw, &handler_returned](LinkEvent e) {
    if (e != LinkEvent::Disconnected) return;
    raw->close();  // on nats.c's callback thread: must not wait for that thread
    handler_returned = true;
  });
  ASSERT_TRUE(t->connect(2s, false));
  server.stop();
  ASSERT_TRUE(eventually([&] { return handler_returned.load(); }, 10000)) << logger_.dump();
  auto r = t->publish(Message{"a", "", {}, "x"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("closed"), std::string::npos) << r.error().message;
  t.reset();
}

// A request waiting for its reply when the link drops fails at once (Unavailable), with nats.c's
// shared reply subscription and with per_request_inbox (decision 161) alike, and requests work
// again after the reconnect.
TEST_F(NatsTransportLinkTest, InFlightRequestFailsWhenTheLinkDrops) {
  for (const bool own_inbox : {false, true}) {
    mesh::testing::NatsServer server;
    sdk::Value cfg = config_for(server.url());
    cfg.set("per_request_inbox", own_inbox);
    auto t = connect(cfg);
    auto silent = t->subscribe("mesh.inflight.silent", "", [](Message&&) {});
    ASSERT_TRUE(silent);
    ASSERT_TRUE(t->flush(2s));
    std::atomic<bool> done{false};
    sdk::Result<Message> r = sdk::fail(ErrorCode::Internal, "not run");
    std::chrono::steady_clock::duration waited{};
    std::thread requester([&] {
      const auto start = std::chrono::steady_clock::now();
      r = t->request(Message{"mesh.inflight.silent", "", {}, "?"}, 20s);
      waited = std::chrono::steady_clock::now() - start;
      done = true;
    });
    std::this_thread::sleep_for(300ms);
    server.stop();
    ASSERT_TRUE(eventually([&] { return done.load(); }, 10000)) << "own_inbox=" << own_inbox;
    requester.join();
    ASSERT_FALSE(r) << "own_inbox=" << own_inbox;
    EXPECT_EQ(r.error().code, ErrorCode::Unavailable) << describe(r.error());
    EXPECT_LT(waited, 10s) << "own_inbox=" << own_inbox;
    server.start();
    ASSERT_TRUE(eventually([&] { return t->connected(); }, 10000)) << "own_inbox=" << own_inbox;
    auto echo = t->subscribe("mesh.inflight.echo", "", [&](Message&& m) {
      (void)t->publish(Message{m.reply, "", {}, "re:" + m.body});
    });
    ASSERT_TRUE(echo);
    auto again = t->request(Message{"mesh.inflight.echo", "", {}, "x"}, 5s);
    ASSERT_TRUE(again) << describe(again.error()) << " own_inbox=" << own_inbox;
    EXPECT_EQ(again->body, "re:x");
    echo->reset();
    silent->reset();
    t->close();
  }
}

// per_request_inbox starts no thread for replies: a request adds none to the process, where
// nats.c's shared reply subscription adds its delivery thread on the first request.
TEST_F(NatsTransportLinkTest, PerRequestInboxStartsNoReplyThread) {
  mesh::testing::NatsServer server;
  auto threads = [] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
  };
  for (const bool own_inbox : {true, false}) {
    sdk::Value cfg = config_for(server.url());
    cfg.set("per_request_inbox", own_inbox);
    auto responder_side = connect(config_for(server.url()));
    auto echo = responder_side->subscribe("mesh.threads.echo", "", [&](Message&& m) {
      (void)responder_side->publish(Message{m.reply, "", {}, "re:" + m.body});
    });
    ASSERT_TRUE(echo);
    ASSERT_TRUE(responder_side->flush(2s));
    auto t = connect(cfg);
    const std::size_t before = threads();
    auto r = t->request(Message{"mesh.threads.echo", "", {}, "x"}, 5s);
    ASSERT_TRUE(r) << describe(r.error());
    const std::size_t after = threads();
    if (own_inbox)
      EXPECT_EQ(after, before);
    else
      EXPECT_EQ(after, before + 1) << "nats.c's reply subscription has a thread of its own";
    t->close();
    echo->reset();
    responder_side->close();
  }
}

TEST_F(NatsTransportLinkTest, ConnectionNameReachesTheServer) {
  mesh::testing::NatsServer server({"-DV"});  // the trace log shows the CONNECT line
  sdk::Value c = config_for(server.url());
  c.set("name", "node-under-test");
  auto t = connect(c);
  ASSERT_TRUE(t->flush(1s));
  EXPECT_TRUE(eventually(
      [&] {
        std::ifstream in(server.log_path());
        std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return log.find("\"name\":\"node-under-test\"") != std::string::npos;
      },
      3000));
}

}  // namespace
}  // namespace mesh::transports::nats::test
