// The store decorator that times every call (metrics.h measured_store, decision record 93): each
// sdk::Store method forwards to the wrapped store and observes its duration under the method's
// name in mesh_control_store_duration_seconds{operation}.
#include <chrono>

#include "metrics.h"

namespace mesh::control::detail {
namespace {

using namespace sdk;

// Plugin needs a HostContext it keeps by reference; the decorator never logs through it.
const HostContext& decorator_context() {
  static const HostContext context{};
  return context;
}

class MeasuredStore final : public Store {
 public:
  MeasuredStore(std::shared_ptr<Store> inner, std::shared_ptr<ControlMetrics> metrics)
      : Store(decorator_context()), inner_(std::move(inner)), metrics_(std::move(metrics)) {}

  Result<void> open() noexcept override { return timed("open", [&] { return inner_->open(); }); }
  Result<std::vector<NodeRecord>> nodes() noexcept override { return timed("nodes", [&] { return inner_->nodes(); }); }
  Result<NodeRecord> node(const std::string& name) noexcept override {
    return timed("node", [&] { return inner_->node(name); });
  }
  Result<void> add_token(const TokenRecord& token) noexcept override {
    return timed("add_token", [&] { return inner_->add_token(token); });
  }
  Result<std::vector<TokenRecord>> tokens(std::int64_t now_ms) noexcept override {
    return timed("tokens", [&] { return inner_->tokens(now_ms); });
  }
  Result<void> revoke_token(const std::string& id) noexcept override {
    return timed("revoke_token", [&] { return inner_->revoke_token(id); });
  }
  Result<NodeRecord> enrol(const std::string& token_hash, const std::string& node, const std::string& public_key,
                           std::int64_t now_ms) noexcept override {
    return timed("enrol", [&] { return inner_->enrol(token_hash, node, public_key, now_ms); });
  }
  Result<void> set_briefing(const std::string& node, const std::string& briefing, bool eligible) noexcept override {
    return timed("set_briefing", [&] { return inner_->set_briefing(node, briefing, eligible); });
  }
  Result<DeliveryRecord> declare(const std::vector<DeclarationWrite>& writes, std::int64_t now_ms,
                                 std::uint32_t retain) noexcept override {
    return timed("declare", [&] { return inner_->declare(writes, now_ms, retain); });
  }
  Result<std::optional<RevisionRecord>> latest_revision(const std::string& node) noexcept override {
    return timed("latest_revision", [&] { return inner_->latest_revision(node); });
  }
  Result<RevisionRecord> revision(const std::string& node, std::uint64_t revision) noexcept override {
    return timed("revision", [&] { return inner_->revision(node, revision); });
  }
  Result<std::vector<RevisionRecord>> history(const std::string& node, std::uint32_t limit) noexcept override {
    return timed("history", [&] { return inner_->history(node, limit); });
  }
  Result<std::optional<RevisionRef>> next_revision(const std::string& node, std::uint64_t revision) noexcept override {
    return timed("next_revision", [&] { return inner_->next_revision(node, revision); });
  }
  Result<DeliveryRecord> delivery(std::uint64_t id) noexcept override {
    return timed("delivery", [&] { return inner_->delivery(id); });
  }
  Result<std::optional<DeliveryRecord>> latest_delivery() noexcept override {
    return timed("latest_delivery", [&] { return inner_->latest_delivery(); });
  }
  Result<bool> record_apply(const ApplyReport& report) noexcept override {
    return timed("record_apply", [&] { return inner_->record_apply(report); });
  }
  Result<std::optional<ApplyReport>> apply_report(const std::string& node, std::uint64_t revision) noexcept override {
    return timed("apply_report", [&] { return inner_->apply_report(node, revision); });
  }
  Result<std::vector<ApplyReport>> apply_reports(const std::string& node, std::uint32_t limit) noexcept override {
    return timed("apply_reports", [&] { return inner_->apply_reports(node, limit); });
  }
  // Called only for a store plugin built with SDK ABI minor 3 or later (the callers check).
  Result<void> read_many(const std::function<Result<void>(Store& view)>& reads) noexcept override {
    return timed("read_many", [&] { return inner_->read_many(reads); });
  }
  // Called only for a store plugin built with SDK ABI minor 3 or later (ReportBatcher checks).
  Result<ReportResults> record_reports(const ReportBatch& batch) noexcept override {
    return timed("record_reports", [&] { return inner_->record_reports(batch); });
  }
  Result<bool> record_drift(const DriftReport& report) noexcept override {
    return timed("record_drift", [&] { return inner_->record_drift(report); });
  }
  Result<std::optional<DriftReport>> last_drift(const std::string& node, bool with_items_only) noexcept override {
    return timed("last_drift", [&] { return inner_->last_drift(node, with_items_only); });
  }
  Result<void> touch(const std::vector<ContactUpdate>& updates) noexcept override {
    return timed("touch", [&] { return inner_->touch(updates); });
  }
  Result<std::vector<std::string>> owned(const std::string& node) noexcept override {
    return timed("owned", [&] { return inner_->owned(node); });
  }
  Result<std::vector<NodeRecord>> all_nodes() noexcept override {
    return timed("all_nodes", [&] { return inner_->all_nodes(); });
  }
  Result<NodeRecord> remove_node(const std::string& node, std::int64_t now_ms, bool purge) noexcept override {
    return timed("remove_node", [&] { return inner_->remove_node(node, now_ms, purge); });
  }
  Result<std::vector<OwnedRecord>> recovery_copy(const std::string& node) noexcept override {
    return timed("recovery_copy", [&] { return inner_->recovery_copy(node); });
  }
  Result<std::optional<RequestRecord>> remember_request(const RequestRecord& request,
                                                        std::int64_t now_ms) noexcept override {
    return timed("remember_request", [&] { return inner_->remember_request(request, now_ms); });
  }
  Result<RememberResults> remember_requests(const std::vector<RequestRecord>& requests,
                                            std::int64_t now_ms) noexcept override {
    return timed("remember_requests", [&] { return inner_->remember_requests(requests, now_ms); });
  }
  Result<void> answer_request(const std::string& signer, const std::string& nonce,
                              const std::string& answer) noexcept override {
    return timed("answer_request", [&] { return inner_->answer_request(signer, nonce, answer); });
  }
  Result<DeliveryRecord> declare_answered(const std::vector<DeclarationWrite>& writes, std::int64_t now_ms,
                                          std::uint32_t retain, const RequestAnswer& answer) noexcept override {
    return timed("declare_answered", [&] { return inner_->declare_answered(writes, now_ms, retain, answer); });
  }
  Result<void> set_provider_schemas(const std::string& node, const std::string& schemas) noexcept override {
    return timed("set_provider_schemas", [&] { return inner_->set_provider_schemas(node, schemas); });
  }
  Result<std::optional<std::string>> provider_schemas(const std::string& node) noexcept override {
    return timed("provider_schemas", [&] { return inner_->provider_schemas(node); });
  }
  Result<std::optional<StoredRecord>> record(const std::string& ns, const std::string& key) noexcept override {
    return timed("record", [&] { return inner_->record(ns, key); });
  }
  Result<std::vector<StoredRecord>> records(const std::string& ns, const std::string& key_prefix) noexcept override {
    return timed("records", [&] { return inner_->records(ns, key_prefix); });
  }
  Result<std::vector<StoredRecord>> put_records(const std::vector<RecordWrite>& writes,
                                                std::int64_t now_ms) noexcept override {
    return timed("put_records", [&] { return inner_->put_records(writes, now_ms); });
  }
  Result<std::uint64_t> next_sequence(const std::string& name) noexcept override {
    return timed("next_sequence", [&] { return inner_->next_sequence(name); });
  }
  Result<DeliveryRecord> declare_with(const std::vector<DeclarationWrite>& writes,
                                      const std::vector<RecordWrite>& records, std::int64_t now_ms,
                                      std::uint32_t retain, const std::optional<RequestAnswer>& answer) noexcept override {
    return timed("declare_with", [&] { return inner_->declare_with(writes, records, now_ms, retain, answer); });
  }

 private:
  template <class F>
  auto timed(const char* operation, F&& call) noexcept -> decltype(call()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = call();
    metrics_->store_call(operation, std::chrono::steady_clock::now() - t0, result.has_value());
    return result;
  }

  std::shared_ptr<Store> inner_;
  std::shared_ptr<ControlMetrics> metrics_;
};

}  // namespace

std::shared_ptr<Store> measured_store(std::shared_ptr<Store> store, std::shared_ptr<ControlMetrics> metrics) {
  return std::make_shared<MeasuredStore>(std::move(store), std::move(metrics));
}

}  // namespace mesh::control::detail
