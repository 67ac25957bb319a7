// `mesh publish` on the control plane (decision record 59): publish.part receives an upload in
// chunks (each a signed API request, itself sent in parts when larger than the broker's limit)
// into a spool file, publish checks the whole file's size and SHA-256 against what the operator's
// `mesh` announced and hands it to the `publish` stage (run alone, run id 0), and repository.key
// answers the repository's public key. Nothing reaches the repository unless the whole file
// arrived with the announced digest and the stage accepted it.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/control/stages.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

namespace {

namespace fs = std::filesystem;

// Uploads are written by one request at a time (mesh sends the chunks of one upload in order).
std::mutex& upload_mutex() {
  static std::mutex mu;
  return mu;
}

sdk::Result<std::string> upload_id(const Fields& f) {
  MESH_TRY(id, f.string("upload"));
  bool ok = id.size() >= 16 && id.size() <= 64;
  for (char c : id) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  if (!ok) return sdk::fail(f.error("upload", "must be 16 to 64 letters and digits"));
  return id;
}

std::string spool_dir(const ControlOptions& o) { return o.work_dir + "/uploads"; }
std::string spool_path(const ControlOptions& o, const std::string& who, const std::string& id) {
  return spool_dir(o) + "/" + who + "-" + id + ".part";
}

// Spool files older than this are an interrupted upload: removed when another upload starts.
constexpr auto kStaleUpload = std::chrono::hours(1);

void remove_stale_uploads(const ControlOptions& o) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(spool_dir(o), ec)) {
    auto t = fs::last_write_time(e.path(), ec);
    if (!ec && now - t > kStaleUpload) {
      fs::remove(e.path(), ec);
      common::logger()->info("interrupted upload removed file={}", e.path().filename().string());
    }
  }
}

}  // namespace

void Service::remove_interrupted_uploads() {
  if (options_.work_dir.empty()) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir(options_), ec)) {
    std::error_code rm;
    if (fs::remove(e.path(), rm))
      common::logger()->info("upload interrupted by the last stop removed file={}", e.path().filename().string());
    else if (rm)
      common::logger()->warn("upload interrupted by the last stop not removed file={}: {}",
                             e.path().filename().string(), rm.message());
  }
}

sdk::Result<Value> Service::api_publish_part(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(id, upload_id(f));
  MESH_TRY(offset, f.integer("offset", 0, static_cast<std::int64_t>(kMaxUpload)));
  MESH_TRY(data_text, f.string("data"));
  MESH_TRY(data, common::base64url_decode(data_text));
  if (options_.work_dir.empty() || !options_.stages || !options_.stages->find("publish"))
    return sdk::fail(ErrorCode::Unsupported,
                     "this control plane has no publish stage (control.toml: [stages] load = [\"publish\"] and a "
                     "[repository] dir)");
  if (static_cast<std::uint64_t>(offset) + data.size() > kMaxUpload)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "the upload would be over " + std::to_string(kMaxUpload) + " bytes, the largest accepted",
                     "offset");
  std::lock_guard lock(upload_mutex());
  if (auto ok = common::make_dirs(spool_dir(options_), 0700); !ok) return sdk::fail(ok.error());
  const std::string path = spool_path(options_, call.who.name, id);
  std::error_code ec;
  if (offset == 0) {
    remove_stale_uploads(options_);
    fs::remove(path, ec);
  } else {
    const auto have = fs::file_size(path, ec);
    if (ec)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "upload " + id + " is not in progress (it was interrupted, or finished); start it again",
                       "upload");
    if (have != static_cast<std::uint64_t>(offset))
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "upload " + id + " has " + std::to_string(have) + " bytes, not " + std::to_string(offset),
                       "offset");
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      fs::remove(path, ec);
      return sdk::fail(ErrorCode::Transient, "cannot write the upload (disk full?); start it again", "upload");
    }
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, ec);
  Value v = Value::object();
  v.set("upload", id);
  v.set("received", static_cast<std::int64_t>(offset) + static_cast<std::int64_t>(data.size()));
  // The spool file is in this instance's own state_dir: `mesh` sends the later chunks and the
  // `publish` to this instance's subject (decision record 170).
  if (!options_.instance_id.empty()) v.set("instance", options_.instance_id);
  return v;
}

sdk::Result<Value> Service::api_publish(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(id, upload_id(f));
  MESH_TRY(file, f.string("file"));
  MESH_TRY(size, f.integer("size", 1, static_cast<std::int64_t>(kMaxUpload)));
  MESH_TRY(sha256, f.string("sha256"));
  bool hex = sha256.size() == 64;
  for (char c : sha256) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) return sdk::fail(f.error("sha256", "must be 64 lower-case hex characters"));
  bool name_ok = !file.empty() && file.size() <= 255 && file.front() != '.';
  for (char c : file) name_ok = name_ok && c != '/' && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  if (!name_ok) return sdk::fail(f.error("file", "must be a file name (no '/', not hidden)"));
  auto stage = options_.stages ? options_.stages->find("publish") : nullptr;
  if (!stage || options_.work_dir.empty())
    return sdk::fail(ErrorCode::Unsupported,
                     "this control plane has no publish stage (control.toml: [stages] load = [\"publish\"] and a "
                     "[repository] dir)");

  // The spool file is taken out of the uploads at once: whatever happens next, a second
  // `publish` of the same upload finds nothing.
  ControlStageContext::Options o;
  o.run_id = 0;
  o.operator_name = call.who.name;
  o.work_base = options_.work_dir;
  o.on_log = [](std::string_view line) { common::logger()->info("stage=publish {}", line); };
  MESH_TRY(context, ControlStageContext::create(std::move(o), "publish-"));
  const std::string deb = context->work_dir() + "/" + file;
  {
    std::lock_guard lock(upload_mutex());
    const std::string path = spool_path(options_, call.who.name, id);
    std::error_code ec;
    const auto have = fs::file_size(path, ec);
    if (ec)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "upload " + id + " is not in progress (it was interrupted, or finished); nothing published",
                       "upload");
    if (have != static_cast<std::uint64_t>(size)) {
      fs::remove(path, ec);
      return sdk::fail(ErrorCode::InvalidArgument,
                       file + ": " + std::to_string(have) + " bytes arrived, not " + std::to_string(size) +
                           " as announced; nothing published",
                       "size");
    }
    fs::rename(path, deb, ec);
    if (ec) {
      fs::remove(path, ec);
      return sdk::fail(ErrorCode::Internal, "cannot move the upload into the stage's work directory: " + ec.message());
    }
  }
  sdk::StageInput in;
  in.params.set("package", deb);
  in.params.set("sha256", sha256);
  sdk::CancelToken cancel;
  auto out = stage->run(in, *context, cancel);
  if (!out) {
    sdk::Error e = out.error();
    // The stage names the work directory's path; the operator knows the file by its name.
    for (auto at = e.message.find(deb); at != std::string::npos; at = e.message.find(deb, at + file.size()))
      e.message.replace(at, deb.size(), file);
    common::logger()->warn("publish refused file={} operator={}: {}", file, call.who.name, e.describe());
    return sdk::fail(e);
  }
  const Value* packages = out->artifacts.find("packages");
  if (!packages || !packages->is_array() || packages->as_array().size() != 1)
    return sdk::fail(ErrorCode::Internal, "the publish stage answered without the package it published");
  Value v = packages->as_array().front();
  v.set("file", file);
  if (const Value* r = out->artifacts.find("repository")) v.set("repository", *r);
  return v;
}

sdk::Result<Value> Service::api_repository_key(const ApiCall&) {
  if (!options_.repository.enabled())
    return sdk::fail(ErrorCode::FailedPrecondition, "this control plane has no repository (control.toml: [repository] dir)");
  const std::string path = options_.repository.dir + "/mesh-repository.asc";
  auto text = common::read_file(path, 1 << 20);
  if (!text)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "the repository has no key yet (" + path + "): is the publish stage loaded ([stages] load)?");
  Value v = Value::object();
  v.set("key", *text);
  v.set("file", "mesh-repository.asc");
  return v;
}

}  // namespace mesh::control::detail
