// The store conformance suite (sdk/testing) run against the `sqlite` store: real SQLite files in
// a temporary folder; the second instance opens the same file (as a second control plane on one
// machine would).
#include <mesh/sdk/testing/store_conformance.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "sqlite_store.h"

namespace {

namespace mt = mesh::sdk::testing;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-store-conformance-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

mt::StoreConformance sqlite_store() {
  auto dir = std::make_shared<TempDir>();
  mt::StoreConformance c;
  c.open_store = [dir](const mesh::sdk::HostContext& host, int) -> std::unique_ptr<mesh::sdk::Store> {
    auto s = std::make_unique<mesh::stores::sqlite::SqliteStore>(host);
    mesh::sdk::Value config = mesh::sdk::Value::object();
    config.set("path", dir->path() + "/mesh.db");
    if (auto r = s->configure(config); !r) {
      ADD_FAILURE() << r.error().describe();
      return nullptr;
    }
    if (auto r = s->open(); !r) {
      ADD_FAILURE() << r.error().describe();
      return nullptr;
    }
    return s;
  };
  c.keep_alive = dir;
  return c;
}

}  // namespace

MESH_INSTANTIATE_STORE_CONFORMANCE(Sqlite, sqlite_store);
