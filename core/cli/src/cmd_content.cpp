// `mesh content push FILE` (decision record 111): the file's SHA-256 is computed here, then the
// file is sent in ranges (content.put, each one signed API request that fits one broker message,
// so that any instance of the control plane may take it); the control plane checks the whole
// file against the digest before it keeps it. Prints the digest to declare as a file resource's
// `source`.
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "mesh/cli/commands.h"
#include "mesh/cli/exit_codes.h"
#include "mesh/common/crypto.h"
#include "mesh/common/error_text.h"
#include "mesh/common/text.h"
#include "mesh/support/sha256.h"

namespace mesh::cli {
namespace {

using sdk::Value;

constexpr std::uint64_t kMaxContent = 4ull << 30;  // the control plane's limit (api_content.cpp)
// Room left in a message for the headers and the JSON around the data.
constexpr std::size_t kEnvelope = 16 << 10;

int push(CommandEnv& env, const std::string& file) {
  auto fail = [&](int code, const std::string& message) {
    env.err << "error: " << common::printable(message, 4096) << "\n";
    return code;
  };
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return fail(kExitUsage, file + ": not a readable file");
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (size > kMaxContent)
    return fail(kExitUsage, file + ": " + std::to_string(size) + " bytes; content may be at most 4 GiB");
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(kExitUsage, file + ": cannot be read");
  support::Sha256 hash;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) hash.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  const std::string digest = "sha256:" + hash.hex_digest();

  int code = kExitOk;
  auto client = env.connect(code);
  if (!client) return code;
  // Each range is one message: base64 makes 4 bytes of 3, and the rest of the request needs room.
  const std::size_t payload = client->max_payload_bytes();
  if (payload < 4 * kEnvelope) return fail(kExitFailed, "the broker's max_payload of " + std::to_string(payload) +
                                                            " bytes is too small for content ranges");
  const std::size_t range = std::min<std::size_t>((payload - kEnvelope) / 4 * 3, 1 << 20);
  buf.resize(range);
  // The range that ends the file has the control plane hash all of it.
  client->set_timeout_at_least(std::chrono::minutes(2));
  const std::string upload = common::to_hex(common::random_bytes(16));
  in.clear();
  in.seekg(0);
  std::uint64_t sent = 0;
  bool present = false;
  do {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(range, size - sent));
    in.read(buf.data(), static_cast<std::streamsize>(want));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n != want) return fail(kExitFailed, file + ": changed while it was sent (shorter than " + std::to_string(size) + " bytes)");
    Value p = Value::object();
    p.set("digest", digest);
    p.set("size", static_cast<std::int64_t>(size));
    p.set("offset", static_cast<std::int64_t>(sent));
    p.set("upload", upload);
    p.set("data", common::base64url_encode(std::string_view(buf.data(), n)));
    auto r = client->call("content.put", p);
    if (!r)
      return fail(exit_code_for(r.error().code), "push of " + file + " stopped at byte " + std::to_string(sent) + " of " +
                                                     std::to_string(size) + ": " + common::described(r.error()) +
                                                     " (nothing was stored)");
    if (r->get_bool("present", false)) {
      present = true;
      break;
    }
    sent += n;
    if (r->get_int("received", -1) != static_cast<std::int64_t>(sent))
      return fail(kExitFailed, "the control plane acknowledged " + std::to_string(r->get_int("received", -1)) +
                                   " bytes, not " + std::to_string(sent) + "; nothing was stored");
  } while (sent < size);
  if (env.output == "json") {
    Value v = Value::object();
    v.set("digest", digest);
    v.set("size", static_cast<std::int64_t>(size));
    v.set("already", present);
    env.out << v.to_json() << "\n";
    return kExitOk;
  }
  env.out << (present ? "already stored " : "stored ") << digest << " (" << size << " bytes)\n"
          << "declare it as a file resource's source = \"" << digest << "\"\n";
  return kExitOk;
}

}  // namespace

void register_content_commands(CLI::App& app, CommandRun& run) {
  auto* content = app.add_subcommand("content", "file content by digest, kept by the control plane");
  content->require_subcommand(1);
  auto* push_cmd = content->add_subcommand(
      "push", "store FILE on the control plane; prints its digest for a file resource's source");
  auto file = std::make_shared<std::string>();
  push_cmd->add_option("FILE", *file, "the file")->required();
  push_cmd->callback([&run, file]() { run = [file](CommandEnv& env) { return push(env, *file); }; });
  for (CLI::App* sub : {content, push_cmd}) sub->fallthrough();
}

}  // namespace mesh::cli
