// The `file` provider's batch (ProviderCapabilities::max_batch, sdk/provider.h; decision 0106).
//
// One apply_batch of n plans costs, for its content writes: one syncfs per filesystem (instead of
// an fsync per temporary file), the host's intent hook (one journal append and fdatasync), the
// renames, then one stale-temp sweep (decision 73) and one fsync per directory (instead of one per
// file). Its owner and mode changes (apply()'s code, without the fsync of each file) are made
// durable by one syncfs per filesystem after the renames, which also stands for the fsync of the
// directories on it (decision 151). What a single write promises still holds for each file: the
// target is the old file or the new one, never torn, because the new content is durable (syncfs)
// before the rename that makes it visible, and the rename is atomic.
//
// Order: plans are made visible in the order given; a plan that is not a content write (a mode or
// owner change, a removal) is applied with apply()'s own code at its place in that order. The first
// failure stops the batch: the plans before it stay applied, the temporary files of the ones after
// it are unlinked before the sweep, and nothing after it is made visible. A failure while staging
// (a missing parent directory, a refused path, a full disk) lets the plans before it go through.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "file_provider.h"
#include "mesh/support/errno_text.h"

namespace mesh::plugins::file {
namespace {

sdk::Error batch_sys_error(int err, const std::string& what, const std::string& context) {
  return sdk::Error{err == EACCES || err == EPERM ? sdk::ErrorCode::PermissionDenied : sdk::ErrorCode::Failed,
                    what + ": " + support::errno_text(err) + " (" + context + ")", {}};
}

struct Item {
  const sdk::Plan* plan = nullptr;
  std::optional<StagedWrite> staged;  // content writes; empty for the other plans
};

}  // namespace

sdk::Result<void> FileProvider::do_capabilities(sdk::ProviderCapabilities& caps) const {
  caps.max_batch = max_batch_;
  return {};
}

sdk::Result<void> FileProvider::do_apply_batch(const sdk::ApplyBatchRequest& req, sdk::ApplyBatchResponse& resp) {
  if (req.plans.size() > max_batch_)
    return sdk::fail(sdk::ErrorCode::InvalidArgument, "apply_batch: " + std::to_string(req.plans.size()) +
                                                          " plans, more than the " + std::to_string(max_batch_) +
                                                          " this provider declared (max_batch)");
  // 1. Stage every content write, up to the first failure.
  std::vector<Item> items;
  items.reserve(req.plans.size());
  std::optional<sdk::Error> error;
  for (const sdk::Plan& plan : req.plans) {
    const std::string& path = plan.rid.id;
    if (req.cancel->cancelled()) {
      error = sdk::Error{sdk::ErrorCode::Cancelled, "cancelled before applying " + path, {}};
      break;
    }
    if (auto ok = check_id(path); !ok) {
      error = ok.error();
      break;
    }
    if (plan.desired.rid != plan.rid) {
      error = sdk::Error{sdk::ErrorCode::InvalidArgument,
                         "plan for " + plan.rid.str() + " carries a declaration of " + plan.desired.rid.str(), {}};
      break;
    }
    Item item;
    item.plan = &plan;
    const bool writes = plan.action == sdk::PlanAction::Create ||
                        (plan.action == sdk::PlanAction::Update && has_content_change(plan));
    if (writes) {
      auto staged = stage_write(plan, false);
      if (!staged) {
        log().warn("resource=" + plan.rid.str() + " action=" + to_string(plan.action) +
                   " outcome=failed error=\"" + staged.error().message + "\"");
        error = staged.error();
        break;
      }
      item.staged.emplace(std::move(*staged));
    }
    items.push_back(std::move(item));
  }
  // 2. Their content durable, with one syncfs per filesystem.
  std::vector<dev_t> synced;
  for (const Item& item : items) {
    if (!item.staged) continue;
    const Parent& parent = item.staged->parent;
    if (std::find(synced.begin(), synced.end(), parent.dev) != synced.end()) continue;
    if (::syncfs(parent.fd.get()) != 0)
      return sdk::fail(batch_sys_error(errno, "syncfs " + parent.dir, "temporary files of a batch"));
    synced.push_back(parent.dev);
  }
  if (items.empty()) return error ? sdk::fail(*error) : sdk::Result<void>{};
  // 3. The host's intent, before anything is visible.
  if (auto ok = req.intent->before_visible(items.size()); !ok) return ok;
  // 4. Visible, in order, up to the first failure.
  std::size_t published = 0;
  struct Unsynced {
    std::size_t item;
    UnsyncedFile file;
  };
  std::vector<Unsynced> metadata;  // items whose owner or mode changed (not synced yet)
  for (Item& item : items) {
    const sdk::Plan& plan = *item.plan;
    sdk::State state;
    if (item.staged) {
      if (auto ok = publish_write(*item.staged, plan.rid.id); !ok) {
        error = ok.error();
        break;
      }
      state = item.staged->state;
    } else {
      // An owner or mode change is not fsync'ed on its own: one syncfs below covers them all.
      UnsyncedFile unsynced;
      auto applied = apply_one(plan, *req.cancel, &unsynced);  // logs its own line
      if (!applied) {
        error = applied.error();
        break;
      }
      state = std::move(*applied);
      if (unsynced.fd.valid()) metadata.push_back(Unsynced{published, std::move(unsynced)});
    }
    if (item.staged)
      log().info("resource=" + plan.rid.str() + " action=" + to_string(plan.action) +
                 " outcome=applied changes=" + change_list(plan) + " batch=" + std::to_string(items.size()));
    resp.states.push_back(std::move(state));
    ++published;
  }
  // The temporary files of the writes not published go before the sweep can see them.
  for (std::size_t k = published; k < items.size(); ++k) items[k].staged.reset();
  // 5. One sweep and one fsync per directory written into (or one syncfs of its filesystem).
  struct Dir {
    dev_t dev;
    ino_t ino;
    std::size_t first;  // index of the first item published into it
  };
  std::vector<Dir> dirs;
  for (std::size_t k = 0; k < published; ++k) {
    if (!items[k].staged) continue;
    const Parent& p = items[k].staged->parent;
    bool seen = false;
    for (const Dir& d : dirs) seen = seen || (d.dev == p.dev && d.ino == p.ino);
    if (seen) continue;
    dirs.push_back(Dir{p.dev, p.ino, k});
    sweep_stale_temps_once(p.fd.get(), p.dev, p.ino, p.dir, std::string(), items[k].plan->rid.id);
  }
  std::size_t durable = published;
  // The owner and mode changes: one syncfs per filesystem they are on (an fsync per file before),
  // after every rename and the sweep, so it makes those directories durable too: their own fsync
  // below is skipped. Should it fail, the batch is applied only up to the first change on it.
  std::vector<dev_t> meta_synced;
  for (const Unsynced& m : metadata) {
    if (std::find(meta_synced.begin(), meta_synced.end(), m.file.dev) != meta_synced.end()) continue;
    if (::syncfs(m.file.fd.get()) != 0) {
      const int err = errno;
      if (m.item < durable) {
        durable = m.item;
        error = batch_sys_error(err, "syncfs " + items[m.item].plan->rid.id, "mode or owner change of a batch");
      }
      continue;
    }
    meta_synced.push_back(m.file.dev);
  }
  for (const Dir& d : dirs) {
    if (std::find(meta_synced.begin(), meta_synced.end(), d.dev) != meta_synced.end()) continue;
    const Parent& p = items[d.first].staged->parent;
    if (::fsync(p.fd.get()) != 0) {
      // The renames into this directory are visible but may not be durable: the batch is
      // reported applied only up to the first write into it.
      const int err = errno;
      if (d.first < durable) {
        durable = d.first;
        error = batch_sys_error(err, "fsync " + p.dir, "directory of " + items[d.first].plan->rid.id);
      }
    }
  }
  resp.states.resize(durable);
  resp.applied = durable;
  if (error) return sdk::fail(*error);
  return {};
}

}  // namespace mesh::plugins::file
