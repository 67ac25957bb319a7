// Helpers shared by the nats transport tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mesh/sdk/transport.h"
#include "mesh/testing/process.h"
#include "nats_transport.h"

namespace mesh::transports::nats::test {

using namespace std::chrono_literals;

/// Keeps every log line; prints them too when MESH_TEST_VERBOSE is set.
class CapturingLogger final : public sdk::Logger {
 public:
  void log(sdk::LogLevel level, std::string_view message) noexcept override {
    std::lock_guard lk(mu_);
    lines_.emplace_back(level, std::string(message));
    if (std::getenv("MESH_TEST_VERBOSE")) std::cerr << "[log] " << message << "\n";
  }
  bool enabled(sdk::LogLevel) const noexcept override { return true; }

  /// True when one line at `level` or above contains every needle.
  bool contains(const std::vector<std::string>& needles,
                sdk::LogLevel level = sdk::LogLevel::Trace) const {
    std::lock_guard lk(mu_);
    for (const auto& entry : lines_) {
      if (entry.first < level) continue;
      const std::string& line = entry.second;  // a named reference: clang 14 cannot capture a binding
      if (std::all_of(needles.begin(), needles.end(),
                      [&](const std::string& n) { return line.find(n) != std::string::npos; }))
        return true;
    }
    return false;
  }
  std::string dump() const {
    std::lock_guard lk(mu_);
    std::string out;
    for (const auto& [lvl, line] : lines_) out += line + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<sdk::LogLevel, std::string>> lines_;
};

/// Records link events.
class EventRecorder {
 public:
  sdk::LinkHandler handler() {
    return [this](sdk::LinkEvent e) {
      std::lock_guard lk(mu_);
      events_.push_back(e);
    };
  }
  int count(sdk::LinkEvent e) const {
    std::lock_guard lk(mu_);
    return static_cast<int>(std::count(events_.begin(), events_.end(), e));
  }
  std::vector<sdk::LinkEvent> events() const {
    std::lock_guard lk(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<sdk::LinkEvent> events_;
};

/// Collects received messages.
class Inbox {
 public:
  sdk::MessageHandler handler() {
    return [this](sdk::Message&& m) {
      std::lock_guard lk(mu_);
      messages_.push_back(std::move(m));
    };
  }
  std::size_t size() const {
    std::lock_guard lk(mu_);
    return messages_.size();
  }
  std::vector<sdk::Message> messages() const {
    std::lock_guard lk(mu_);
    return messages_;
  }
  bool wait_for(std::size_t n, int timeout_ms = 5000) const {
    return mesh::testing::eventually([&] { return size() >= n; }, timeout_ms);
  }

 private:
  mutable std::mutex mu_;
  std::vector<sdk::Message> messages_;
};

inline sdk::Value config_for(const std::vector<std::string>& urls) {
  sdk::Value::Array servers;
  for (const auto& u : urls) servers.emplace_back(u);
  sdk::Value config = sdk::Value::object();
  config.set("servers", sdk::Value(std::move(servers)));
  return config;
}
inline sdk::Value config_for(const std::string& url) { return config_for(std::vector{url}); }

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string describe(const sdk::Error& e) {
  return std::string(sdk::to_string(e.code)) + ": " + e.describe();
}

/// A logger, a host context and helpers to make configured transports.
class TransportTestBase : public ::testing::Test {
 protected:
  TransportTestBase() {
    host_.logger = &logger_;
    host_.role = "tool";
  }

  /// A configured transport (fails the test when configure fails).
  std::unique_ptr<NatsTransport> make(const sdk::Value& config) {
    auto t = std::make_unique<NatsTransport>(host_);
    auto r = t->configure(config);
    EXPECT_TRUE(r) << describe(r.error());
    return t;
  }
  /// A configured and connected transport.
  std::unique_ptr<NatsTransport> connect(const sdk::Value& config) {
    auto t = make(config);
    auto r = t->connect(2s, false);
    EXPECT_TRUE(r) << describe(r.error());
    return t;
  }

  CapturingLogger logger_;
  sdk::HostContext host_;
};

}  // namespace mesh::transports::nats::test
