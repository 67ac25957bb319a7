// The `jetstream-kv` store's stream: purging the messages before a snapshot (decision 104).
#include <nats/nats.h>

#include "stream_log.h"

namespace mesh::stores::jetstream_kv {

sdk::Result<std::uint64_t> StreamLog::purge_before(std::uint64_t seq) {
  MESH_TRY(before, bounds());
  if (seq <= before.first) return std::uint64_t{0};
  jsOptions o;
  jsOptions_Init(&o);
  o.Wait = timeout_ms_;
  o.Stream.Purge.Sequence = seq;  // up to but not including
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::uint64_t mark = violations();
  const natsStatus s = js_PurgeStream(js_, stream_.c_str(), &o, &jerr);
  if (s != NATS_OK)
    return sdk::fail(failure(s, jerr, "purge of stream '" + stream_ + "' before sequence " + std::to_string(seq), mark));
  return seq - before.first;
}

}  // namespace mesh::stores::jetstream_kv
