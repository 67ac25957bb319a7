// An out-of-tree provider for kernel parameters: `sysctl:<key>` keeps the running value of one
// key under /proc/sys, as sysctl(8) would set it.
//   {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "1"}}
//   {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "32768 60999"}}
//
// A key exists before the mesh manages it and after: it is never created and never deleted. A
// key the kernel does not have (read() returns nullopt) cannot be applied, and dropping a key
// from the declaration stops managing it and leaves its value as it is. Only the running value is
// set; making it survive a reboot (a file in /etc/sysctl.d) is a `file` resource's job.
//
// Written from the SDK headers alone, as a third party would (see README.md next to this file).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mesh/sdk/sdk.h>

namespace sysctl {

/// Splits a dotted key (`net.ipv4.ip_forward`) into the path components under the root
/// (`{"net", "ipv4", "ip_forward"}`). Each component is 1 to 255 bytes of `[A-Za-z0-9_-]`, at
/// most 32 components and 1024 bytes in all, so no key can name `..`, `.`, an absolute path or
/// anything outside the root. sysctl(8)'s slash forms (`net/ipv4/ip_forward`, and `eth0/100` for
/// an interface called `eth0.100`) are refused. Pure; thread-safe.
/// Errors: InvalidArgument (path "id") saying which component is wrong.
mesh::sdk::Result<std::vector<std::string>> parse_key(std::string_view key);

/// The value as the mesh compares it: runs of ASCII whitespace (space, tab, newline, CR, VT, FF)
/// become one space, and leading and trailing whitespace is dropped. The kernel prints a
/// multi-value key with tabs and a newline (`32768\t60999\n`); this is `32768 60999`, the way
/// `sysctl -n` is usually written in /etc/sysctl.conf. Pure; thread-safe.
std::string normalise(std::string_view value);

/// Reads the key `key` (components from parse_key) under the directory `root`, opening each
/// directory relative to the one before without following a symbolic link. Returns nullopt when
/// the key does not exist, else the value normalised (at most 64 KiB are read).
/// Errors: PermissionDenied (a write-only key such as vm.drop_caches, or no access), Failed (a
/// symbolic link or a non-directory on the way, a directory as the key, an I/O error; the message
/// names the path and the system's error text). Thread-safe (no shared state).
mesh::sdk::Result<std::optional<std::string>> read_key(const std::string& root,
                                                       const std::vector<std::string>& key);

/// Writes `value` and a newline to the existing key `key` under `root` in one write(2), as
/// sysctl(8) does; the kernel takes a write whole or refuses it (there is no temp-and-rename for
/// /proc/sys). Never creates a file.
/// Errors: NotFound (the key does not exist), PermissionDenied, Failed (the kernel refused the
/// value, e.g. `Invalid argument`; a symbolic link on the way; a short write). Thread-safe.
mesh::sdk::Result<void> write_key(const std::string& root, const std::vector<std::string>& key,
                                  std::string_view value);

/// The provider. Config (`[provider.sysctl]` in host.toml): `root`, the directory keys live under
/// (default `/proc/sys`; a temporary directory in tests). Thread safety: as every provider, called
/// from one thread at a time.
class SysctlProvider final : public mesh::sdk::Provider {
 public:
  using Provider::Provider;

  const mesh::sdk::Schema& schema() const noexcept override;
  const mesh::sdk::Schema& config_schema() const noexcept override;

 protected:
  /// Removal::Release (a key cannot be deleted; remove() leaves its value as it is and says so in
  /// RemoveResponse::left) and exists_before_management.
  mesh::sdk::Result<void> do_capabilities(mesh::sdk::ProviderCapabilities& caps) const override;
  mesh::sdk::Result<void> do_configure(const mesh::sdk::Value& config) override;
  mesh::sdk::Result<void> do_validate(const mesh::sdk::ValidateRequest& req,
                                      mesh::sdk::ValidateResponse& resp) override;
  mesh::sdk::Result<void> do_read(const mesh::sdk::ReadRequest& req,
                                  mesh::sdk::ReadResponse& resp) override;
  mesh::sdk::Result<void> do_plan(const mesh::sdk::PlanRequest& req,
                                  mesh::sdk::PlanResponse& resp) override;
  mesh::sdk::Result<void> do_apply(const mesh::sdk::ApplyRequest& req,
                                   mesh::sdk::ApplyResponse& resp) override;
  mesh::sdk::Result<void> do_remove(const mesh::sdk::RemoveRequest& req,
                                    mesh::sdk::RemoveResponse& resp) override;

 private:
  std::string root_ = "/proc/sys";
};

}  // namespace sysctl
