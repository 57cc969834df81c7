#!/bin/sh
# The module graph, drawn from Package.swift (`swift package dump-package`): each target of the
# package (tests aside) and the modules it declares it depends on. With --check (scripts/test.sh,
# through scripts/check-structure.sh): fails when
#   - docs/design.md's copy (between <!-- module-graph --> and <!-- /module-graph -->) differs,
#   - a module imports one of the package's modules, or a package product's module, that it does
#     not declare (a transitive edge the compiler would let through),
#   - a module declares a dependency it never imports (an unused edge).
# Without --check it prints the table, to paste into docs/design.md.
set -e
cd "$(dirname "$0")/.."
DUMP=$(mktemp "${TMPDIR:-/tmp}/module-graph.XXXXXX")
trap 'rm -f "$DUMP"' EXIT
swift package dump-package >"$DUMP"
python3 - "$DUMP" "$@" <<'PY'
import json, os, re, sys
check = "--check" in sys.argv[2:]
d = json.load(open(sys.argv[1]))
own = {t["name"] for t in d["targets"]}
rows, problems, external = [], [], set()
for t in d["targets"]:
    if t["type"] == "test":
        continue
    deps = []
    for x in t["dependencies"]:
        kind, v = next(iter(x.items()))
        deps.append(v[0])
        if kind == "product":
            external.add(v[0])
    rows.append("| `%s` | %s |" % (t["name"], ", ".join("`%s`" % n for n in deps) or "—"))
    if t["type"] == "system":
        continue
    path = t.get("path") or "Sources/" + t["name"]
    imported = set()
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith(".swift"):
                for line in open(os.path.join(root, f), encoding="utf-8"):
                    m = re.match(r"\s*(?:@testable |@_exported |@preconcurrency )*(?:(?:public|package|internal) )?import (?:struct |enum |class |func |protocol )?([A-Za-z_][A-Za-z0-9_]*)", line)
                    if m:
                        imported.add(m.group(1))
    for m in sorted(imported):
        if (m in own or m in external) and m not in deps and m != t["name"]:
            problems.append("%s imports %s, which Package.swift does not declare for it" % (t["name"], m))
    for m in deps:
        if m not in imported and m not in ("CLibFuzzer",):
            problems.append("%s declares %s but never imports it" % (t["name"], m))
table = "| module | depends on (Package.swift) |\n|---|---|\n" + "\n".join(rows) + "\n"
if not check:
    sys.stdout.write(table)
    sys.exit(0)
doc = open("docs/design.md", encoding="utf-8").read()
m = re.search(r"<!-- module-graph -->\n(.*?)<!-- /module-graph -->", doc, re.S)
if not m:
    problems.append("docs/design.md has no <!-- module-graph --> block")
elif m.group(1) != table:
    problems.append("docs/design.md's module graph differs from Package.swift: paste `sh scripts/module-graph.sh` into it")
for p in problems:
    print("module-graph: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
