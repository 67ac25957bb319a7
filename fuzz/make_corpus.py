#!/usr/bin/env python3
"""Writes the seed corpus under fuzz/corpus/<target>/ (committed; rerun after changing a seed).

Every seed starts with the target's selector byte(s) (see the comment at the top of each
fuzz_*.cpp), followed by the text. A handful of valid inputs and the classic hostile ones:
duplicates, cycles, deep nesting, invalid UTF-8, NUL in a path, `..` paths, bad TOML, messages
on every subject with good and bad bodies.
"""
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def js(v):
    return json.dumps(v, separators=(",", ":"))


GOOD_DECL = js({"resources": [
    {"type": "file", "id": "/etc/motd", "properties": {"content": "hello\n", "mode": "0644"}},
    {"type": "file", "id": "/srv/app/bin", "properties": {"content_base64": "AAEC", "owner": "root",
                                                          "group": "0", "ensure": "present"},
     "requires": ["file:/etc/motd"]},
    {"type": "svc", "id": "nginx", "properties": {"unit": "nginx.service", "count": 2, "args": ["-g"],
                                                  "env": {"A": "b"}, "extra": [1, {"x": None}]},
     "requires": ["file:/etc/motd", "file:/srv/app/bin"]}]})
PUSHED_DECL = js({"node": "web-01", "revision": 7, "resources": [
    {"type": "file", "id": "/etc/motd", "properties": {"content": "hello\n"}}]})
DUP_RESOURCE = js({"resources": [{"type": "file", "id": "/etc/motd"}, {"type": "file", "id": "/etc/motd"}]})
DUP_KEY = '{"resources":[{"type":"file","id":"/etc/a","properties":{"mode":"0644","mode":"0600"}}]}'
CYCLE = js({"resources": [
    {"type": "file", "id": "/etc/a", "requires": ["file:/etc/c"]},
    {"type": "file", "id": "/etc/b", "requires": ["file:/etc/a"]},
    {"type": "file", "id": "/etc/c", "requires": ["file:/etc/b"]}]})
SELF_CYCLE = js({"resources": [{"type": "svc", "id": "x", "properties": {"unit": "u"}, "requires": ["svc:x"]}]})
DEEP = '{"resources":[{"type":"svc","id":"d","properties":{"unit":"u","extra":' + "[" * 40 + "]" * 40 + "}}]}"
BAD_UTF8 = b'{"resources":[{"type":"file","id":"/etc/\xff\xfe","properties":{"content":"\xc3("}}]}'
NUL_PATH = '{"resources":[{"type":"file","id":"/etc/mo\\u0000td"}]}'
DOTDOT = js({"resources": [{"type": "file", "id": "/etc/../etc/shadow"}, {"type": "file", "id": "/srv/./x"},
                           {"type": "file", "id": "relative/path"}, {"type": "file", "id": "/etc//double"}]})
OUTSIDE = js({"resources": [{"type": "file", "id": "/home/user/x"}]})
EXCLUSIVE = js({"resources": [{"type": "file", "id": "/etc/x", "properties": {"content": "a", "content_base64": "YQ=="}}]})
BAD_MODE = js({"resources": [{"type": "file", "id": "/etc/x", "properties": {"mode": "9999", "ensure": "maybe"}}]})
BAD_B64 = js({"resources": [{"type": "file", "id": "/etc/x", "properties": {"content_base64": "@@@="}}]})
UNKNOWN = js({"resources": [{"type": "nope", "id": "x"}, {"type": "file", "id": "/etc/x", "properties": {"colour": "red"}}],
              "extra": 1})
REQ_MISSING = js({"resources": [{"type": "file", "id": "/etc/x", "requires": ["file:/etc/y", "nocolon", ":x"]}]})
WRONG_NODE = js({"node": "db-01", "resources": []})
REVISION = js({"revision": 3, "resources": []})
SURROGATE = '{"resources":[{"type":"file","id":"/etc/x","properties":{"content":"\\ud800 \\udc00 \\ud83d\\ude00"}}]}'
NUMBERS = js({"resources": [{"type": "svc", "id": "n", "properties": {"unit": "u", "count": -1}}]}) 
BIGNUM = '{"resources":[{"type":"svc","id":"n","properties":{"unit":"u","ratio":1e400,"extra":[18446744073709551615,-0,-0.0,1e-400,9223372036854775808]}}]}'

DECLS = {
    "good": GOOD_DECL, "pushed": PUSHED_DECL, "duplicate-resource": DUP_RESOURCE, "duplicate-key": DUP_KEY,
    "cycle": CYCLE, "self-cycle": SELF_CYCLE, "deep": DEEP, "bad-utf8": BAD_UTF8, "nul-path": NUL_PATH,
    "dotdot": DOTDOT, "outside-roots": OUTSIDE, "exclusive": EXCLUSIVE, "bad-mode": BAD_MODE,
    "bad-base64": BAD_B64, "unknown": UNKNOWN, "requires-missing": REQ_MISSING, "wrong-node": WRONG_NODE,
    "revision": REVISION, "surrogates": SURROGATE, "negative-count": NUMBERS, "numbers": BIGNUM,
    "truncated": GOOD_DECL[: len(GOOD_DECL) // 2], "empty": "", "not-object": "[1,2]",
}


def b(x):
    return x.encode() if isinstance(x, str) else x


def json_corpus():
    t = "fuzz_json"
    # selector: low 4 bits depth-1, bits 4-6 size 64 << n
    for name, text in DECLS.items():
        write(t, name, bytes([0x7f]) + b(text))
    write(t, "depth-limit", bytes([0x02]) + b"[[[[1]]]]")
    write(t, "size-limit", bytes([0x0f]) + b'"' + b"x" * 100 + b'"')
    write(t, "escapes", bytes([0x7f]) + b'{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0001\\u00e9","b":[true,false,null]}')
    write(t, "bom", bytes([0x7f]) + b"\xef\xbb\xbf{}")
    write(t, "many-keys", bytes([0x7f]) + b(js({f"k{i}": i for i in range(20)})))
    write(t, "dup-many-keys", bytes([0x7f]) + b("{" + ",".join(f'"k{i}":{i}' for i in range(20)) + ',"k3":0}'))
    write(t, "trailing", bytes([0x7f]) + b"{} {}")


def declaration_corpus():
    t = "fuzz_declaration"
    # selector: bit0 allow_revision, bit1 expected node web-01, bit2 allowed_roots, bits3-5 depth, bit6 small
    for name, text in DECLS.items():
        write(t, name, bytes([0x3b]) + b(text))
    write(t, "confined-good", bytes([0x3c]) + b(GOOD_DECL))
    write(t, "operator-file", bytes([0x38]) + b(GOOD_DECL))
    write(t, "small-limit", bytes([0x78]) + b(GOOD_DECL))
    # The engine lets `properties` be omitted and takes "node": "" for no node; the control plane
    # refuses both (known differences, see fuzz_declaration.cpp).
    write(t, "no-properties", bytes([0x38]) + b(js({"resources": [{"type": "file", "id": "/etc/x"}]})))
    write(t, "empty-node", bytes([0x38]) + b(js({"node": "", "resources": []})))


HOST_TOML = """# host.toml
[node]
name = "web-01"
state_dir = "/var/lib/nox-mesh"

[plugins]
dir = "/usr/lib/nox-mesh/plugins"
load = ["file"]

[transport]
plugin = "nats"
servers = ["nats://127.0.0.1:4222"]

[timers]
heartbeat = "30s"
drift = "30m"

[limits]
max_message = 65536

[provider.file]
allowed_roots = ["/etc", "/srv"]
"""
CONTROL_TOML = """[control]
state_dir = "/var/lib/nox-mesh-control"
retain = 50
heartbeat_flush = "250ms"

[plugins]
dir = "/usr/lib/nox-mesh/plugins"

[store]
plugin = "sqlite"
busy_timeout = 2000

[transport]
plugin = "nats"
servers = ["nats://127.0.0.1:4222"]
user = "mesh"
password_file = "/etc/mesh/pw"

[limits]
max_message = 1048576
"""
GENERIC_TOML = """[t]
s = "b"
b = true
i = 3
l = ["x", "y"]
m = { k = "v" }
x = [1, 2.5, "z", { deep = [[1]] }]
r = "required"
skip = 1
[a.b]
c = 1
"""


def config_corpus():
    t = "fuzz_config"
    write(t, "host-good", b"\x00" + b(HOST_TOML))
    write(t, "control-good", b"\x01" + b(CONTROL_TOML))
    write(t, "generic-good", b"\x02" + b(GENERIC_TOML))
    write(t, "both-minimal", b"\x03" + b'[node]\nname="a"\nstate_dir="/s"\n[plugins]\ndir="/p"\n[control]\nstate_dir="/s"\n')
    write(t, "host-unknown-key", b"\x00" + b(HOST_TOML.replace("drift =", "drfit =")))
    write(t, "host-fast-heartbeat", b"\x00" + b(HOST_TOML.replace('"30s"', '"500ms"')))
    write(t, "host-bad-duration", b"\x00" + b(HOST_TOML.replace('"30m"', '"-1h"')))
    write(t, "host-bad-node", b"\x00" + b(HOST_TOML.replace('"web-01"', '"Web 01"')))
    write(t, "host-relative-state", b"\x00" + b(HOST_TOML.replace('"/var/lib/nox-mesh"', '"var/lib"')))
    write(t, "host-bad-roots", b"\x00" + b(HOST_TOML.replace('["/etc", "/srv"]', '["/etc/../x", ""]')))
    write(t, "host-provider-not-table", b"\x00" + b(HOST_TOML.replace("[provider.file]\nallowed_roots", "[provider]\nfile")))
    write(t, "host-wrong-type", b"\x00" + b(HOST_TOML.replace("max_message = 65536", "max_message = \"big\"")))
    write(t, "host-transport-both-auth", b"\x00" + b(HOST_TOML.replace('servers = ["nats://127.0.0.1:4222"]',
                                                                        'servers = []\nuser = "u"\nnkey_seed = "/k"')))
    write(t, "control-retain-zero", b"\x01" + b(CONTROL_TOML.replace("retain = 50", "retain = 0")))
    write(t, "control-slow-flush", b"\x01" + b(CONTROL_TOML.replace('"250ms"', '"2s"')))
    write(t, "control-store-path", b"\x01" + b(CONTROL_TOML.replace("busy_timeout = 2000", 'path = 7')))
    write(t, "control-unknown-table", b"\x01" + b(CONTROL_TOML + "\n[timer]\nx = 1\n"))
    write(t, "dates", b"\x03" + b"[node]\nname = 1979-05-27T07:32:00Z\n[control]\nt = 07:32:00\n")
    write(t, "specials", b"\x02" + b"[t]\nr = 'lit'\nn = nan\ni = 0x7fffffffffffffff\nx = [inf, -inf, -0.0]\n")
    write(t, "syntax-error", b"\x03" + b"[node\nname = \n")
    write(t, "duplicate-key", b"\x03" + b"[node]\nname = \"a\"\nname = \"b\"\n")
    write(t, "bad-utf8", b"\x02" + b"[t]\nr = \"\xff\xfe\"\n")
    write(t, "nul", b"\x02" + b"[t]\nr = \"a\x00b\"\n")
    write(t, "deep-inline", b"\x02" + b"[t]\nr = \"x\"\nx = " + b"[" * 40 + b"]" * 40 + b"\n")
    write(t, "dotted-keys", b"\x02" + b'[t]\nr = "x"\n"a.b" = 1\nm.k = "v"\n[[a.arr]]\nq = 1\n')


def control_corpus():
    t = "fuzz_control_messages"
    # byte 0 subject index, byte 1 flags (bit0 publish, bits1-2 header mode, bits3-4 store mode)
    subjects = ["mesh.api.token.issue", "mesh.api.token.list", "mesh.api.token.revoke", "mesh.api.nodes",
                "mesh.api.node.show", "mesh.api.declare", "mesh.api.report", "mesh.api.history",
                "mesh.api.rollback", "mesh.latest.web-01", "mesh.report.web-01", "mesh.drift.web-01",
                "mesh.heartbeat.web-01", "mesh.recovery.web-01", "mesh.enrol", "mesh.briefing.web-01",
                "mesh.api.operator.add", "mesh.api.operator.list", "mesh.api.operator.remove"]
    idx = {s: i for i, s in enumerate(subjects)}
    custom = len(subjects)
    bodies = {
        "mesh.api.token.issue": js({"node": "web-01", "ttl_ms": 3600000, "reenrol": True}),
        "mesh.api.token.list": "{}",
        "mesh.api.token.revoke": js({"id": "abc123"}),
        "mesh.api.nodes": "",
        "mesh.api.node.show": js({"node": "web-01"}),
        "mesh.api.declare": js({"node": "web-01", "declaration": GOOD_DECL}),
        "mesh.api.report": js({"delivery": 3}),
        "mesh.api.history": js({"node": "web-01", "limit": 2}),
        "mesh.api.rollback": js({"node": "web-01", "to": 2}),
        "mesh.latest.web-01": "",
        "mesh.report.web-01": js({"node": "web-01", "revision": 3, "at": "2026-11-29T07:00:01Z", "outcome": "failed",
                                  "resource": "file:/etc/motd", "reason": "open: denied", "owned": ["file:/etc/motd"],
                                  "resources": []}),
        "mesh.drift.web-01": js({"node": "web-01", "scan": "s1", "revision": 3, "at": "2026-11-29T07:00:01Z",
                                 "resources": [{"resource": "file:/etc/motd", "found": "content differs",
                                                "action": "repaired"}]}),
        "mesh.heartbeat.web-01": js({"node": "web-01", "at": "2026-11-29T07:00:00Z", "applied_revision": 3,
                                     "host_version": "0.1.0", "state": "idle"}),
        "mesh.recovery.web-01": "",
        # public_key: a valid Ed25519 key (the fuzz harness's admin key, from seed 0x03 * 32)
        "mesh.enrol": js({"node": "web-01", "token": "t" * 43, "host_version": "0.1.0",
                          "public_key": "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1"}),
        "mesh.briefing.web-01": js({"node": "web-01", "at_ms": 1800000000000, "host_version": "0.1.0",
                                    "lines": [{"check": "disk", "outcome": "pass", "detail": "12 GiB free"},
                                              {"check": "clock", "outcome": "pass"}]}),
        "mesh.api.operator.add": js({"name": "ops-2", "role": "deployer", "public_key": "cd" * 32}),
        "mesh.api.operator.list": "{}",
        "mesh.api.operator.remove": js({"name": "ops-2"}),
    }
    for s, body in bodies.items():
        name = s.replace("mesh.", "").replace(".web-01", "")
        write(t, name, bytes([idx[s], 0x00]) + b(body))
        write(t, name + "-store-notfound", bytes([idx[s], 0x08]) + b(body))
        write(t, name + "-store-down", bytes([idx[s], 0x10]) + b(body))
    # byte 1 bits 5-6: proof (0 signed, 2 none, 3 signed then altered); bit 7: API as the reader
    write(t, "unsigned-report", bytes([idx["mesh.report.web-01"], 0x40]) + b(bodies["mesh.report.web-01"]))
    write(t, "unsigned-api", bytes([idx["mesh.api.nodes"], 0x40]) + b"{}")
    write(t, "tampered-heartbeat", bytes([idx["mesh.heartbeat.web-01"], 0x61]) + b(bodies["mesh.heartbeat.web-01"]))
    write(t, "tampered-declare", bytes([idx["mesh.api.declare"], 0x60]) + b(bodies["mesh.api.declare"]))
    write(t, "reader-declare", bytes([idx["mesh.api.declare"], 0x80]) + b(bodies["mesh.api.declare"]))
    write(t, "reader-nodes", bytes([idx["mesh.api.nodes"], 0x80]) + b"{}")
    write(t, "forged-headers", bytes([idx["mesh.latest.web-01"], 0x46]) +
          b"Mesh-Node: web-01\nMesh-Timestamp: 1\nMesh-Nonce: x\nMesh-Signature: " + b"00" * 64 + b"\n\n")
    write(t, "report-refused", bytes([idx["mesh.report.web-01"], 0x00]) + b(js(
        {"node": "web-01", "revision": 9, "outcome": "refused", "reason": "signature", "digest": "0" * 64})))
    write(t, "enrol-bad-key", bytes([idx["mesh.enrol"], 0x00]) + b(js({"node": "web-01", "token": "t", "public_key": "ab" * 32})))
    write(t, "enrol-sealed-garbage", bytes([idx["mesh.enrol"], 0x00]) + b(js({"node": "web-01", "token_sealed": "00" * 80,
                                                                              "public_key": "ab" * 32})))
    write(t, "heartbeat-publish", bytes([idx["mesh.heartbeat.web-01"], 0x01]) + b(bodies["mesh.heartbeat.web-01"]))
    write(t, "api-publish", bytes([idx["mesh.api.nodes"], 0x01]) + b"{}")
    write(t, "no-version", bytes([idx["mesh.api.nodes"], 0x02]) + b"{not json")
    write(t, "version-2", bytes([idx["mesh.report.web-01"], 0x04]) + b"2.0\n" + b(bodies["mesh.report.web-01"]))
    write(t, "version-garbage", bytes([idx["mesh.api.nodes"], 0x04]) + b"1\n{}")
    write(t, "extra-headers", bytes([idx["mesh.latest.web-01"], 0x06]) + b"Mesh-Node: web-01\nMesh-Protocol: 9.9\n\n")
    write(t, "other-node", bytes([idx["mesh.report.web-01"], 0x00]) + b(bodies["mesh.report.web-01"].replace('"web-01"', '"db-01"', 1)))
    write(t, "report-revision-zero", bytes([idx["mesh.report.web-01"], 0x00]) + b(js({"node": "web-01", "revision": 0, "outcome": "applied"})))
    write(t, "duplicate-key", bytes([idx["mesh.report.web-01"], 0x00]) + b'{"node":"web-01","node":"x"}')
    write(t, "bad-utf8", bytes([idx["mesh.enrol"], 0x00]) + b'{"node":"web-01","token":"\xff"}')
    write(t, "not-object", bytes([idx["mesh.api.declare"], 0x00]) + b"[]")
    write(t, "declare-cycle", bytes([idx["mesh.api.declare"], 0x00]) + b(js({"node": "web-01", "declaration": CYCLE})))
    write(t, "declare-dotdot", bytes([idx["mesh.api.declare"], 0x00]) + b(js({"node": "web-01", "declaration": DOTDOT})))
    write(t, "declare-deep", bytes([idx["mesh.api.declare"], 0x00]) + b(js({"node": "web-01", "declaration": DEEP})))
    write(t, "declare-big", bytes([idx["mesh.api.declare"], 0x00]) + b(js({"node": "web-01", "declaration": js(
        {"resources": [{"type": "file", "id": "/etc/f", "properties": {"content": "x" * 1900}}]})})))
    write(t, "too-big", bytes([idx["mesh.api.nodes"], 0x00]) + b" " * 2100)
    write(t, "bad-node-subject", bytes([custom, 0x00]) + b"mesh.report.Bad_Node\n{}")
    write(t, "four-token-subject", bytes([custom, 0x00]) + b"mesh.report.web-01.x\n{}")
    write(t, "unknown-op", bytes([custom, 0x00]) + b"mesh.api.frobnicate\n{}")
    write(t, "decl-subject", bytes([custom, 0x00]) + b"mesh.decl.web-01\n{}")
    write(t, "token-ttl-huge", bytes([idx["mesh.api.token.issue"], 0x00]) + b(js({"node": "web-01", "ttl_ms": 2 ** 63 - 1})))
    write(t, "history-limit", bytes([idx["mesh.api.history"], 0x00]) + b(js({"node": "web-01", "limit": 100000})))
    write(t, "rollback-float", bytes([idx["mesh.api.rollback"], 0x00]) + b'{"node":"web-01","to":1.5}')
    # Regression seeds: before Value::to_json wrote ill-formed UTF-8 as U+FFFD, these error replies
    # (the header or the subject echoed in the message) were not valid JSON.
    write(t, "version-bad-utf8", bytes([idx["mesh.heartbeat.web-01"], 0x04]) + b"1\xff.0\n{}")
    write(t, "subject-bad-utf8", bytes([custom, 0x00]) + b"mesh.report.\xc3\n{}")
    write(t, "bad-time", bytes([idx["mesh.drift.web-01"], 0x00]) + b(js({"node": "web-01", "scan": "s", "at": "2026-13-45T99:00:00Z"})))


def host_corpus():
    t = "fuzz_host_messages"
    # byte 0: 0 declaration, 1 recovery reply, 2 reports; byte 1 bit0: Mesh-Protocol from the first line
    write(t, "decl-pushed", b"\x00\x00" + b(PUSHED_DECL))
    write(t, "decl-good", b"\x00\x00" + b(GOOD_DECL))
    write(t, "decl-other-node", b"\x00\x00" + b(PUSHED_DECL.replace("web-01", "db-01")))
    write(t, "decl-version-2", b"\x00\x01" + b"2.0\n" + b(PUSHED_DECL))
    write(t, "decl-version-empty", b"\x00\x01" + b"\n" + b(PUSHED_DECL))
    # byte 1: bit0 Mesh-Protocol, bit1 Mesh-Node, bit2 Mesh-Revision from input lines (in that
    # order); bit3 unsigned; bit4 signed for another revision
    write(t, "decl-unsigned", b"\x00\x08" + b(PUSHED_DECL))
    write(t, "decl-bad-signature", b"\x00\x10" + b(PUSHED_DECL))
    write(t, "decl-misaddressed", b"\x00\x02" + b"db-01\n" + b(PUSHED_DECL))
    # Regression: a refusal whose reason echoes a header with ill-formed UTF-8 (the refusal report
    # did not parse, and send_refusals() dereferenced the failed parse).
    write(t, "decl-misaddressed-bad-utf8", b"\x00\x02" + b"web-\xff\n" + b(PUSHED_DECL))
    write(t, "decl-version-bad-utf8", b"\x00\x01" + b"1\xc3.0\n" + b(PUSHED_DECL))
    write(t, "decl-revision-negative", b"\x00\x04" + b"-1\n" + b(PUSHED_DECL))
    write(t, "decl-revision-mismatch", b"\x00\x04" + b"9\n" + b(PUSHED_DECL))
    write(t, "decl-no-revision", b"\x00\x04" + b"\n" + b(PUSHED_DECL))
    for name in ("cycle", "duplicate-resource", "deep", "bad-utf8", "nul-path", "dotdot", "surrogates", "numbers"):
        write(t, "decl-" + name, b"\x00\x00" + b(DECLS[name]))
    write(t, "recovery", b"\x01\x00" + b(js({"owned": ["file:/etc/motd", "file:/etc/old", 3], "revision": 3})))
    write(t, "recovery-deep", b"\x01\x00" + b'{"owned":' + b"[" * 10 + b"]" * 10 + b"}")
    write(t, "recovery-not-array", b"\x01\x00" + b'{"owned":"x"}')
    write(t, "reports", b"\x02\x00\x07failed\nfile:/etc/motd\nopen /etc/motd: Permission denied\nfile:/etc/motd\n"
                        b"file:/etc/issue\nfile:/etc/motd\nfailed\nread-back mismatch\nproperties.mode\n\x01"
                        b"file:/etc/motd\nproperties.content differs\nrepaired")
    write(t, "reports-control-chars", b"\x02\x00\x01applied\n\n\x01\x02\x1b[31m\t\"\\\n")
    write(t, "reports-latin1", b"\x02\x00\x01failed\npackage:caf\xe9\ndpkg: erreur: le paquet caf\xe9\n")


def fleet_corpus():
    t = "fuzz_fleet"
    tmpl, mod, sel = b"\x00", b"\x01", b"\x02"
    write(t, "tmpl-names", tmpl + b"{{node.name}} serves {{labels.role}} on {{facts.os.id}}/{{facts.arch}}\n")
    write(t, "tmpl-sections", tmpl + b"{{#labels.env}}env={{.}}{{/labels.env}}{{^labels.x}}no x{{/labels.x}}")
    write(t, "tmpl-missing", tmpl + b"{{labels.rack}}")
    write(t, "tmpl-missing-in-inverted", tmpl + b"{{^labels.x}}{{labels.x}}{{/labels.x}}")
    write(t, "tmpl-group", tmpl + b"{{#labels}}{{role}}{{/labels}}{{labels}}")
    write(t, "tmpl-delimiters", tmpl + b"{{=<% %>=}}{{ raw }}<%node.name%><%={{ }}=%>{{node.name}}")
    write(t, "tmpl-unclosed", tmpl + b"{{#labels.env}}{{node.name")
    write(t, "tmpl-partial", tmpl + b"{{> header}}")
    write(t, "tmpl-deep", tmpl + b"{{#labels.env}}" * 120 + b"{{/labels.env}}" * 120)
    write(t, "tmpl-bad-utf8", tmpl + b"\xff{{node.name}}\xc3(")
    web = js({"module": "web", "version": "1.4.2", "resources": [
        {"type": "file", "id": "/etc/{{node.name}}.conf",
         "properties": {"content": "{{labels.role}} {{#labels.env}}{{.}}{{/labels.env}}\n",
                        "lines": ["{{facts.arch}}", {"k": "{{facts.os.id}}"}], "mode": "0644"},
         "requires": ["package:nginx-{{facts.arch}}"]},
        {"type": "package", "id": "nginx-{{facts.arch}}", "properties": {"version": "present"}},
        {"type": "service", "id": "nginx.service", "properties": {"restart_on": ["file:/etc/other"]},
         "requires": ["package:elsewhere"]}]})
    write(t, "module-good", mod + b(web))
    write(t, "module-missing-label", mod + b(web.replace("labels.role", "labels.rack")))
    write(t, "module-bad-template", mod + b(web.replace("{{labels.role}}", "{{labels.role")))
    write(t, "module-collide", mod + b(js({"module": "m", "version": "1", "resources": [
        {"type": "file", "id": "/etc/{{labels.role}}", "properties": {}},
        {"type": "file", "id": "/etc/web", "properties": {}}]})))
    write(t, "module-cycle", mod + b(js({"module": "m", "version": "1", "resources": [
        {"type": "file", "id": "/a", "properties": {}, "requires": ["file:/b"]},
        {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/a"]}]})))
    write(t, "module-bad-name", mod + b(js({"module": "Web", "version": "1 2", "resources": {}})))
    write(t, "module-unknown-key", mod + b(js({"module": "m", "version": "1", "resources": [], "x": 1})))
    write(t, "sel-example", sel + b"name=web-*,role=web,facts.os.id=debian")
    write(t, "sel-spaces", sel + b"  name = web-0? , env= ,team.owner=ops  ")
    write(t, "sel-errors", sel + b"name=web-*,,role,=x,facts.=1,role=a=b")
    write(t, "sel-twice", sel + b"role=web,role=db")
    write(t, "sel-glob", sel + b"name=" + b"*a" * 40 + b"b")


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    json_corpus()
    declaration_corpus()
    config_corpus()
    control_corpus()
    host_corpus()
    fleet_corpus()
    for t in sorted(os.listdir(OUT)):
        print(t, len(os.listdir(os.path.join(OUT, t))))


if __name__ == "__main__":
    main()
