// Rotation of the control plane's signing key (decision record 98, docs/security.md "Rotating
// the signing key"). A rotation statement names the old and the new key and is signed by both:
// the old key's signature is the endorsement a host pinned to the old key believes, the new
// key's proves that whoever rotated holds the new secret. Statements form a chain (oldest
// first); a host pinned to any key of the chain walks it from that key to the newest one.
// Everything here is pure (no I/O) and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/common/crypto.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/result.h"

namespace mesh::common {

/// The header the control plane attaches to every message it signs once its key was rotated:
/// the whole chain, as key_chain_header() encodes it. Not covered by any signature: the chain
/// authenticates itself from the receiver's pinned key.
inline constexpr const char* kHeaderKeyChain = "Mesh-Key-Chain";
/// The longest chain a receiver walks (statements); a longer header is refused unread.
inline constexpr std::size_t kMaxKeyChain = 64;

/// One rotation. Keys raw (32 bytes), signatures raw (64 bytes).
struct KeyRotation {
  std::string old_key;
  std::string new_key;
  std::int64_t at_ms = 0;  ///< when it was made (Unix ms), informational
  std::string old_signature;
  std::string new_signature;
};

/// "nox-mesh key rotation v1\n<old hex>\n<new hex>\n<at_ms>": what both keys sign.
std::string key_rotation_text(const KeyRotation& r);

/// A statement from `old_keys` to `new_keys` at `at_ms`, signed by both (secret keys 64 bytes).
KeyRotation make_key_rotation(const KeyPair& old_keys, const KeyPair& new_keys, std::int64_t at_ms);

/// The chain as JSON ({"rotations":[{"old_key":hex,"new_key":hex,"at_ms":n,"old_signature":hex,
/// "new_signature":hex},...]}), the form of `<keys_dir>/key-chain.json`.
std::string key_chain_json(const std::vector<KeyRotation>& chain);
/// Parses key_chain_json()'s form; `where` (a file or a header) names the source in errors.
/// Checks shapes only, never signatures. Errors: InvalidArgument naming `where` and the entry.
sdk::Result<std::vector<KeyRotation>> parse_key_chain(std::string_view json, const std::string& where);

/// The header value: base64url of key_chain_json() (one line, safe in a header).
std::string key_chain_header(const std::vector<KeyRotation>& chain);
/// Decodes a Mesh-Key-Chain value. Errors: InvalidArgument ("Mesh-Key-Chain header: ...").
sdk::Result<std::vector<KeyRotation>> parse_key_chain_header(std::string_view value);

/// Where a walk from a pinned key ended.
struct ChainWalk {
  std::string key;        ///< the newest key reached (raw 32 bytes)
  std::size_t steps = 0;  ///< statements followed (0: the pinned key is already the newest)
};

/// Walks `chain` from `pinned` (raw 32 bytes): finds the statement whose old_key is `pinned`,
/// checks both its signatures, moves to its new_key, and again until no statement starts at the
/// key reached. A chain in which the pinned key is only a new_key (the pinned key is the newest)
/// walks 0 steps. Errors (nothing is to be believed from the chain): NotFound "no statement of
/// the chain names the pinned key <hex>" (a chain of another control plane, or forged from
/// scratch); PermissionDenied "rotation statement <i> (<old hex> -> <new hex>): the old key's
/// signature does not verify" / "...: the new key's signature does not verify" / "...: leads
/// back to a key already walked"; InvalidArgument for a chain longer than kMaxKeyChain.
sdk::Result<ChainWalk> walk_key_chain(const std::vector<KeyRotation>& chain, const std::string& pinned);

/// Verifies with `pinned`, and when that fails, with the key a message's Mesh-Key-Chain leads to
/// from `pinned`. `verify(key)` checks the message with one key (raw 32 bytes) and is called at
/// most twice, the second time only when the first failed with PermissionDenied and the message
/// carries a chain leading from `pinned` to a newer key. Thread-safe.
struct RotationCheck {
  sdk::Result<void> verified;  ///< the message's own verdict (the pinned key's, or the new key's)
  std::string new_key;         ///< set when the message verified only with a key from the chain
  std::size_t steps = 0;       ///< statements walked to new_key
  std::string chain_refused;   ///< why a chain that came with the message was not believed ("": none, or believed)
};
RotationCheck check_with_rotation(const sdk::Message& m, const std::string& pinned,
                                  const std::function<sdk::Result<void>(const std::string& key)>& verify);

}  // namespace mesh::common
