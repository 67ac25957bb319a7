// The last log lines of a unit, for failure reasons: "why did it not stay up" must be answerable
// from the report alone.
//
// Sources, in order: the journal (`journalctl -u UNIT -n N --since @T --no-pager -q -o cat`,
// run without a shell, 3 s at most); then, when that gives nothing (no journald, e.g. in a
// container), the file named by the unit's own `StandardOutput=`/`StandardError=`
// `append:`/`file:`/`truncate:` setting, found in its unit file and drop-ins (systemd does not
// expose that path on D-Bus). Otherwise the text says "no journal available".
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::plugins::service {

/// "last log lines (journal): a | b | c", "last log lines (/var/log/x.log): ...", or
/// "no journal available (...)". `since` bounds the journal query (the operation's start);
/// `unit_files` are the unit's FragmentPath and DropInPaths. Never throws except bad_alloc.
std::string last_log_lines(const std::string& unit, const std::vector<std::string>& unit_files,
                           std::chrono::system_clock::time_point since, int lines = 10);

/// The output file a unit's settings name: the last StandardOutput= (or, failing that,
/// StandardError=) of the form append:/file:/truncate:PATH across `unit_files` in order (later
/// files override earlier ones, as drop-ins do). Exposed for tests.
std::optional<std::string> output_file_of(const std::vector<std::string>& unit_files);

/// Up to `lines` last lines of the file at `path` (reads at most its last 64 KiB). Exposed for
/// tests.
std::optional<std::vector<std::string>> tail_file(const std::string& path, int lines);

/// Runs `argv` (argv[0] an absolute path) without a shell, stdin and stderr on /dev/null, and
/// returns its stdout when it exits 0 within `timeout`; nullopt otherwise (the child is
/// SIGKILLed on timeout). At most 256 KiB of output is kept. Exposed for tests.
std::optional<std::string> run_capture(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout);

}  // namespace mesh::plugins::service
