// The NATS "nkey" text form of Ed25519 user keys, so that mesh-control can mint per-node broker
// credentials: seeds start "SU", public keys "U". The codec is the plugin support library's
// (mesh/support/nkey.h, following the nkeys library of the NATS project), shared with the nats
// transport plugin; these names are kept for core code.
#pragma once

#include "mesh/support/nkey.h"

namespace mesh::common {

/// "SU…" (58 characters) for a 32-byte Ed25519 seed; "" when `seed` is not 32 bytes.
using support::nkey_user_seed;
/// "U…" (56 characters) for a 32-byte Ed25519 public key; "" when not 32 bytes.
using support::nkey_user_public;
/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as nkeys uses it.
using support::nkey_crc16;

}  // namespace mesh::common
