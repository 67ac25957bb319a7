#include "operations.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "sqlite_store.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;

namespace {

constexpr const char* kMismatch =
    "the revisions or delivery this declaration was rendered for no longer hold (written meanwhile); "
    "nothing was declared";

// Thrown by a replayed render when the store assigns another revision or delivery than the one
// the operation was rendered for (the operation then fails as a whole, on every instance).
struct PredictionMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

sdk::DeliveryRecord predicted_delivery(const std::vector<sdk::DeclarationWrite>& writes, std::int64_t now_ms,
                                       const DeclarePrediction& p) {
  sdk::DeliveryRecord d;
  if (writes.empty()) return d;
  d.id = p.delivery;
  d.created_at_ms = now_ms;
  for (std::size_t i = 0; i < writes.size(); ++i) d.targets.push_back(sdk::DeliveryTarget{writes[i].node, p.revisions[i]});
  std::sort(d.targets.begin(), d.targets.end(),
            [](const sdk::DeliveryTarget& a, const sdk::DeliveryTarget& b) { return a.node < b.node; });
  return d;
}

void put_record_write(Writer& w, const sdk::RecordWrite& r, const std::string& value) {
  w.str(r.ns);
  w.str(r.key);
  w.str(value);
  w.opt_u64(r.expected_version);
  w.boolean(r.erase);
  w.boolean(static_cast<bool>(r.render));
}

sdk::RecordWrite get_record_write(Reader& r, bool& has_render) {
  sdk::RecordWrite w;
  w.ns = r.str();
  w.key = r.str();
  w.value = r.str();
  w.expected_version = r.opt_u64();
  w.erase = r.boolean();
  has_render = r.boolean();
  return w;
}

template <class T>
OpResult malformed(std::uint64_t seq) {
  return Result<T>(sdk::fail(ErrorCode::Failed, "jetstream-kv: the operation at stream sequence " +
                                                    std::to_string(seq) + " is malformed; it was skipped"));
}

}  // namespace

Result<std::string> encode_declare(DeclareKind kind, const std::vector<sdk::DeclarationWrite>& writes,
                                   const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                   std::uint32_t retain, const sdk::RequestAnswer* answer,
                                   const DeclarePrediction& prediction) {
  try {
    Writer w;
    w.u8(static_cast<std::uint8_t>(kind));
    w.i64(now_ms);
    w.u64(retain);
    w.u64(prediction.delivery);
    w.u64(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      const auto& d = writes[i];
      w.str(d.node);
      w.boolean(static_cast<bool>(d.render));
      w.str(d.render ? d.render(prediction.revisions[i]) : std::string());
      w.str(d.composition);
      w.opt_u64(d.expected_revision);
      w.u64(prediction.revisions[i]);
    }
    const sdk::DeliveryRecord delivery = predicted_delivery(writes, now_ms, prediction);
    w.u64(records.size());
    for (const auto& r : records) put_record_write(w, r, r.render ? r.render(delivery) : r.value);
    w.boolean(answer != nullptr);
    if (answer) {
      w.str(answer->signer);
      w.str(answer->nonce);
      w.boolean(static_cast<bool>(answer->render));
      w.str(answer->render ? answer->render(delivery) : std::string());
    }
    return std::move(w.bytes());
  } catch (const std::exception& e) {
    return sdk::fail(ErrorCode::Internal, std::string("declare: a render failed: ") + e.what());
  } catch (...) {
    return sdk::fail(ErrorCode::Internal, "declare: a render failed");
  }
}

std::string encode_put_records(const std::vector<sdk::RecordWrite>& writes, std::int64_t now_ms) {
  Writer w;
  w.i64(now_ms);
  w.u64(writes.size());
  for (const auto& r : writes) put_record_write(w, r, r.value);
  return std::move(w.bytes());
}

namespace {

OpResult apply_declare(sqlite::SqliteStore& db, Reader& r, std::uint64_t seq) {
  const auto kind = static_cast<DeclareKind>(r.u8());
  const std::int64_t now_ms = r.i64();
  const auto retain = static_cast<std::uint32_t>(r.u64());
  const std::uint64_t delivery_id = r.u64();
  bool mismatch = false;
  std::vector<sdk::DeclarationWrite> writes(r.count(40));
  for (auto& w : writes) {
    w.node = r.str();
    const bool has_render = r.boolean();
    std::string body = r.str();
    w.composition = r.str();
    w.expected_revision = r.opt_u64();
    const std::uint64_t predicted = r.u64();
    if (has_render)
      w.render = [body = std::move(body), predicted, &mismatch](std::uint64_t rev) {
        if (rev != predicted) {
          mismatch = true;
          throw PredictionMismatch("revision");
        }
        return body;
      };
  }
  auto check = [delivery_id, &mismatch](const sdk::DeliveryRecord& d) {
    if (d.id != delivery_id) {
      mismatch = true;
      throw PredictionMismatch("delivery");
    }
  };
  std::vector<sdk::RecordWrite> records(r.count(27));
  for (auto& w : records) {
    bool has_render = false;
    w = get_record_write(r, has_render);
    if (has_render)
      w.render = [value = w.value, check](const sdk::DeliveryRecord& d) {
        check(d);
        return value;
      };
  }
  std::optional<sdk::RequestAnswer> answer;
  if (r.boolean()) {
    answer.emplace();
    answer->signer = r.str();
    answer->nonce = r.str();
    const bool has_render = r.boolean();
    std::string text = r.str();
    if (has_render)
      answer->render = [text = std::move(text), check](const sdk::DeliveryRecord& d) {
        check(d);
        return text;
      };
  }
  if (!r.ok() || !r.at_end()) return malformed<sdk::DeliveryRecord>(seq);
  Result<sdk::DeliveryRecord> out = [&]() -> Result<sdk::DeliveryRecord> {
    switch (kind) {
      case DeclareKind::Declare: return db.declare(writes, now_ms, retain);
      case DeclareKind::Answered:
        if (!answer) break;
        return db.declare_answered(writes, now_ms, retain, *answer);
      case DeclareKind::With: return db.declare_with(writes, records, now_ms, retain, answer);
    }
    return sdk::fail(ErrorCode::Failed, "jetstream-kv: the operation at stream sequence " + std::to_string(seq) +
                                            " is malformed; it was skipped");
  }();
  if (!out && mismatch)
    return Result<sdk::DeliveryRecord>(sdk::fail(
        ErrorCode::FailedPrecondition,
        std::string(kMismatch)));
  return out;
}

}  // namespace

OpResult apply_operation(sqlite::SqliteStore& db, Method method, Reader& r, std::uint64_t seq) {
  switch (method) {
    case Method::AddToken: {
      sdk::TokenRecord t;
      get(r, t);
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.add_token(t);
    }
    case Method::RevokeToken: {
      const std::string id = r.str();
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.revoke_token(id);
    }
    case Method::Enrol: {
      const std::string hash = r.str(), node = r.str(), key = r.str();
      const std::int64_t now = r.i64();
      if (!r.ok() || !r.at_end()) return malformed<sdk::NodeRecord>(seq);
      return db.enrol(hash, node, key, now);
    }
    case Method::SetBriefing: {
      const std::string node = r.str(), briefing = r.str();
      const bool eligible = r.boolean();
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.set_briefing(node, briefing, eligible);
    }
    case Method::Declare: return apply_declare(db, r, seq);
    case Method::RecordApply: {
      sdk::ApplyReport a;
      get(r, a);
      if (!r.ok() || !r.at_end()) return malformed<bool>(seq);
      return db.record_apply(a);
    }
    case Method::RecordDrift: {
      sdk::DriftReport d;
      get(r, d);
      if (!r.ok() || !r.at_end()) return malformed<bool>(seq);
      return db.record_drift(d);
    }
    case Method::Touch: {
      std::vector<sdk::ContactUpdate> updates(r.count(48));
      for (auto& u : updates) get(r, u);
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.touch(updates);
    }
    case Method::RemoveNode: {
      const std::string node = r.str();
      const std::int64_t now = r.i64();
      const bool purge = r.boolean();
      if (!r.ok() || !r.at_end()) return malformed<sdk::NodeRecord>(seq);
      return db.remove_node(node, now, purge);
    }
    case Method::RememberRequest: {
      sdk::RequestRecord q;
      get(r, q);
      const std::int64_t now = r.i64();
      if (!r.ok() || !r.at_end()) return malformed<std::optional<sdk::RequestRecord>>(seq);
      return db.remember_request(q, now);
    }
    case Method::RememberRequests: {
      const std::int64_t now = r.i64();
      std::vector<sdk::RequestRecord> requests(r.count(8));
      for (auto& q : requests) get(r, q);
      if (!r.ok() || !r.at_end()) return malformed<sdk::RememberResults>(seq);
      return db.remember_requests(requests, now);
    }
    case Method::AnswerRequest: {
      const std::string signer = r.str(), nonce = r.str(), answer = r.str();
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.answer_request(signer, nonce, answer);
    }
    case Method::SetProviderSchemas: {
      const std::string node = r.str(), schemas = r.str();
      if (!r.ok() || !r.at_end()) return malformed<void>(seq);
      return db.set_provider_schemas(node, schemas);
    }
    case Method::PutRecords: {
      const std::int64_t now = r.i64();
      std::vector<sdk::RecordWrite> writes(r.count(27));
      for (auto& w : writes) {
        bool has_render = false;
        w = get_record_write(r, has_render);
        // put_records refuses a write with a render: give it one, so that it refuses it here too.
        if (has_render) w.render = [](const sdk::DeliveryRecord&) { return std::string(); };
      }
      if (!r.ok() || !r.at_end()) return malformed<std::vector<sdk::StoredRecord>>(seq);
      return db.put_records(writes, now);
    }
    case Method::NextSequence: {
      const std::string name = r.str();
      if (!r.ok() || !r.at_end()) return malformed<std::uint64_t>(seq);
      return db.next_sequence(name);
    }
    case Method::RecordReports: return apply_reports(db, r, seq);
    case Method::Import: break;  // applied by the store (it replaces the whole file)
  }
  return malformed<void>(seq);
}

bool is_prediction_mismatch(const sdk::Error& e) {
  return e.code == ErrorCode::FailedPrecondition && e.message == kMismatch;
}

const sdk::Error* error_of(const OpResult& r) {
  return std::visit([](const auto& x) -> const sdk::Error* { return x ? nullptr : &x.error(); }, r);
}

}  // namespace mesh::stores::jetstream_kv
