#include "renderers.h"

namespace mesh::reports {

sdk::Result<std::string> JsonReport::do_render(const sdk::Value& report, std::int64_t /*now_ms*/) {
  return report.to_json() + "\n";
}

}  // namespace mesh::reports
