// Staged deploys (`mesh deploy --waves 1,10%,100%`, decision record 66). The first wave is
// written by deploy_module; advance_deploys, called by the control plane's staging thread when a
// report from a node of a current wave arrives, when a wave timeout is due, and at least every
// 5 s (decision record 71; so picking up after a restart whatever the store says is running:
// record ns `deploy_active`), looks at the current wave's delivery report: a failed node halts
// the deploy (the remaining nodes keep their old declaration); a wave with nothing outstanding,
// or past --wave-timeout, moves on when at least --min-applied of it applied, and halts
// otherwise, saying why. Each wave is one write, made with a compare-and-swap on the deploy
// record (two control planes never both write a wave) and on each node's revision.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "fleet_state.h"
#include "fleet_view.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/duration.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

namespace {

// "N" or "P%": a count, or a percentage of `of` rounded up.
sdk::Result<std::size_t> term_size(const std::string& term, std::size_t of, const std::string& path) {
  std::string t = term;
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return sdk::fail(invalid(path, "'" + shown(term) + "' is not a count (N) or a percentage (P%)"));
  const std::size_t v = std::stoul(t);
  if (percent) {
    if (v < 1 || v > 100) return sdk::fail(invalid(path, "'" + shown(term) + "': a percentage is 1% to 100%"));
    return static_cast<std::size_t>((v * of + 99) / 100);
  }
  if (v < 1) return sdk::fail(invalid(path, "'" + shown(term) + "': a count is at least 1"));
  return v;
}

}  // namespace

sdk::Result<std::vector<std::size_t>> wave_sizes(const std::string& text, std::size_t total) {
  std::vector<std::size_t> out;
  // Terms of one kind must grow (a mistake whatever the fleet); a percentage after a
  // count (or the other way) that comes out smaller over this fleet adds no node.
  std::size_t start = 0;
  std::optional<std::size_t> last_count, last_percent;
  if (text.empty()) return sdk::fail(invalid("waves", "no waves given (e.g. 1,10%,100%)"));
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string term = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    MESH_TRY(size, term_size(term, total, "waves"));
    const bool percent = !term.empty() && term.back() == '%';
    std::optional<std::size_t>& last = percent ? last_percent : last_count;
    const std::size_t raw = percent ? std::stoul(term.substr(0, term.size() - 1)) : size;
    if (last && raw <= *last)
      return sdk::fail(invalid("waves", "'" + shown(term) + "' is " + (raw < *last ? "smaller than" : "the same as") +
                                            " the wave before it (sizes are cumulative and grow: 1,10%,100%)"));
    last = raw;
    const std::size_t capped = std::min(size, total);
    if (capped > (out.empty() ? 0 : out.back())) out.push_back(capped);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // The last wave is every node, said so: a list that ends short of it ("1,10%") is a mistake
  // whatever the fleet (decision record 68), not a silent extra wave.
  const std::size_t last_comma = text.rfind(',');
  const std::string last = text.substr(last_comma == std::string::npos ? 0 : last_comma + 1);
  if (last != "100%")
    return sdk::fail(invalid("waves", "'" + shown(text) + "' ends at '" + shown(last) +
                                          "': the last wave must be 100% (every node), e.g. 1,10%,100%"));
  if (total > 0 && (out.empty() || out.back() < total)) out.push_back(total);
  return out;
}

sdk::Result<std::size_t> min_applied_of(const std::string& min_applied, std::size_t size) {
  MESH_TRY(n, term_size(min_applied, size, "min_applied"));
  return std::min(n, size);
}

sdk::Result<WaveVerdict> wave_verdict(std::size_t declared, std::size_t applied, std::size_t failed,
                                      std::size_t outstanding, bool timed_out, const std::string& min_applied) {
  if (failed > 0) return WaveVerdict{WaveStep::halt, 0};
  if (outstanding > 0 && !timed_out) return WaveVerdict{WaveStep::wait, 0};
  std::size_t need = 0;
  if (declared > 0) {
    if (min_applied.empty()) {
      need = std::max<std::size_t>(1, declared - std::min(declared, outstanding));
      need = std::min(need, declared);
    } else {
      MESH_TRY(m, min_applied_of(min_applied, declared));
      need = m;
    }
  }
  return WaveVerdict{applied >= need ? WaveStep::next : WaveStep::halt, need};
}

bool wave_timed_out(std::int64_t started_ms, std::int64_t timeout_ms, std::int64_t now_ms) noexcept {
  return timeout_ms <= 0 || now_ms >= started_ms + timeout_ms;
}

void Service::set_stage_wake(std::function<void()> wake) { stage_wake_ = std::move(wake); }

void Service::wake_stages(const std::string* node) noexcept {
  if (!stage_wake_) return;
  if (node) {
    std::lock_guard lock(stage_mu_);
    if (!stage_nodes_.count(*node)) return;
  }
  stage_wake_();
}

Service::StageWait Service::advance_deploys(std::int64_t now_ms) noexcept {
  StageWait out;
  std::set<std::string> watched;
  // What on_report and write_plans compare with, for this round's deploys.
  struct Publish {
    Service& s;
    std::set<std::string>& watched;
    ~Publish() {
      std::lock_guard lock(s.stage_mu_);
      s.stage_nodes_.swap(watched);
    }
  } publish{*this, watched};
  auto due = [&](std::int64_t at) { out.due_ms = out.due_ms ? std::min(*out.due_ms, at) : at; };
  auto watch = [&](const Value& wave) {
    if (const Value* n = wave.find("nodes"); n && n->is_array())
      for (const auto& v : n->as_array())
        if (v.is_string()) watched.insert(v.as_string());
  };
  auto active = store_->records(kDeployActiveNs, "");
  if (!active) {
    if (active.error().code != ErrorCode::Unsupported) {
      common::logger()->warn("staged deploys not advanced: {}", active.error().describe());
      out.soon = true;
    }
    return out;
  }
  for (const auto& a : *active) {
    auto rec = store_->record(kDeployNs, a.key);
    if (!rec) out.soon = true;
    if (!rec || !*rec) continue;
    auto parsed = common::parse_json((*rec)->value, common::JsonLimits{64 << 20, 32});
    if (!parsed) continue;
    Value record = std::move(*parsed);
    const std::uint64_t id = static_cast<std::uint64_t>(record.get_int("deploy", 0));
    const std::uint64_t version = (*rec)->version;
    auto finish = [&](Value& r) {
      sdk::RecordWrite w{kDeployNs, a.key, r.to_json(), version, false, {}};
      sdk::RecordWrite gone{kDeployActiveNs, a.key, "", a.version, true, {}};
      if (auto ok = store_->put_records({w, gone}, now_ms); !ok) {
        out.soon = true;
        if (ok.error().code != ErrorCode::FailedPrecondition)
          common::logger()->warn("deploy {}: not recorded: {}", id, ok.error().describe());
      }
    };
    if (record.get_string("state") != "running") {
      finish(record);
      continue;
    }
    // A newer deploy of the same module overtook this one: it ends here, its later waves never
    // written (they would put the older version back), and says so (decision record 69).
    const std::string module_name = record.get_string("module");
    auto latest = store_->record(kDeployLatestNs, module_name);
    if (!latest) continue;
    std::uint64_t newest = 0;
    if (*latest)
      if (auto v = common::parse_json((*latest)->value, common::JsonLimits{1 << 16, 4}); v && v->get_int("deploy", 0) > 0)
        newest = static_cast<std::uint64_t>(v->get_int("deploy", 0));
    if (newest > id) {
      record.set("state", "superseded");
      record.set("superseded_by", int_value(newest));
      common::logger()->info("deploy {} superseded by deploy {} of module {}: its later waves are not written", id,
                             newest, module_name);
      finish(record);
      continue;
    }
    Value* waves = const_cast<Value*>(record.find("waves"));
    if (!waves || !waves->is_array() || waves->as_array().empty()) continue;
    auto& list = waves->as_array();
    std::size_t cur = 0;
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].find("started_at_ms")) cur = i;
    Value& wave = list[cur];
    watch(wave);
    const std::int64_t number = static_cast<std::int64_t>(cur + 1);
    auto halt = [&](const std::string& node, const std::string& reason) {
      Value h = Value::object();
      h.set("wave", number);
      h.set("node", node);
      h.set("reason", reason);
      record.set("halted", std::move(h));
      record.set("state", "halted");
      common::logger()->warn("deploy {} halted at wave {}: {}: {}", id, number, node, reason);
      finish(record);
    };

    // The current wave's outcome.
    std::size_t declared = 0, applied = 0, failed = 0;
    Value::Array outstanding;
    if (const Value* d = wave.find("delivery"); d && d->is_int()) {
      auto delivery = store_->delivery(static_cast<std::uint64_t>(d->as_int()));
      if (!delivery) {
        out.soon = true;
        continue;
      }
      auto report = delivery_report(*delivery, now_ms);
      if (!report) {
        out.soon = true;
        continue;
      }
      declared = static_cast<std::size_t>(report->get_int("declared", 0));
      if (const Value* f = report->find("failed"); f && f->is_array() && !f->as_array().empty()) {
        failed = f->as_array().size();
        const Value& first = f->as_array().front();
        std::string reason = first.get_string("reason");
        if (!first.get_string("resource").empty()) reason = first.get_string("resource") + ": " + reason;
        halt(first.get_string("node"), reason);
        continue;
      }
      if (const Value* l = report->find("applied"); l && l->is_array()) applied = l->as_array().size();
      if (const Value* o = report->find("outstanding"); o && o->is_array()) outstanding = o->as_array();
      // A wave node whose revision something else replaced (another module's deploy, a
      // declare) while it still carries this module at this version: the wave counts the
      // outcome of its latest revision, which holds this deploy's part (decision record 69).
      std::string failed_node, failed_reason;
      if (const Value* sup = report->find("superseded"); sup && sup->is_array())
        for (const auto& e : sup->as_array()) {
          const std::string node = e.get_string("node");
          auto st = node_state(*store_, node);
          if (!st) continue;
          auto part = st->composition.modules.find(module_name);
          if (part == st->composition.modules.end() || part->second.version != record.get_string("version")) continue;
          auto latest_report = store_->apply_report(node, st->revision);
          if (!latest_report) continue;
          const auto& r = *latest_report;
          if (r && r->revision == st->revision && r->outcome == "applied") {
            ++applied;
          } else if (r && r->revision == st->revision && r->outcome != "superseded") {
            ++failed;
            if (failed_node.empty()) {
              failed_node = node;
              failed_reason = "revision " + std::to_string(st->revision) + " (written over this wave's): " +
                              (r->resource.empty() ? "" : r->resource + ": ") + r->outcome + ": " + r->reason;
            }
          } else {
            Value o = e;
            o.set("revision", int_value(st->revision));
            if (auto n = store_->node(node); n && n->last_contact_ms) o.set("last_contact", ts(*n->last_contact_ms));
            outstanding.push_back(std::move(o));
          }
        }
      if (!failed_node.empty()) {
        halt(failed_node, failed_reason);
        continue;
      }
    }
    const Value* staged = record.find("staged");
    const std::int64_t timeout = staged ? staged->get_int("wave_timeout_ms", 600000) : 600000;
    const bool timed_out = wave_timed_out(wave.get_int("started_at_ms", now_ms), timeout, now_ms);
    const std::string min = staged ? staged->get_string("min_applied") : "";
    auto verdict = wave_verdict(declared, applied, failed, outstanding.size(), timed_out, min);
    if (!verdict) {
      halt("", "wave " + std::to_string(number) + ": " + verdict.error().describe());
      continue;
    }
    if (verdict->step == WaveStep::wait) {
      due(wave.get_int("started_at_ms", now_ms) + timeout);
      continue;
    }
    const std::size_t need = verdict->need;
    if (verdict->step == WaveStep::halt) {
      std::string reason = "wave " + std::to_string(number) + ": " + std::to_string(applied) + " of " +
                           std::to_string(declared) + " applied within " +
                           common::format_duration(std::chrono::milliseconds(timeout));
      std::string node;
      for (const auto& o : outstanding) {
        if (node.empty()) node = o.get_string("node");
        const Value* lc = o.find("last_contact");
        reason += "; " + o.get_string("node") + " outstanding, last seen " +
                  (lc && lc->is_string() ? lc->as_string() : std::string("never"));
      }
      if (min.empty()) reason += " (at least " + std::to_string(need) + " needed)";
      else reason += " (--min-applied " + min + ")";
      halt(node, reason);
      continue;
    }
    if (cur + 1 >= list.size()) {
      record.set("state", "done");
      common::logger()->info("deploy {} done: {} waves", id, list.size());
      finish(record);
      continue;
    }

    // The next wave: planned again from what is stored now, only for its nodes.
    Value& next = list[cur + 1];
    std::vector<std::string> nodes;
    if (const Value* n = next.find("nodes"); n && n->is_array())
      for (const auto& v : n->as_array())
        if (v.is_string()) nodes.push_back(v.as_string());
    auto module = load_module(*store_, record.get_string("module"), record.get_string("version"));
    if (!module) {
      halt("", "wave " + std::to_string(number + 1) + " not written: " + module.error().message);
      continue;
    }
    std::optional<fleet::Selector> selector;
    if (auto s = assigned_selector(*store_, module->name); s) selector = std::move(*s);
    auto plan = plan_deploy(*module, selector ? &*selector : nullptr, record.get_string("operator"), false, &nodes,
                            nullptr);
    if (!plan) {
      halt("", "wave " + std::to_string(number + 1) + " not written: " + plan.error().message);
      continue;
    }
    for (auto& p : plan->plans) p.composition.deploy = id;
    for (const char* k : {"skipped", "unchanged", "held"}) {
      Value* into = const_cast<Value*>(record.find(k));
      const std::string key = k;
      const Value& from = key == "skipped" ? plan->skipped : key == "unchanged" ? plan->unchanged : plan->held;
      if (into && into->is_array())
        for (const auto& e : from.as_array()) into->as_array().push_back(e);
    }
    next.set("started_at", ts(now_ms));
    next.set("started_at_ms", now_ms);
    sdk::RecordWrite w;
    w.ns = kDeployNs;
    w.key = a.key;
    w.expected_version = version;
    const std::size_t at = cur + 1;
    w.render = [&record, at](const sdk::DeliveryRecord& d) {
      Value r = record;
      Value& wv = const_cast<Value*>(r.find("waves"))->as_array()[at];
      wv.set("delivery", d.id ? int_value(d.id) : Value(nullptr));
      return r.to_json();
    };
    // Written only while this deploy is still its module's newest: a deploy of the module
    // written meanwhile makes this write lose (and the next round sees it superseded).
    std::vector<sdk::RecordWrite> recs{w};
    Value self = Value::object();
    self.set("deploy", int_value(id));
    recs.push_back(sdk::RecordWrite{kDeployLatestNs, module_name, self.to_json(),
                                    *latest ? (*latest)->version : 0, false, {}});
    auto written = write_plans(plan->plans, recs, now_ms, nullptr, nullptr);
    if (!written) {
      if (written.error().code != ErrorCode::FailedPrecondition)
        common::logger()->warn("deploy {}: wave {} not written: {}", id, at + 1, written.error().describe());
      out.soon = true;
      continue;  // tried again at the next round
    }
    // The new current wave: looked at again soon (as at every round before decision record 71:
    // it may have nothing to apply), and then when its nodes report or its timeout is due.
    watch(next);
    due(now_ms + timeout);
    out.soon = true;
    common::logger()->info("deploy {}: wave {} written delivery={} nodes={}", id, at + 1, written->id,
                           written->targets.size());
  }
  return out;
}

}  // namespace mesh::control::detail
