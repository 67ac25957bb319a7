// mesh::common::parse_json with small limits: every message handler and the declaration parser
// start here. The first byte picks the limits (depth 1-16, size 64 bytes to 4 KiB); the rest is
// the text. Invariants besides "no crash, leak or UB": a refusal is InvalidArgument; an accepted
// document is an object/array/scalar whose compact rendering (Value::to_json, which is what the
// control plane stores and pushes) parses again, within the same depth, to an equal value.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "mesh/common/json.h"

using namespace mesh;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t sel = in.byte();
  common::JsonLimits limits;
  limits.max_depth = 1 + (sel & 0x0f);
  limits.max_bytes = std::size_t{64} << ((sel >> 4) & 0x07);  // 64 B .. 8 KiB
  const std::string_view text = in.rest();

  auto v = common::parse_json(text, limits);
  if (!v) {
    if (v.error().code != sdk::ErrorCode::InvalidArgument)
      fuzz::finding("parse_json refused with a code other than invalid_argument",
                    v.error().describe());
    if (text.size() > limits.max_bytes && v.error().message.find("over the limit") == std::string::npos)
      fuzz::finding("an oversized document was not refused for its size first", v.error().message);
    return 0;
  }
  if (text.size() > limits.max_bytes) fuzz::finding("a document over max_bytes was accepted");

  const std::string out = v->to_json();
  common::JsonLimits again = limits;
  again.max_bytes = out.size() + 1;  // numbers may render longer than written (1e5 -> 100000)
  auto w = common::parse_json(out, again);
  if (!w) fuzz::finding("to_json of an accepted document does not parse again",
                        w.error().describe() + "\n" + out);
  if (!(*w == *v)) fuzz::finding("to_json round trip changed the value", out);
  return 0;
}
