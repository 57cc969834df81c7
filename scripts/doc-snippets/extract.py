"""Writes every ```swift block of the README and the DocC articles into one Swift file, each block
the body of its own function, with #sourceLocation pointing at the document's own line, so that
the compiler's errors name the document and line of a snippet that does not compile.

Markers (an HTML comment on the line before the fence; DocC and GitHub render nothing for it):
  <!-- snippet: skip REASON -->           the block is not Swift a program compiles (Package.swift)
  <!-- snippet: continues -->             the block goes on from the previous block of the same file
  <!-- snippet: given NAME: TYPE, ... --> names the block uses that the text around it provides
Every block is given `store: OfflineStore`, `metadataBytes: [UInt8]` and `configBytes: [UInt8]`.
A block that imports a module other than Foundation and OfflineStore fails unless one of the
documents lists it in a table row that starts with it and names its package (`.package(...)` or
"this package": GettingStarted's table of what snippets import), so a reader learns what to add.
Shell blocks are run, not compiled: scripts/doc-snippets/run-shell.py.
"""
import re
import sys

DEFAULT = ["store: OfflineStore", "metadataBytes: [UInt8]", "configBytes: [UInt8]"]


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, previous = [], 0, ""
    while i < len(lines):
        line = lines[i]
        if line.strip() == "```swift":
            marker = previous.strip()
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append({"path": path, "line": start + 1, "code": lines[start:j], "marker": marker})
            i = j + 1
            previous = ""
            continue
        if line.strip():
            previous = line
        i += 1
    return out


def main(paths):
    imports = {"import OfflineStore", "import Foundation"}
    funcs = []
    skipped = 0
    listed = set()  # the modules a table row names first: | `Logging` | ...
    for path in paths:
        for row in open(path, encoding="utf-8").read().split("\n"):
            m = re.match(r"\|\s*`(\w+)`", row)
            if m and (".package(" in row or "this package" in row):
                listed.add(m.group(1))
    unlisted = []
    for path in paths:
        chain = None
        for b in blocks(path):
            m = b["marker"]
            if m.startswith("<!-- snippet: skip"):
                skipped += 1
                continue
            given = list(DEFAULT)
            g = re.match(r"<!-- snippet: given (.*) -->", m)
            if g:
                given += [x.strip() for x in g.group(1).split(",")]
            body = [(b["line"], None)]  # a #sourceLocation before the block's first line
            for n, text in enumerate(b["code"]):
                if text.startswith("import "):
                    imports.add(text.strip())
                    module = text.split()[1]
                    if module not in ("Foundation", "OfflineStore") and module not in listed:
                        unlisted.append(f"{path}:{b['line'] + n}: error: the snippet imports {module}, which no table of the documents lists with its package")
                    text = ""
                body.append((None, text))
            if m == "<!-- snippet: continues -->" and chain is not None:
                chain["body"] += body
                continue
            chain = {"path": path, "line": b["line"], "given": given, "body": body}
            funcs.append(chain)
    out = sorted(imports) + [""]
    for k, f in enumerate(funcs):
        params = ", ".join(dict.fromkeys(f["given"]))
        out.append(f"func _snippet{k}({params}) async throws {{")
        for line, text in f["body"]:
            if line is not None:
                out.append(f'#sourceLocation(file: "{f["path"]}", line: {line})')
            else:
                out.append(text)
        out.append("#sourceLocation()")
        out.append("}")
    sys.stdout.write("\n".join(out) + "\n")
    sys.stderr.write(f"doc-snippets: {len(funcs)} snippets from {len(paths)} documents, {skipped} skipped as marked\n")
    if unlisted:
        sys.stderr.write("\n".join(unlisted) + "\n")
        sys.exit(1)


main(sys.argv[1:])
