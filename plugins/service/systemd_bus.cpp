#include "systemd_bus.h"

#include "mesh/support/errno_text.h"

#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace mesh::plugins::service {
namespace {

using sdk::Error;
using sdk::ErrorCode;
using sdk::fail;
using sdk::Result;

constexpr const char* kDestination = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnit = "org.freedesktop.systemd1.Unit";
constexpr const char* kService = "org.freedesktop.systemd1.Service";
constexpr const char* kPrivateAddress = "unix:path=/run/systemd/private";

using support::errno_text;

// sd_bus_error with RAII.
struct BusError {
  sd_bus_error e = SD_BUS_ERROR_NULL;
  BusError() = default;
  ~BusError() { sd_bus_error_free(&e); }
  BusError(const BusError&) = delete;
  BusError& operator=(const BusError&) = delete;
  void reset() {
    sd_bus_error_free(&e);
    e = SD_BUS_ERROR_NULL;
  }
};

struct Message {
  sd_bus_message* m = nullptr;
  Message() = default;
  ~Message() { sd_bus_message_unref(m); }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  void reset() {
    m = sd_bus_message_unref(m);
  }
};

bool is_disconnect(int r) {
  return r == -ENOTCONN || r == -ECONNRESET || r == -EPIPE || r == -ESHUTDOWN ||
         r == -ECONNABORTED;
}

// "StartUnit demo.service: Unit demo.service not found." with a code from systemd's error name.
Error to_error(const std::string& what, int r, const sd_bus_error& e) {
  ErrorCode code = ErrorCode::Failed;
  if (sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED) ||
      sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired") ||
      r == -EPERM || r == -EACCES)
    code = ErrorCode::PermissionDenied;
  else if (is_disconnect(r) || r == -ECONNREFUSED ||
           sd_bus_error_has_name(&e, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
           sd_bus_error_has_name(&e, SD_BUS_ERROR_NO_REPLY))
    code = ErrorCode::Unavailable;
  else if (r == -ETIMEDOUT || sd_bus_error_has_name(&e, SD_BUS_ERROR_TIMEOUT))
    code = ErrorCode::Timeout;
  std::string text = sd_bus_error_is_set(&e) && e.message ? e.message : errno_text(-r);
  return Error{code, what + ": " + text, {}};
}

// Opens `address`; `bus_client` says whether it is a message bus (Hello, routing by name) or a
// direct connection to systemd. Then asks systemd for its version, so that a wrong guess or a
// dead socket fails here rather than at the first real call.
int open_at(const std::string& address, bool bus_client, sd_bus** out, std::string& why) {
  sd_bus* bus = nullptr;
  int r = sd_bus_new(&bus);
  if (r >= 0) r = sd_bus_set_address(bus, address.c_str());
  if (r >= 0) r = sd_bus_set_bus_client(bus, bus_client);
  if (r >= 0) r = sd_bus_start(bus);
  if (r < 0) {
    why = errno_text(-r);
    sd_bus_unref(bus);
    return r;
  }
  BusError err;
  char* version = nullptr;
  r = sd_bus_get_property_string(bus, kDestination, kManagerPath, kManager, "Version", &err.e,
                                 &version);
  if (r < 0) {
    why = sd_bus_error_is_set(&err.e) && err.e.message ? err.e.message : errno_text(-r);
    sd_bus_flush_close_unref(bus);
    return r;
  }
  std::free(version);
  *out = bus;
  return 0;
}

int open_system(sd_bus** out, std::string& why) {
  sd_bus* bus = nullptr;
  int r = sd_bus_open_system(&bus);
  if (r < 0) {
    why = errno_text(-r);
    return r;
  }
  BusError err;
  char* version = nullptr;
  r = sd_bus_get_property_string(bus, kDestination, kManagerPath, kManager, "Version", &err.e,
                                 &version);
  if (r < 0) {
    why = sd_bus_error_is_set(&err.e) && err.e.message ? err.e.message : errno_text(-r);
    sd_bus_flush_close_unref(bus);
    return r;
  }
  std::free(version);
  *out = bus;
  return 0;
}

int get_string(sd_bus* bus, const std::string& path, const char* iface, const char* member,
               sd_bus_error* e, std::string& out) {
  char* s = nullptr;
  int r = sd_bus_get_property_string(bus, kDestination, path.c_str(), iface, member, e, &s);
  if (r >= 0) {
    out = s ? s : "";
    std::free(s);
  }
  return r;
}

std::string hex(const void* data, std::size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 0xf];
  }
  return out;
}

}  // namespace

SystemdBus::SystemdBus(std::string address) : address_(std::move(address)) {}

SystemdBus::~SystemdBus() { close(); }

void SystemdBus::close() noexcept {
  if (bus_) bus_ = sd_bus_flush_close_unref(bus_);
  connected_address_.clear();
}

Result<void> SystemdBus::connect() {
  if (bus_ && sd_bus_is_open(bus_) > 0) return {};
  close();
  std::string tried;
  auto note = [&](const std::string& address, const std::string& why) {
    tried += (tried.empty() ? "" : "; ") + address + ": " + why;
  };
  std::string why;
  if (!address_.empty()) {
    // Unknown kind of address: a direct connection to systemd first, then a message bus.
    if (open_at(address_, false, &bus_, why) >= 0) {
      connected_address_ = address_;
      return {};
    }
    note(address_ + " (direct)", why);
    if (open_at(address_, true, &bus_, why) >= 0) {
      connected_address_ = address_;
      return {};
    }
    note(address_ + " (bus)", why);
  } else {
    if (::geteuid() == 0) {
      if (open_at(kPrivateAddress, false, &bus_, why) >= 0) {
        connected_address_ = kPrivateAddress;
        return {};
      }
      note(kPrivateAddress, why);
    }
    if (open_system(&bus_, why) >= 0) {
      connected_address_ = "system bus";
      return {};
    }
    note("system bus", why);
  }
  bus_ = nullptr;
  return fail(ErrorCode::Unavailable, "cannot reach systemd: " + tried);
}

Result<void> SystemdBus::ensure_open() { return connect(); }

// Runs `f(bus, error)` (an sd-bus call returning a negative errno on failure); when the
// connection dropped, re-opens it and tries once more.
#define MESH_SERVICE_BUS_CALL(WHAT, CALL)                                      \
  do {                                                                         \
    if (auto opened = ensure_open(); !opened) return fail(opened.error());     \
    int r_ = 0;                                                                \
    for (int attempt_ = 0; attempt_ < 2; ++attempt_) {                         \
      err.reset();                                                             \
      r_ = (CALL);                                                             \
      if (r_ >= 0 || !is_disconnect(r_) || attempt_ == 1) break;               \
      close();                                                                 \
      if (auto reopened = ensure_open(); !reopened) return fail(reopened.error()); \
    }                                                                          \
    if (r_ < 0) return fail(to_error(WHAT, r_, err.e));                        \
  } while (0)

Result<std::string> SystemdBus::load_unit(const std::string& name) {
  BusError err;
  Message reply;
  MESH_SERVICE_BUS_CALL("LoadUnit " + name,
                        (reply.reset(), sd_bus_call_method(bus_, kDestination, kManagerPath,
                                                           kManager, "LoadUnit", &err.e,
                                                           &reply.m, "s", name.c_str())));
  const char* path = nullptr;
  int r = sd_bus_message_read(reply.m, "o", &path);
  if (r < 0) return fail(to_error("LoadUnit " + name + " reply", r, err.e));
  return std::string(path);
}

Result<UnitStatus> SystemdBus::status(const std::string& name, const std::string& unit_path) {
  // The properties are read one call at a time, so a unit that moves between two calls (a
  // Restart= unit leaving auto-restart for its next run) would give a status that mixes two
  // runs: "sub_state=auto-restart" with the new run's ExecMainCode. Read again until the unit's
  // state and invocation are the same before and after the reads.
  constexpr int kAttempts = 5;
  Result<UnitStatus> s = status_once(name, unit_path);
  for (int attempt = 1; s && attempt < kAttempts; ++attempt) {
    auto again = status_once(name, unit_path);
    if (!again) return again;
    if (again->active_state == s->active_state && again->sub_state == s->sub_state &&
        again->invocation_id == s->invocation_id && again->n_restarts == s->n_restarts &&
        again->exec_main_code == s->exec_main_code)
      return again;
    s = std::move(again);
  }
  return s;
}

Result<UnitStatus> SystemdBus::status_once(const std::string& name,
                                           const std::string& unit_path) {
  BusError err;
  UnitStatus s;
  // Job first: when it no longer names the job a caller waits for, every property read after
  // it shows the unit after that job (the reads are not one atomic snapshot).
  {
    Message reply;
    MESH_SERVICE_BUS_CALL("get Job of " + name,
                          (reply.reset(), sd_bus_get_property(bus_, kDestination, unit_path.c_str(),
                                                              kUnit, "Job", &err.e, &reply.m,
                                                              "(uo)")));
    const char* job_path = nullptr;
    std::uint32_t job_id = 0;
    if (int r = sd_bus_message_read(reply.m, "(uo)", &job_id, &job_path); r < 0)
      return fail(to_error("get Job of " + name, r, err.e));
    s.job_id = job_id;
    s.job_path = job_id != 0 && job_path ? job_path : "";
  }
  struct StringProp {
    const char* member;
    std::string* out;
  };
  for (const auto& [member, out] :
       {StringProp{"LoadState", &s.load_state}, StringProp{"ActiveState", &s.active_state},
        StringProp{"SubState", &s.sub_state}, StringProp{"UnitFileState", &s.unit_file_state}}) {
    MESH_SERVICE_BUS_CALL(std::string("get ") + member + " of " + name,
                          get_string(bus_, unit_path, kUnit, member, &err.e, *out));
  }
  {
    Message reply;
    MESH_SERVICE_BUS_CALL("get InvocationID of " + name,
                          (reply.reset(), sd_bus_get_property(bus_, kDestination, unit_path.c_str(),
                                                              kUnit, "InvocationID", &err.e,
                                                              &reply.m, "ay")));
    const void* data = nullptr;
    std::size_t size = 0;
    if (int r = sd_bus_message_read_array(reply.m, 'y', &data, &size); r < 0)
      return fail(to_error("get InvocationID of " + name, r, err.e));
    s.invocation_id = hex(data, size);
  }
  const std::string_view iface = type_interface(name);
  if (!iface.empty() && s.load_state == "loaded") {
    const std::string iface_s(iface);
    MESH_SERVICE_BUS_CALL("get Result of " + name,
                          get_string(bus_, unit_path, iface_s.c_str(), "Result", &err.e, s.result));
  }
  if (iface == kService && s.load_state == "loaded") {
    MESH_SERVICE_BUS_CALL("get MainPID of " + name,
                          sd_bus_get_property_trivial(bus_, kDestination, unit_path.c_str(),
                                                      kService, "MainPID", &err.e, 'u',
                                                      &s.main_pid));
    MESH_SERVICE_BUS_CALL("get ExecMainCode of " + name,
                          sd_bus_get_property_trivial(bus_, kDestination, unit_path.c_str(),
                                                      kService, "ExecMainCode", &err.e, 'i',
                                                      &s.exec_main_code));
    MESH_SERVICE_BUS_CALL("get ExecMainStatus of " + name,
                          sd_bus_get_property_trivial(bus_, kDestination, unit_path.c_str(),
                                                      kService, "ExecMainStatus", &err.e, 'i',
                                                      &s.exec_main_status));
    MESH_SERVICE_BUS_CALL("get NRestarts of " + name,
                          sd_bus_get_property_trivial(bus_, kDestination, unit_path.c_str(),
                                                      kService, "NRestarts", &err.e, 'u',
                                                      &s.n_restarts));
  }
  return s;
}

Result<std::string> SystemdBus::unit_job(const char* method, const std::string& name) {
  BusError err;
  Message reply;
  MESH_SERVICE_BUS_CALL(std::string(method) + " " + name,
                        (reply.reset(),
                         sd_bus_call_method(bus_, kDestination, kManagerPath, kManager, method,
                                            &err.e, &reply.m, "ss", name.c_str(), "replace")));
  const char* path = nullptr;
  if (int r = sd_bus_message_read(reply.m, "o", &path); r < 0)
    return fail(to_error(std::string(method) + " " + name + " reply", r, err.e));
  return std::string(path);
}

Result<bool> SystemdBus::enable_unit_file(const std::string& name) {
  BusError err;
  Message reply;
  MESH_SERVICE_BUS_CALL("EnableUnitFiles " + name,
                        (reply.reset(),
                         sd_bus_call_method(bus_, kDestination, kManagerPath, kManager,
                                            "EnableUnitFiles", &err.e, &reply.m, "asbb", 1,
                                            name.c_str(), 0, 0)));
  int carries_install_info = 0;
  if (int r = sd_bus_message_read(reply.m, "b", &carries_install_info); r < 0)
    return fail(to_error("EnableUnitFiles " + name + " reply", r, err.e));
  return carries_install_info != 0;
}

Result<void> SystemdBus::disable_unit_file(const std::string& name, bool runtime) {
  BusError err;
  Message reply;
  MESH_SERVICE_BUS_CALL("DisableUnitFiles " + name,
                        (reply.reset(),
                         sd_bus_call_method(bus_, kDestination, kManagerPath, kManager,
                                            "DisableUnitFiles", &err.e, &reply.m, "asb", 1,
                                            name.c_str(), runtime ? 1 : 0)));
  return {};
}

Result<void> SystemdBus::reload() {
  BusError err;
  Message reply;
  MESH_SERVICE_BUS_CALL("Reload", (reply.reset(), sd_bus_call_method(bus_, kDestination,
                                                                     kManagerPath, kManager,
                                                                     "Reload", &err.e, &reply.m,
                                                                     "")));
  return {};
}

Result<std::vector<std::string>> SystemdBus::unit_files(const std::string& unit_path) {
  BusError err;
  std::vector<std::string> files;
  std::string fragment;
  MESH_SERVICE_BUS_CALL("get FragmentPath",
                        get_string(bus_, unit_path, kUnit, "FragmentPath", &err.e, fragment));
  if (!fragment.empty()) files.push_back(fragment);
  char** dropins = nullptr;
  MESH_SERVICE_BUS_CALL("get DropInPaths",
                        sd_bus_get_property_strv(bus_, kDestination, unit_path.c_str(), kUnit,
                                                 "DropInPaths", &err.e, &dropins));
  for (char** p = dropins; p && *p; ++p) {
    files.emplace_back(*p);
    std::free(*p);
  }
  std::free(dropins);
  return files;
}

#undef MESH_SERVICE_BUS_CALL

}  // namespace mesh::plugins::service
