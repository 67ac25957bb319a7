// Fleet composition (issue #13, points 1 and 2): modules, the per-node template context,
// rendering, selectors, composing a node's declaration from its sources, and the difference
// between two resource lists. Used by mesh-control (deploy, assign, module push) and by `mesh`
// (checking a module file before it is sent).
//
// The template language is Mustache through kainjow::mustache (Debian's
// libkainjow-mustache-dev), with HTML escaping off; the selector grammar is this library's.
// Both are described for operators in docs/modules.md; the choices are decisions 52 and 53.
//
// Everything here is a pure function of its arguments: no I/O, no global state; thread-safe.
// Errors are sdk::Error with code InvalidArgument unless said otherwise; no function throws
// except std::bad_alloc.
//
// This library depends on mesh_sdk, mesh_common and mesh_declaration only.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::fleet {

// --- modules ----------------------------------------------------------------------------------

/// One version of a module, as parsed from its file (INTERFACE "Module (JSON)"):
/// `{"module": NAME, "version": VERSION, "resources": [...]}`.
struct Module {
  /// [a-z0-9][a-z0-9._-]{0,62}
  std::string name;
  /// Opaque: non-empty, at most 128 bytes, printable (common::first_unprintable finds nothing),
  /// no space or tab. Compared as bytes; "1.10" and "1.9" have no order.
  std::string version;
  /// The resources as written in the file (an array of resource objects; ids and strings are
  /// still templates).
  sdk::Value resources;
  /// sha256 (64 lower-case hex) of canonical_json() of the document {"module","version",
  /// "resources"}: the same module written with other key order or spacing has the same digest.
  std::string digest;
};

/// Deterministic JSON text of `value`, the SDK's sdk::canonical_json (mesh/sdk/value.h): members
/// of every object sorted by key (byte order), no whitespace. Two values equal under Value's
/// operator== with the same number kinds give the same text. Pure.
using sdk::canonical_json;

/// Whether `name` is a valid module name ([a-z0-9][a-z0-9._-]{0,62}). Pure.
bool valid_module_name(std::string_view name) noexcept;

/// Parses and checks a module file.
/// @param json    the file's text (at most 1 MiB, common::parse_json's checks).
/// @param source  what to call the text in messages (a file name, "request"); not read.
/// @returns the module, with `digest` set.
/// Errors (InvalidArgument; the message starts with `source` and names the field, `path` is the
/// JSON path):
///   - not JSON, or not an object; an unknown key (naming the valid ones); a missing key;
///   - `module` not a valid name; `version` empty, longer than 128 bytes, with a space, a tab
///     or an unprintable character;
///   - `resources` not an array, or a resource not in the declaration's resource shape
///     (declaration::check phases 2 and 4: type, id, properties, requires; unique `type:id` as
///     written), and each `type` a provider name ([a-z0-9_-]+: types are not templates).
///     `requires` and `properties.restart_on` may name resources of other sources
///     (the node's own, other modules): they are checked on the composed declaration;
///   - a template (an id, a `requires` entry, a string anywhere in `properties`) that kainjow
///     does not parse ("resources[1].properties.content: template: Unclosed tag at 12"), longer
///     than 256 KiB, with more than 256 section or delimiter tags, or that uses a partial
///     (`{{> name}}`) outside a section.
/// Thread-safe.
sdk::Result<Module> parse_module(std::string_view json, std::string_view source);

// --- rendering --------------------------------------------------------------------------------

/// What a node's templates may refer to: `node.name`, `labels.KEY`, `facts.KEY`.
struct NodeContext {
  std::string name;
  /// Operator-set labels (record ns `labels`).
  std::map<std::string, std::string> labels;
  /// Briefing facts, flat: "os.id" → "debian" (referred to as `facts.os.id`).
  std::map<std::string, std::string> facts;
};

/// Builds a node's context.
/// @param name            the node's name.
/// @param labels_object   the node's `labels` record value: a JSON object of strings; anything
///                        else (null: no record) gives no labels; non-string members are skipped.
/// @param briefing        the node's last briefing (or null): its `facts` member, an object of
///                        strings, gives the facts; non-string members are skipped.
/// Never fails. Pure.
NodeContext node_context(std::string name, const sdk::Value& labels_object,
                         const sdk::Value& briefing);

/// Renders one template string for a node (what render_module does to each string).
/// @param text   the template.
/// @param node   the node's context.
/// @param where  prefix of the error message ("node web-01: module web@1.4.2: file:/etc/motd:
///               properties.content"); not parsed.
/// @returns the text with every tag replaced (a text without "{{" is returned as it is).
/// Errors (InvalidArgument, message `where: ...`):
///   - the template does not parse, is longer than 128 KiB, or has more than 100 section and
///     set-delimiter tags;
///   - a variable (`{{x}}`, `{{{x}}}`, `{{& x}}`) names something the node lacks ("no label
///     'role'", "no fact 'os.id'") or something that is not one value (`{{labels}}`);
///   - a partial (`{{> x}}`).
/// Sections are presence tests: `{{#labels.x}}…{{/labels.x}}` renders its body when the node has
/// label x (`{{.}}` is its value) and nothing otherwise, `{{^labels.x}}…{{/labels.x}}` when it
/// lacks it; neither is an error. Thread-safe.
sdk::Result<std::string> render_template(std::string_view text, const NodeContext& node,
                                         std::string_view where);

/// Renders a module's resources for one node: each resource's `id`, each `requires` entry, and
/// every string in `properties` (recursively in arrays and objects; keys and non-strings are
/// kept). `type` is not a template.
/// @returns the rendered resources array (same order and shape as m.resources; `m` is not
/// changed). Errors: InvalidArgument (render_template's), the message naming node, module,
/// resource (`type:id` as written) and field, `path` the field, e.g.
///   "node web-01: module web@1.4.2: file:/etc/motd: properties.content: no label 'role'"
/// (the first problem found, in resource order); m.resources not an array. Each call parses
/// every template again: for many nodes use the TemplateCache overload. Thread-safe.
sdk::Result<sdk::Value> render_module(const Module& m, const NodeContext& node);

/// Parsed templates kept between render_module calls, so that rendering a module for many nodes
/// (a deploy) parses each template once: keyed by the template's text, so one cache may serve
/// several modules. Grows with the distinct templates rendered through it (no eviction): keep
/// one per deploy. Movable, not copyable. Not thread-safe: one cache per thread.
class TemplateCache {
 public:
  TemplateCache();
  ~TemplateCache();
  TemplateCache(TemplateCache&&) noexcept;
  TemplateCache& operator=(TemplateCache&&) noexcept;
  TemplateCache(const TemplateCache&) = delete;
  TemplateCache& operator=(const TemplateCache&) = delete;
  /// How many parsed templates it holds.
  std::size_t size() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend sdk::Result<sdk::Value> render_module(const Module&, const NodeContext&, TemplateCache&);
};

/// render_module with `cache`: the same result and errors; a template already in `cache` is not
/// parsed again. `cache` is used by this call only while it runs (not kept).
sdk::Result<sdk::Value> render_module(const Module& m, const NodeContext& node, TemplateCache& cache);

// --- selectors --------------------------------------------------------------------------------

/// One term of a selector.
struct SelectorTerm {
  enum class Kind { Name, Label, Fact };
  Kind kind = Kind::Name;
  /// The label or fact key ("role", "os.id"); "" for Name.
  std::string key;
  /// The value to match: a glob for Name (`*` any run, `?` one byte), else compared exactly.
  std::string value;
};

/// A parsed selector: every term must match (an AND of its terms).
struct Selector {
  std::vector<SelectorTerm> terms;
};

/// Parses a selector (INTERFACE `mesh assign`): `term(,term)*`, a term being `name=GLOB`,
/// `facts.KEY=VALUE` or `KEY=VALUE` (a label). Spaces around ',' and '=' are ignored.
/// KEY: [A-Za-z0-9][A-Za-z0-9._/-]{0,62}; VALUE: one or more printable characters other than
/// ',' and '=' (spaces inside are kept).
/// Errors: InvalidArgument "selector: at position N: ..." (N counted from 1, in bytes) for an
/// empty selector or term, a missing '=', a bad key, an empty or bad value, a key given twice.
/// Pure.
sdk::Result<Selector> parse_selector(std::string_view text);

/// Whether every term matches `node` (a missing label or fact does not match). Pure.
bool matches(const Selector& s, const NodeContext& node);

/// The selector's canonical text: terms in their order, `key=value` joined by ','.
/// parse_selector(to_string(s)) gives back `s`. Pure.
std::string to_string(const Selector& s);

/// Whether glob `pattern` (`*` any run of bytes, `?` one byte, everything else literal) matches
/// all of `text`. No exponential backtracking: O(|pattern|·|text|) at worst. Pure.
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

// --- composition ------------------------------------------------------------------------------

/// One contributor to a node's declaration.
struct Source {
  /// "own", or "module web@1.4.2": used in conflict messages.
  std::string label;
  /// A resources array (rendered).
  sdk::Value resources;
};

/// The node's resources: every source's resources, in the order of `sources`.
/// Errors: InvalidArgument when `resources` of a source is not an array of objects with string
/// `type` and `id`, or when the same `type:id` comes twice: "file:/etc/motd is declared by both
/// own and module web@1.4.2" (or "twice by module web@1.4.2"). Linear-ish (n log n). Pure.
sdk::Result<sdk::Value> compose(const std::vector<Source>& sources);

/// What changes between two resource lists, by `type:id`.
struct Changes {
  /// Each sorted (byte order), as "type:id".
  std::vector<std::string> added, changed, removed;
  bool empty() const noexcept { return added.empty() && changed.empty() && removed.empty(); }
};

/// Compares two resources arrays: a `type:id` only in the new one is added, only in the old one
/// removed, in both with a different resource (deep comparison of the whole object) changed.
/// Entries that are not objects with string type and id are ignored; non-arrays count as empty.
/// Pure.
Changes diff(const sdk::Value& old_resources, const sdk::Value& new_resources);

}  // namespace mesh::fleet
