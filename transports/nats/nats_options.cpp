// The nats.c options of a connection: servers, timeouts, reconnect policy, callbacks,
// authentication (user/password, nkey), TLS and the inbox prefix.
#include "nats_connection.h"

namespace mesh::transports::nats::detail {

namespace {

constexpr int kReconnectWaitMs = 250;
constexpr int kReconnectJitterMs = 250;
constexpr int kReconnectBufferBytes = 8 * 1024 * 1024;
constexpr int kPingIntervalMs = 30'000;  // a dead link is noticed after ~2 missed pings
constexpr int kMaxPingsOut = 2;

}  // namespace

Result<OptionsPtr> build_options(const NatsSettings& settings, void* token,
                                 std::int64_t timeout_ms, bool retry) {
  natsOptions* raw = nullptr;
  if (natsOptions_Create(&raw) != NATS_OK)
    return fail(ErrorCode::Internal, describe(NATS_NO_MEMORY, "natsOptions_Create"));
  OptionsPtr opts(raw);
  const auto check = [](natsStatus s, const char* what, const char* key = "") -> Result<void> {
    if (s == NATS_OK) return {};
    return fail(s == NATS_NO_MEMORY ? ErrorCode::Internal : ErrorCode::InvalidArgument,
                describe(s, what), key);
  };
  std::vector<const char*> urls;
  for (const auto& u : settings.servers) urls.push_back(u.c_str());
  Result<void> r;
  if (!(r = check(natsOptions_SetServers(opts.get(), urls.data(), static_cast<int>(urls.size())),
                  "servers", "servers")) ||
      (!settings.name.empty() &&
       !(r = check(natsOptions_SetName(opts.get(), settings.name.c_str()), "name", "name"))) ||
      !(r = check(natsOptions_SetTimeout(opts.get(), timeout_ms), "connect timeout")) ||
      !(r = check(natsOptions_SetMaxReconnect(opts.get(), -1), "max reconnect")) ||
      !(r = check(natsOptions_SetReconnectWait(opts.get(), kReconnectWaitMs), "reconnect wait")) ||
      !(r = check(natsOptions_SetReconnectJitter(opts.get(), kReconnectJitterMs,
                                                 kReconnectJitterMs),
                  "reconnect jitter")) ||
      !(r = check(natsOptions_SetReconnectBufSize(opts.get(), kReconnectBufferBytes),
                  "reconnect buffer")) ||
      !(r = check(natsOptions_SetPingInterval(opts.get(), kPingIntervalMs), "ping interval")) ||
      !(r = check(natsOptions_SetMaxPingsOut(opts.get(), kMaxPingsOut), "max pings out")) ||
      !(r = check(natsOptions_SetFailRequestsOnDisconnect(opts.get(), true),
                  "fail requests on disconnect")) ||
      !(r = check(natsOptions_SetDisconnectedCB(opts.get(), on_disconnected, token),
                  "disconnected callback")) ||
      !(r = check(natsOptions_SetReconnectedCB(opts.get(), on_reconnected, token),
                  "reconnected callback")) ||
      !(r = check(natsOptions_SetClosedCB(opts.get(), on_closed, token), "closed callback")) ||
      !(r = check(natsOptions_SetErrorHandler(opts.get(), on_error, token), "error handler")) ||
      !(r = check(natsOptions_SetRetryOnFailedConnect(opts.get(), retry,
                                                      retry ? on_connected : nullptr, token),
                  "retry on failed connect")))
    return fail(r.error());
  if (!settings.user.empty() &&
      !(r = check(natsOptions_SetUserInfo(opts.get(), settings.user.c_str(),
                                          settings.password.empty() ? nullptr
                                                                    : settings.password.c_str()),
                  "user", "user")))
    return fail(r.error());
  if (!settings.nkey_seed_path.empty() &&
      !(r = check(natsOptions_SetNKeyFromSeed(opts.get(), settings.nkey_public.c_str(),
                                              settings.nkey_seed_path.c_str()),
                  "nkey seed", "nkey_seed")))
    return fail(r.error());
  if (!settings.tls_ca_path.empty() &&
      (!(r = check(natsOptions_SetSecure(opts.get(), true), "tls", "tls_ca")) ||
       !(r = check(natsOptions_LoadCATrustedCertificates(opts.get(), settings.tls_ca_path.c_str()),
                   "tls_ca", "tls_ca"))))
    return fail(r.error());
  if (!settings.inbox_prefix.empty() &&
      !(r = check(natsOptions_SetCustomInboxPrefix(opts.get(), settings.inbox_prefix.c_str()),
                  "inbox prefix", "inbox_prefix")))
    return fail(r.error());
  if (settings.shared_delivery &&
      !(r = check(natsOptions_UseGlobalMessageDelivery(opts.get(), true), "shared delivery", "shared_delivery")))
    return fail(r.error());
  // Without it nats.c's flusher thread holds every publish back ~1 ms (decision 113).
  if (!(r = check(natsOptions_SetSendAsap(opts.get(), settings.send_asap), "send asap", "send_asap")))
    return fail(r.error());
  return opts;
}

}  // namespace mesh::transports::nats::detail
