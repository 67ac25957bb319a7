#include "stream_log.h"

#include <nats/nats.h>

#include <cstring>

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;

namespace {

std::string nats_text(natsStatus s) {
  const char* last = nats_GetLastError(nullptr);
  std::string out = natsStatus_GetText(s);
  if (last && *last && out != last) out += std::string(" (") + last + ")";
  return out;
}

// A connection or JetStream request error: retryable unless the server refused who we are.
sdk::Error nats_error(natsStatus s, jsErrCode jerr, const std::string& what) {
  ErrorCode code = ErrorCode::Unavailable;
  if (s == NATS_NOT_PERMITTED) code = ErrorCode::PermissionDenied;
  // A timeout is the store failing, never the caller's fault: Unavailable (store.h).
  std::string msg = "jetstream-kv: " + what + ": " + nats_text(s);
  if (jerr != 0) msg += " (JetStream error " + std::to_string(static_cast<int>(jerr)) + ")";
  return sdk::Error{code, msg, {}};
}

// nats.c's asynchronous error callback: a subject the servers refused this connection (the
// request that published on it then times out: nats-server answers with -ERR, not a reply).
void on_async_error(natsConnection* nc, natsSubscription*, natsStatus err, void* closure) {
  if (err != NATS_NOT_PERMITTED || !closure) return;
  const char* text = nullptr;
  (void)natsConnection_GetLastError(nc, &text);
  static_cast<StreamLog*>(closure)->note_violation(text && *text ? text : "Permissions Violation");
}

struct Options {
  natsOptions* p = nullptr;
  ~Options() {
    if (p) natsOptions_Destroy(p);
  }
};

}  // namespace

Result<std::unique_ptr<StreamLog>> StreamLog::open(const LogSettings& settings) {
  std::unique_ptr<StreamLog> log(new StreamLog());
  log->stream_ = settings.prefix;
  log->op_subject_ = settings.prefix + ".op";
  log->timeout_ms_ = settings.timeout_ms;
  log->who_ = !settings.user.empty()          ? "user '" + settings.user + "'"
              : !settings.nkey_public.empty() ? "nkey " + settings.nkey_public + " (" + settings.nkey_seed_path + ")"
                                              : "no user (anonymous)";

  Options opts;
  natsStatus s = natsOptions_Create(&opts.p);
  std::vector<const char*> urls;
  for (const auto& u : settings.servers) urls.push_back(u.c_str());
  if (s == NATS_OK) s = natsOptions_SetServers(opts.p, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetName(opts.p, ("mesh-store " + settings.prefix).c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts.p, settings.timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts.p, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts.p, 250);
  if (s == NATS_OK) s = natsOptions_SetFailRequestsOnDisconnect(opts.p, true);
  // JetStream API replies and the ordered consumers' deliveries come under it (nats.c makes
  // both with the connection's inbox prefix): with mesh-control's broker permissions, a prefix
  // only the control plane's user may read (decision record 185).
  if (s == NATS_OK && !settings.inbox_prefix.empty())
    s = natsOptions_SetCustomInboxPrefix(opts.p, settings.inbox_prefix.c_str());
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts.p, on_async_error, log.get());
  if (s == NATS_OK && !settings.user.empty())
    s = natsOptions_SetUserInfo(opts.p, settings.user.c_str(),
                                settings.password.empty() ? nullptr : settings.password.c_str());
  if (s == NATS_OK && !settings.nkey_seed_path.empty())
    s = natsOptions_SetNKeyFromSeed(opts.p, settings.nkey_public.c_str(), settings.nkey_seed_path.c_str());
  if (s == NATS_OK && !settings.tls_ca_path.empty()) {
    s = natsOptions_SetSecure(opts.p, true);
    if (s == NATS_OK) s = natsOptions_LoadCATrustedCertificates(opts.p, settings.tls_ca_path.c_str());
  }
  if (s != NATS_OK) return sdk::fail(nats_error(s, static_cast<jsErrCode>(0), "connection options"));

  std::string names;
  for (const auto& u : settings.servers) names += (names.empty() ? "" : ", ") + u;
  s = natsConnection_Connect(&log->nc_, opts.p);
  if (s != NATS_OK) return sdk::fail(nats_error(s, static_cast<jsErrCode>(0), "cannot connect to " + names));

  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = settings.timeout_ms;
  s = natsConnection_JetStream(&log->js_, log->nc_, &jo);
  if (s != NATS_OK) return sdk::fail(nats_error(s, static_cast<jsErrCode>(0), "JetStream context"));
  // A stream being placed or electing its leader (a cluster just started, a server lost) does not
  // answer in time: that is worth a few more tries at open, not a failed start.
  Result<void> ok;
  for (int attempt = 0; attempt < 4; ++attempt) {
    ok = log->ensure_stream(settings);
    if (ok || ok.error().code != ErrorCode::Unavailable) break;
  }
  if (!ok) return sdk::fail(std::move(ok).error());
  return log;
}

StreamLog::~StreamLog() {
  if (js_) jsCtx_Destroy(js_);
  if (nc_) natsConnection_Destroy(nc_);
}

Result<void> StreamLog::ensure_stream(const LogSettings& settings) {
  const std::string subjects = settings.prefix + ".>";
  const char* subject_list[] = {subjects.c_str()};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = stream_.c_str();
  cfg.Subjects = subject_list;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = settings.replicas;

  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  natsStatus s = js_AddStream(&si, js_, &cfg, nullptr, &jerr);
  if (s != NATS_OK && jerr == JSStreamNameExistErr) {
    // Made before (by this or another instance): use it, with the replicas asked for.
    jerr = static_cast<jsErrCode>(0);
    s = js_GetStreamInfo(&si, js_, stream_.c_str(), nullptr, &jerr);
    if (s == NATS_OK) {
      const jsStreamConfig* have = si->Config;
      if (have->SubjectsLen != 1 || std::strcmp(have->Subjects[0], subjects.c_str()) != 0) {
        jsStreamInfo_Destroy(si);
        return sdk::fail(ErrorCode::InvalidArgument,
                         "a JetStream stream named '" + stream_ + "' exists with other subjects than '" +
                             subjects + "': it is not this store's; choose another prefix",
                         "prefix");
      }
      // Never changed implicitly (decision record 0118): an instance or a one-shot command
      // (backup) with another store.replicas must not turn a replicated stream into one copy.
      if (have->Replicas != settings.replicas) {
        const int theirs = static_cast<int>(have->Replicas);
        jsStreamInfo_Destroy(si);
        return sdk::fail(ErrorCode::FailedPrecondition,
                         "the JetStream stream '" + stream_ + "' has " + std::to_string(theirs) +
                             " replica(s) and store.replicas is " + std::to_string(settings.replicas) +
                             ": nothing was changed; set store.replicas = " + std::to_string(theirs) +
                             " to use it as it is, or change the stream deliberately (nats stream edit " + stream_ +
                             " --replicas " + std::to_string(settings.replicas) + ") and then store.replicas",
                         "replicas");
      }
    }
  }
  if (s != NATS_OK) {
    if (si) jsStreamInfo_Destroy(si);
    const std::string what = "stream '" + stream_ + "' (replicas " + std::to_string(settings.replicas) + ")";
    // More replicas than the cluster has servers: JetStream cannot place the stream.
    if (jerr == JSClusterNoPeersErr || jerr == JSStreamReplicasNotSupportedErr) {
      sdk::Error e = nats_error(s, jerr, what);
      e.code = ErrorCode::InvalidArgument;
      e.message += ": store.replicas = " + std::to_string(settings.replicas) +
                   " cannot be placed on these servers (one replica per JetStream server of the cluster, 1 on a server "
                   "without a cluster)";
      e.path = "replicas";
      return sdk::fail(std::move(e));
    }
    return sdk::fail(failure(s, jerr, what, mark));
  }
  created_ns_ = si->Created;
  jsStreamInfo_Destroy(si);
  return {};
}

std::string StreamLog::part_subject(const std::string& id, std::uint64_t n) const {
  return stream_ + ".part." + id + "." + std::to_string(n);
}

std::size_t StreamLog::max_payload() const noexcept {
  const std::int64_t m = natsConnection_GetMaxPayload(nc_);
  return m > 0 ? static_cast<std::size_t>(m) : 1024 * 1024;
}

Result<StreamLog::Bounds> StreamLog::bounds() {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  const natsStatus s = js_GetStreamInfo(&si, js_, stream_.c_str(), nullptr, &jerr);
  if (s != NATS_OK) return sdk::fail(failure(s, jerr, "stream info of '" + stream_ + "'", mark));
  const Bounds out{si->State.FirstSeq, si->State.LastSeq};
  const std::int64_t created = si->Created;
  jsStreamInfo_Destroy(si);
  if (created != created_ns_)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "jetstream-kv: stream '" + stream_ + "' was deleted and made again while the store was open");
  return out;
}

Result<std::optional<LogMessage>> StreamLog::get(std::uint64_t seq) {
  natsMsg* msg = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  const natsStatus s = js_GetMsg(&msg, js_, stream_.c_str(), seq, nullptr, &jerr);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return std::optional<LogMessage>{};
  if (s != NATS_OK)
    return sdk::fail(failure(s, jerr, "message " + std::to_string(seq) + " of stream '" + stream_ + "'", mark));
  LogMessage out;
  out.seq = seq;
  out.subject = natsMsg_GetSubject(msg);
  out.data.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  natsMsg_Destroy(msg);
  return std::optional<LogMessage>{std::move(out)};
}

Result<void> StreamLog::scan(std::uint64_t from, std::uint64_t to,
                            const std::function<Result<void>(LogMessage&&)>& f) {
  if (from > to) return {};
  const std::string subjects = stream_ + ".>";
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream_.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = from;
  natsSubscription* sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  natsStatus s = js_SubscribeSync(&sub, js_, subjects.c_str(), nullptr, &so, &jerr);
  if (s != NATS_OK) return sdk::fail(failure(s, jerr, "ordered consumer on stream '" + stream_ + "'", mark));
  struct Sub {
    natsSubscription* p;
    ~Sub() {
      natsSubscription_Unsubscribe(p);
      natsSubscription_Destroy(p);
    }
  } guard{sub};
  std::uint64_t seq = from - 1;
  while (seq < to) {
    natsMsg* msg = nullptr;
    s = natsSubscription_NextMsg(&msg, sub, timeout_ms_);
    if (s != NATS_OK)
      return sdk::fail(failure(s, 0, "reading stream '" + stream_ + "' after sequence " + std::to_string(seq), mark));
    jsMsgMetaData* meta = nullptr;
    s = natsMsg_GetMetaData(&meta, msg);
    if (s != NATS_OK) {
      natsMsg_Destroy(msg);
      return sdk::fail(nats_error(s, static_cast<jsErrCode>(0), "message metadata of stream '" + stream_ + "'"));
    }
    LogMessage out;
    out.seq = meta->Sequence.Stream;
    out.subject = natsMsg_GetSubject(msg);
    out.data.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
    jsMsgMetaData_Destroy(meta);
    natsMsg_Destroy(msg);
    if (out.seq <= seq) continue;  // a redelivery after the consumer was reset
    seq = out.seq;
    if (seq > to) break;
    if (auto ok = f(std::move(out)); !ok) return ok;
  }
  return {};
}

Result<StreamLog::Published> StreamLog::publish(const std::string& subject, std::string_view data,
                                                std::optional<std::uint64_t> expect_last,
                                                const std::string& msg_id) {
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size()));
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", msg_id.c_str());
  // Set by hand: jsPubOptions leaves a zero expectation out, and 0 is "no operation yet".
  if (s == NATS_OK && expect_last)
    s = natsMsgHeader_Set(msg, "Nats-Expected-Last-Subject-Sequence", std::to_string(*expect_last).c_str());
  if (s != NATS_OK) {
    if (msg) natsMsg_Destroy(msg);
    return sdk::fail(nats_error(s, static_cast<jsErrCode>(0), "message to " + subject));
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = timeout_ms_;
  jsPubAck* ack = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  s = js_PublishMsg(&ack, js_, msg, &po, &jerr);
  natsMsg_Destroy(msg);
  Published out;
  if (s == NATS_OK) {
    out.seq = ack->Sequence;
    jsPubAck_Destroy(ack);
    return out;
  }
  if (jerr == JSStreamWrongLastSequenceErr) {
    out.wrong_last = true;
    return out;
  }
  return sdk::fail(failure(s, jerr, "publish to " + subject, mark));
}

void StreamLog::note_violation(const std::string& text) {
  std::lock_guard lock(violations_mu_);
  ++violations_;
  last_violation_ = text;
}

std::uint64_t StreamLog::violations() const {
  std::lock_guard lock(violations_mu_);
  return violations_;
}

sdk::Error StreamLog::failure(int s, int jerr, const std::string& what, std::uint64_t mark) const {
  std::string text;
  {
    std::lock_guard lock(violations_mu_);
    if (violations_ > mark) text = last_violation_;
  }
  const auto status = static_cast<natsStatus>(s);
  // The violation is counted on nats.c's callback thread, maybe a moment after the request gave
  // up: a timeout looks again once, briefly.
  if (text.empty() && status == NATS_TIMEOUT) {
    nats_Sleep(50);
    std::lock_guard lock(violations_mu_);
    if (violations_ > mark) text = last_violation_;
  }
  if (text.empty()) return nats_error(status, static_cast<jsErrCode>(jerr), what);
  // nats-server refuses a subject with -ERR and answers nothing: the request timed out, but the
  // cause is the permissions (decision record 187).
  return sdk::Error{ErrorCode::PermissionDenied,
                    "jetstream-kv: " + what + ": the NATS servers refused " + who_ + " a JetStream subject (" + text +
                        "): the servers' authorization must give that user the rights of stream '" + stream_ +
                        "' (with mesh-control's [broker], `mesh-control broker-config` writes them for the "
                        "configured prefix)",
                    "prefix"};
}

}  // namespace mesh::stores::jetstream_kv
