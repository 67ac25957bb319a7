// A thin, synchronous sd-bus client for systemd's Manager API (org.freedesktop.systemd1): the
// calls the `service` provider needs and nothing else. Every failure becomes an sdk::Error whose
// message names the call, the unit and systemd's own error text.
//
// Connection: with an explicit address (config `bus_address`), only that address. Otherwise, as
// root, systemd's private socket unix:path=/run/systemd/private first and the system bus second;
// as another user, the system bus only. That is systemctl's order: the private socket answers
// without a dbus-daemon (early boot, a container or a test namespace without one, a dbus-daemon
// being restarted), and only root may use it. A connection that dropped (systemd re-executed) is
// re-opened once per call.
//
// Thread safety: none; one provider uses one SystemdBus from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/sdk/result.h"
#include "service_rules.h"

struct sd_bus;

namespace mesh::plugins::service {

class SystemdBus {
 public:
  /// `address`: a D-Bus address ("unix:path=/run/systemd/private"), or "" for the default order.
  explicit SystemdBus(std::string address = {});
  ~SystemdBus();
  SystemdBus(const SystemdBus&) = delete;
  SystemdBus& operator=(const SystemdBus&) = delete;

  /// Connects if not connected. Errors: Unavailable ("cannot reach systemd: ..." with each
  /// address tried and why it failed).
  sdk::Result<void> connect();

  /// Manager.LoadUnit: the unit's object path (loads the unit definition if needed; systemctl
  /// show does the same). A unit without a file still gets a path, with LoadState=not-found.
  sdk::Result<std::string> load_unit(const std::string& name);

  /// Reads the properties UnitStatus holds (Unit interface, plus the type interface's Result,
  /// and MainPID/ExecMain*/NRestarts for services).
  /// The reads are not one atomic call: they are repeated (up to 5 times) until two reads in a
  /// row agree on ActiveState, SubState, InvocationID, NRestarts and ExecMainCode, so a unit that
  /// moves during the reads is never described by a mix of two runs.
  sdk::Result<UnitStatus> status(const std::string& name, const std::string& unit_path);

  /// Manager.StartUnit / StopUnit / RestartUnit / TryRestartUnit with mode "replace". Returns
  /// the job's object path; the job may already be finished when this returns.
  sdk::Result<std::string> unit_job(const char* method, const std::string& name);

  /// Manager.EnableUnitFiles([name], runtime=false, force=false). Returns carries_install_info:
  /// false when the unit has no [Install] section (static), so enabling did nothing.
  sdk::Result<bool> enable_unit_file(const std::string& name);
  /// Manager.DisableUnitFiles([name], runtime) .
  sdk::Result<void> disable_unit_file(const std::string& name, bool runtime);
  /// Manager.Reload: re-reads unit files (as `systemctl daemon-reload`); returns when done.
  sdk::Result<void> reload();

  /// Unit.FragmentPath and Unit.DropInPaths, for finding a unit's StandardOutput= file.
  sdk::Result<std::vector<std::string>> unit_files(const std::string& unit_path);

  /// The address of the current connection ("" when not connected).
  const std::string& connected_address() const noexcept { return connected_address_; }

 private:
  /// One pass over the properties; status() repeats it until two passes agree.
  sdk::Result<UnitStatus> status_once(const std::string& name, const std::string& unit_path);
  sdk::Result<void> ensure_open();
  void close() noexcept;

  std::string address_;
  std::string connected_address_;
  sd_bus* bus_ = nullptr;
};

}  // namespace mesh::plugins::service
