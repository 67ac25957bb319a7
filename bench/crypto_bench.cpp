// The cost trust adds to one delivery: the control plane signs a declaration once per push
// (trust::sign_declaration) and the host verifies it once (trust::verify_declaration), over the
// exact body bytes. Bodies of 1 KiB (a few resources), 64 KiB and 1 MiB (the broker's default
// max_payload). Also the per-heartbeat MAC and the per-request operator signature check.
#include <benchmark/benchmark.h>

#include <string>

#include "mesh/common/crypto.h"
#include "mesh/common/trust.h"

namespace {

std::string body_of(std::size_t bytes) {
  std::string b = R"({"node":"web-01","revision":43,"resources":[{"type":"file","id":"/etc/motd","properties":{"content":")";
  b.append(bytes > b.size() + 8 ? bytes - b.size() - 8 : 0, 'x');
  b += R"("}}]})";
  return b;
}

void BM_DeclarationSignAndVerify(benchmark::State& state) {
  const auto keys = mesh::common::generate_keypair();
  mesh::sdk::Message m;
  m.subject = "mesh.decl.web-01";
  m.body = body_of(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    mesh::trust::sign_declaration(m, "web-01", 43, keys.secret_key);
    auto ok = mesh::trust::verify_declaration(m, "web-01", 43, keys.public_key);
    if (!ok) state.SkipWithError("did not verify");
    benchmark::DoNotOptimize(ok);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_DeclarationSignAndVerify)->Arg(1 << 10)->Arg(64 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void BM_DeclarationVerifyOnly(benchmark::State& state) {
  const auto keys = mesh::common::generate_keypair();
  mesh::sdk::Message m;
  m.body = body_of(static_cast<std::size_t>(state.range(0)));
  mesh::trust::sign_declaration(m, "web-01", 43, keys.secret_key);
  for (auto _ : state) benchmark::DoNotOptimize(mesh::trust::verify_declaration(m, "web-01", 43, keys.public_key));
}
BENCHMARK(BM_DeclarationVerifyOnly)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void BM_HeartbeatMacAndVerify(benchmark::State& state) {
  const std::string key = mesh::common::random_bytes(32);
  mesh::sdk::Message m;
  m.body = R"({"node":"web-01","at":"2026-11-29T07:00:01Z","applied_revision":43,"host_version":"0.1.0","state":"idle"})";
  std::int64_t t = 1;
  for (auto _ : state) {
    mesh::trust::mac_heartbeat(m, "web-01", key, ++t);
    benchmark::DoNotOptimize(mesh::trust::verify_heartbeat(m, "web-01", key));
  }
}
BENCHMARK(BM_HeartbeatMacAndVerify)->Unit(benchmark::kMicrosecond);

void BM_OperatorRequestSignAndVerify(benchmark::State& state) {
  const auto keys = mesh::common::generate_keypair();
  mesh::sdk::Message m;
  m.subject = "mesh.api.declare";
  m.body = body_of(4096);
  for (auto _ : state) {
    mesh::trust::sign_request(m, mesh::trust::kHeaderOperator, "admin", keys.secret_key, 1796022001000);
    auto proof = mesh::trust::read_request_proof(m, mesh::trust::kHeaderOperator);
    benchmark::DoNotOptimize(mesh::trust::verify_request(m, *proof, keys.public_key));
  }
}
BENCHMARK(BM_OperatorRequestSignAndVerify)->Unit(benchmark::kMicrosecond);

}  // namespace
