// Container images published by digest (decision record 58): an OCI archive (a file, e.g. a
// build stage's artifact) is loaded into a private podman storage of the stage (never the
// machine's own), pushed to the configured registry (`podman push --digestfile`), and removed
// from that storage again. The result names the image by its digest, which is what a `container`
// resource should declare. Errors name the tool and quote its last output lines.
#pragma once

#include <chrono>
#include <string>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"

namespace mesh::stages::publish {

struct RegistryOptions {
  std::string registry;       ///< "127.0.0.1:5000": host[:port] of the registry
  bool tls_verify = true;     ///< false for a registry on plain HTTP (tests, loopback)
  std::string storage_dir;    ///< the private podman storage (root/, run/), made 0700
  std::chrono::milliseconds tool_timeout{std::chrono::minutes(5)};
};

struct PublishedImage {
  std::string name, tag;
  std::string digest;     ///< "sha256:<hex>" of the manifest as the registry stores it
  std::string reference;  ///< "<registry>/<name>@<digest>"
};

/// Publishes the OCI archive at `archive` as `<registry>/<name>:<tag>`. Errors: InvalidArgument
/// (path "image", "name" or "tag": a bad name or tag, an archive podman cannot read), Failed (the
/// push failed: the registry's answer), Cancelled. Thread-safe (each call uses the storage alone:
/// serialised by a mutex).
sdk::Result<PublishedImage> publish_image(const RegistryOptions& options, const std::string& archive,
                                          const std::string& name, const std::string& tag,
                                          const sdk::CancelToken& cancel);

}  // namespace mesh::stages::publish
