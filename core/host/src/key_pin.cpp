#include "mesh/host/key_pin.h"

#include <spdlog/spdlog.h>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/key_rotation.h"
#include "mesh/common/text.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

sdk::Result<void> pin_control_key(const std::string& state_dir, const std::string& control_key) {
  const std::string path = state_dir + "/identity.json";
  if (control_key.size() != 32)
    return sdk::fail(sdk::ErrorCode::InvalidArgument, path + ": a control key must be 32 bytes");
  auto text = common::read_file(path, 1 << 20);
  if (!text) return sdk::fail(text.error());
  auto v = common::parse_json(*text, common::JsonLimits{1 << 20, 8});
  if (!v || !v->is_object())
    return sdk::fail(sdk::ErrorCode::InvalidArgument, path + ": not an identity (a JSON object)");
  v->set("control_key", common::to_hex(control_key));
  return common::write_file_atomic(path, v->to_json() + "\n", 0600);
}

PinnedControlKey::PinnedControlKey(std::string state_dir, std::string node, std::string key, spdlog::logger* log)
    : state_dir_(std::move(state_dir)), node_(std::move(node)), log_(log), key_(std::move(key)) {}

std::string PinnedControlKey::get() const {
  std::lock_guard lock(mu_);
  return key_;
}

sdk::Result<void> PinnedControlKey::verify(const sdk::Message& m,
                                           const std::function<sdk::Result<void>(const std::string&)>& verify_with) {
  const std::string pinned = get();
  auto check = common::check_with_rotation(m, pinned, verify_with);
  if (!check.chain_refused.empty()) {
    if (std::uint64_t hidden = 0; refused_log_.take(&hidden))
      log_->warn("control key rotation refused node={} subject={} pinned_key={} reason=\"{}\" (nothing pinned){}",
                 node_, common::printable(m.subject), common::to_hex(pinned),
                 common::printable(check.chain_refused, 1024), common::LogBudget::suffix(hidden));
    return std::move(check.verified);
  }
  if (check.new_key.empty()) return std::move(check.verified);
  std::lock_guard lock(mu_);
  if (key_ != pinned) return std::move(check.verified);  // another thread pinned meanwhile
  if (!state_dir_.empty())
    if (auto ok = pin_control_key(state_dir_, check.new_key); !ok)
      log_->error("control key not saved node={} new_key={} reason=\"{}\" (pinned until the host stops; it is "
                  "followed again from the old key after a restart)",
                  node_, common::to_hex(check.new_key), common::printable(ok.error().message, 1024));
  key_ = check.new_key;
  log_->info("control key rotated node={} old_key={} new_key={} steps={} subject={}", node_, common::to_hex(pinned),
             common::to_hex(check.new_key), check.steps, common::printable(m.subject));
  return std::move(check.verified);
}

}  // namespace mesh::host
