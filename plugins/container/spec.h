// The container provider's pure logic: what a declaration means (validated and normalised), the
// configuration hash put on the container as a label, the State read from `inspect`, and the plan.
// Nothing here runs a program, so all of it is unit-tested without an engine.
//
// What plan() compares (observed comes from read(), i.e. from the engine, never from a cache):
//   1. `image`: the declared reference against the `io.nox-mesh.image` label (the reference the
//      container was created from; `Config.Image` when the label is missing). Change path
//      `properties.image`.
//   2. `image_id`: the ID of the image the container runs against `image_ref_id`, the ID the
//      same reference resolves to in local storage *now* (read() asks `image inspect`). A digest
//      reference always resolves to the same ID, so this fires for a tag that was moved (a newer
//      image imported or pulled under the tag) or a container re-created by hand from another
//      image with our labels copied. Skipped when the reference is no longer in local storage.
//      Change path `properties.image_id`.
//   3. `config_hash`: the `io.nox-mesh.config` label against the SHA-256 of the canonical JSON of
//      the declared image reference, command, env, ports, volumes and restart (see
//      config_document()). `running` and `ensure` are not in it: they are repaired without
//      re-creating. Catches a changed declaration and a container re-created by hand (no label).
//      Change path `properties.config_hash`.
//   4. What the engine reports the container actually has: `command` (Config.Cmd) equal to the
//      declared one when one is declared; every declared env entry present with that value
//      (Config.Env; the image adds PATH and the engine HOSTNAME, so extra entries are allowed);
//      every declared port published (HostConfig.PortBindings) and every declared volume mounted
//      (Mounts) — extra ones are allowed, removals show in the hash; `restart` equal
//      (HostConfig.RestartPolicy.Name, "" read as "no"). Change paths `properties.<name>`.
//   Any of 1–4 → Update, which apply carries out as remove and re-create.
//   5. `running` (State.Running, not paused, and up for at least the settle window — see
//      state_from_inspect) against the declared `running`: when nothing else differs, Update with
//      only `properties.running`, which apply carries out as start (or unpause) or stop, keeping
//      the container.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/sdk/duration.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"
#include "mesh/support/sha256.h"

namespace mesh::plugins::container {

/// Label holding the configuration hash (lower-case hex SHA-256, 64 characters).
inline constexpr const char* kConfigLabel = "io.nox-mesh.config";
/// Label holding the image reference exactly as declared.
inline constexpr const char* kImageLabel = "io.nox-mesh.image";

/// A declaration after validation and normalisation. Lists that are sets (ports, volumes) are
/// sorted and de-duplicated; env is sorted by name.
struct ContainerSpec {
  std::string name;
  std::string image;
  std::vector<std::string> command;  ///< empty: the image's default command
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> ports;    ///< canonical: `[ip:]host:container/proto`
  std::vector<std::string> volumes;  ///< canonical: `source:destination[:ro]`
  std::string restart = "no";
  bool running = true;
  bool absent = false;  ///< ensure = absent
};

/// Checks a container name: [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 255 bytes. InvalidArgument with
/// path "id".
sdk::Result<void> check_name(std::string_view name);

/// Checks an image reference: non-empty, at most 512 bytes, printable ASCII without spaces, not
/// starting with '-' (it is an argv element before the command), and when it names a digest
/// (`@sha256:` or a bare `sha256:` image ID) exactly 64 lower-case hex digits.
/// InvalidArgument with path "properties.image".
sdk::Result<void> check_image(std::string_view image);

/// `[host_ip:]host_port:container_port[/tcp|/udp|/sctp]` → `[host_ip:]host:container/proto`
/// (protocol tcp when omitted; host_ip 0.0.0.0 or empty dropped; IPv6 host_ip in brackets).
/// Port numbers 1–65535, no ranges. InvalidArgument with `path`.
sdk::Result<std::string> canonical_port(std::string_view text, const std::string& path);

/// `source:destination[:ro|:rw]` → `source:destination[:ro]`. The source is an absolute,
/// normalised path (no `.`/`..`/`//`, no trailing '/') or a named volume
/// ([a-zA-Z0-9][a-zA-Z0-9_.-]*); the destination an absolute, normalised path, not '/'.
/// InvalidArgument with `path`.
sdk::Result<std::string> canonical_volume(std::string_view text, const std::string& path);

/// Validates `want` (properties already schema-checked, defaults filled) and normalises it.
/// InvalidArgument with path "id", "properties.image", "properties.env.<NAME>",
/// "properties.ports[i]", "properties.volumes[i]" or "properties.<name>" for a NUL byte.
sdk::Result<ContainerSpec> parse_spec(const sdk::Resource& want);

/// The document the configuration hash is taken of: an object with the keys command, env, image,
/// ports, restart, volumes (normalised as in ContainerSpec).
sdk::Value config_document(const ContainerSpec& spec);

/// JSON with object members sorted by key (byte order), recursively; arrays keep their order:
/// the SDK's sdk::canonical_json (mesh/sdk/value.h), whose text the hash depends on.
using sdk::canonical_json;

/// Lower-case hex SHA-256 of canonical_json(config_document(spec)).
std::string config_hash(const ContainerSpec& spec);

/// Lower-case hex SHA-256 of `data` (mesh/support/sha256.h).
using support::sha256_hex;

/// Turns the JSON printed by `<engine> container inspect NAME` (an array with one object; Docker
/// and Podman layouts) into the State read() returns, without `image_ref_id` (the provider adds
/// it); nullopt for an empty array (what Podman prints for a missing container). Properties:
/// ensure ("present"), image, image_id (hex, no "sha256:"), image_digest, running, paused, state
/// (State.Status), exit_code, restart_count, started_at, restart, config_hash (null when the
/// label is missing), command, env (object), ports, volumes (canonical, sorted), id.
/// `running` is what apply verifies: State.Running, not paused, and started at least `settle`
/// before `now` — so a container crash-looping under a restart policy, up for moments at a time,
/// does not read as running (an unparseable StartedAt is not held against it).
/// Errors: Failed when the text is not such JSON (the message quotes the parser).
sdk::Result<std::optional<sdk::State>> state_from_inspect(
    std::string_view inspect_json, std::chrono::system_clock::time_point now,
    std::chrono::milliseconds settle);

/// Parses an RFC 3339 timestamp as engines print them ("2026-11-29T09:36:11.4873324Z",
/// "…+02:00"); nullopt when it is not one.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

/// The image ID (hex, no "sha256:") from the JSON printed by `<engine> image inspect REF`.
/// Errors: Failed when the text is not such JSON.
sdk::Result<std::string> image_id_from_inspect(std::string_view inspect_json);

/// The plan for `want` (with `spec = parse_spec(want)`) given what read() observed. Pure.
sdk::Plan compute_plan(const sdk::Resource& want, const ContainerSpec& spec,
                       const std::optional<sdk::State>& observed);

/// True when the plan's only change is `properties.running` (start/stop, no re-create).
bool only_running_changes(const sdk::Plan& plan);

// Durations: the SDK's grammar (mesh/sdk/duration.h), as everywhere in the product.
using sdk::parse_duration;

/// `sha256:` stripped when present.
std::string strip_sha256(std::string_view id);

}  // namespace mesh::plugins::container
