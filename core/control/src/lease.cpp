#include "lease.h"

#include <spdlog/spdlog.h>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/sdk/value.h"

namespace mesh::control::detail {
namespace {

struct Claim {
  std::string holder;
  std::string run;
  std::int64_t expires_ms = 0;
};

// A record's value as written by this file; anything else reads as an expired claim (a
// compare-and-swap on its version still decides who writes next).
Claim parse_claim(const std::string& text) {
  Claim c;
  auto v = common::parse_json(text, common::JsonLimits{4096, 4});
  if (!v || !v->is_object()) return c;
  if (const auto* h = v->find("holder"); h && h->is_string()) c.holder = h->as_string();
  if (const auto* r = v->find("run"); r && r->is_string()) c.run = r->as_string();
  if (const auto* e = v->find("expires_ms"); e && e->is_int()) c.expires_ms = e->as_int();
  return c;
}

std::string claim_text(const std::string& holder, const std::string& run, std::int64_t expires_ms) {
  sdk::Value v = sdk::Value::object();
  v.set("holder", holder);
  v.set("run", run);
  v.set("expires_ms", expires_ms);
  return v.to_json();
}

common::LogBudget& store_log() {
  static common::LogBudget budget{1};
  return budget;
}

void warn_store(const char* what, const sdk::Error& e) {
  if (std::uint64_t hidden = 0; store_log().take(&hidden))
    common::logger()->warn("lease: {}: {}{}", what, e.describe(), common::LogBudget::suffix(hidden));
}

}  // namespace

Lease::Lease(std::shared_ptr<sdk::Store> store, std::string name, std::string instance, std::chrono::milliseconds ttl)
    : store_(std::move(store)),
      name_(std::move(name)),
      instance_(std::move(instance)),
      run_(common::to_hex(common::random_bytes(8))),
      ttl_(ttl) {}

bool Lease::held(std::int64_t now_ms) const noexcept {
  return now_ms < held_until_ms_.load(std::memory_order_acquire) - ttl_.count() / 10;
}

bool Lease::renew_membership(std::int64_t now_ms) {
  sdk::RecordWrite w;
  w.ns = kInstanceNs;
  w.key = instance_;
  w.value = claim_text(instance_, run_, now_ms + ttl_.count());
  auto put = store_->put_records({w}, now_ms);
  if (!put && put.error().code != sdk::ErrorCode::Unsupported) {
    warn_store("membership not renewed", put.error());
    return false;
  }
  return put.has_value();
}

std::vector<std::string> Lease::collect_departed(std::int64_t now_ms) {
  std::vector<std::string> out;
  auto members = store_->records(kInstanceNs, "");
  if (!members) {
    if (members.error().code == sdk::ErrorCode::Unsupported) return out;
    warn_store("instances not read", members.error());
    return out;
  }
  for (const auto& m : *members) {
    if (m.key == instance_) continue;
    if (parse_claim(m.value).expires_ms > now_ms) continue;
    sdk::RecordWrite w;
    w.ns = kInstanceNs;
    w.key = m.key;
    w.erase = true;
    w.expected_version = m.version;  // it came back meanwhile: not departed
    if (auto gone = store_->put_records({w}, now_ms); gone) out.push_back(m.key);
  }
  return out;
}

Lease::Round Lease::tick(std::int64_t now_ms) noexcept {
  Round r;
  try {
    renew_membership(now_ms);
    auto rec = store_->record(kLeaseNs, name_);
    if (!rec && rec.error().code == sdk::ErrorCode::Unsupported) {
      // A store that keeps no records is never shared by several instances: this one holds it.
      r.held = true;
      held_until_ms_.store(now_ms + ttl_.count(), std::memory_order_release);
    } else if (!rec) {
      warn_store("not read", rec.error());
    } else {
      std::uint64_t version = 0;
      bool claimable = true;
      Claim c;
      if (*rec) {
        version = (*rec)->version;
        c = parse_claim((*rec)->value);
        claimable = (c.holder == instance_ && c.run == run_) || c.expires_ms <= now_ms;
      }
      if (claimable) {
        sdk::RecordWrite w;
        w.ns = kLeaseNs;
        w.key = name_;
        w.value = claim_text(instance_, run_, now_ms + ttl_.count());
        w.expected_version = version;
        if (auto put = store_->put_records({w}, now_ms); put) {
          r.held = true;
          held_until_ms_.store(now_ms + ttl_.count(), std::memory_order_release);
          if (!was_held_)
            common::logger()->info("lease={} taken instance={}{}", name_, instance_,
                                   c.holder.empty() || c.holder == instance_ ? ""
                                                                             : " (from instance=" + c.holder + ")");
        } else if (put.error().code != sdk::ErrorCode::FailedPrecondition) {
          warn_store("not written", put.error());
        }
      }
    }
    if (!r.held) {
      held_until_ms_.store(0, std::memory_order_release);
      if (was_held_) common::logger()->warn("lease={} lost instance={}", name_, instance_);
    }
    r.taken = r.held && !was_held_;
    was_held_ = r.held;
    if (r.held) r.departed = collect_departed(now_ms);
  } catch (const std::exception& e) {
    common::logger()->error("lease={}: {}", name_, e.what());
    held_until_ms_.store(0, std::memory_order_release);
    was_held_ = false;
    r = Round{};
  }
  return r;
}

void Lease::release(std::int64_t now_ms) noexcept {
  try {
    const bool had = was_held_;
    was_held_ = false;
    held_until_ms_.store(0, std::memory_order_release);
    std::vector<sdk::RecordWrite> writes;
    sdk::RecordWrite member;
    member.ns = kInstanceNs;
    member.key = instance_;
    member.erase = true;
    writes.push_back(member);
    if (had) {
      auto rec = store_->record(kLeaseNs, name_);
      if (rec && *rec) {
        Claim c = parse_claim((*rec)->value);
        if (c.holder == instance_ && c.run == run_) {
          sdk::RecordWrite w;
          w.ns = kLeaseNs;
          w.key = name_;
          w.value = claim_text(instance_, run_, 0);
          w.expected_version = (*rec)->version;
          writes.push_back(w);
        }
      }
    }
    if (auto put = store_->put_records(writes, now_ms); !put) {
      if (put.error().code != sdk::ErrorCode::Unsupported) warn_store("not released", put.error());
    }
    else if (had)
      common::logger()->info("lease={} released instance={}", name_, instance_);
  } catch (const std::exception& e) {
    common::logger()->error("lease={}: {}", name_, e.what());
  }
}

}  // namespace mesh::control::detail
