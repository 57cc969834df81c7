"""Runs the shell examples of the README and the DocC articles, each ```sh block that uses
`offline-store`, in a temporary directory of its own, with the built tools first on PATH. A block
fails the run when one of its commands exits non-zero (the block is run by `sh -e`); the error names
the document and line, and shows the block's output.

    python3 scripts/doc-snippets/run-shell.py BIN_DIR DOC.md...
    DOC_SNIPPET_VERBOSE=1 ... also shows the output of the blocks that pass.

Markers (an HTML comment on the line before the fence; DocC and GitHub render nothing for it):
  <!-- snippet: skip REASON -->           not run (the reason says what runs it instead)
  <!-- snippet: given sample -->          run after a prelude: the EPM sample as files (metadata.xml,
                                          Products.json, ...), the store `server` holding it and
                                          served on 127.0.0.1:8080, and the store `s`: an offline copy
                                          of it (serviceRoot the server, a defining request per set),
                                          refreshed. A block with no marker starts in an empty directory.
A ```sh block that does not name `offline-store` is not run (it shows other tools).

What is rewritten so that a block runs unattended, and nothing else:
  - `swift run NAME` is NAME, already built (BIN_DIR is first on PATH);
  - each port of 127.0.0.1:PORT, localhost:PORT or --port PORT is a free port, the same one
    throughout the block (PORT 0 stays 0);
  - a paths under /tmp/ is under the block's own directory;
  - a line that starts a server (`offline-store serve`, `embedded-service`), with `&` or without,
    runs in the background until the block ends; the next line runs once the server has printed
    the line naming its URL ("... at http://..."). Servers are stopped by their PID at the end.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile

SHELLS = {"sh", "bash", "shell"}
SERVERS = re.compile(r"^\s*(offline-store\s+serve|embedded-service)\b")
TIMEOUT = float(os.environ.get("DOC_SNIPPET_SECONDS", "180"))

# The prelude of `given sample`; 8080 in it is rewritten as in the block.
SAMPLE = """offline-store sample --store server --files . >/dev/null
offline-store serve --store server --port 8080
cat > config.json <<'JSON'
{"serviceRoot": "http://127.0.0.1:8080/",
 "definingRequests": [{"name": "Partners", "url": "BusinessPartners"}, {"name": "Products", "url": "Products"},
                      {"name": "Orders", "url": "SalesOrders"}, {"name": "Items", "url": "SalesOrderItems"}]}
JSON
offline-store init --store s --metadata metadata.xml --config config.json >/dev/null
offline-store refresh --store s >/dev/null
"""

# Waits until the server started last prints its URL, or fails with what it said.
HELPERS = r"""
_doc_pids=""
# The block's own status, whatever stopping the servers returns (a server stopped by SIGTERM: 143).
trap '_doc_status=$?; for p in $_doc_pids; do kill "$p" 2>/dev/null; done
      for p in $_doc_pids; do wait "$p" 2>/dev/null || true; done; exit $_doc_status' EXIT
_doc_listening() {
    _n=0
    until grep -q ' at http' "$1.out" 2>/dev/null; do
        if ! kill -0 "$2" 2>/dev/null; then echo "doc-snippets: the server exited: $(cat "$1.err")" >&2; exit 1; fi
        _n=$((_n + 1)); [ "$_n" -lt 1200 ] || { echo "doc-snippets: the server did not listen in 60 s" >&2; exit 1; }
        sleep 0.05
    done
}
"""


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, previous = [], 0, ""
    while i < len(lines):
        fence = re.match(r"^\s*```(\w+)\s*$", lines[i])
        if fence:
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if fence.group(1) in SHELLS:
                out.append({"path": path, "line": start + 1, "code": lines[start:j], "marker": previous.strip()})
            i = j + 1
            previous = ""
            continue
        if lines[i].strip():
            previous = lines[i]
        i += 1
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rewrite(code, directory, ports):
    def port(m):
        if m.group(2) == "0":
            return m.group(0)
        ports.setdefault(m.group(2), str(free_port()))
        return m.group(1) + ports[m.group(2)]

    out, servers = [], 0
    for line in code:
        line = re.sub(r"(127\.0\.0\.1:|localhost:|--port[ =])(\d+)", port, line)
        line = re.sub(r"\bswift run (--[\w-]+ )*", "", line)
        line = re.sub(r"(?<![\w.])/tmp/", directory + "/", line)
        if SERVERS.match(line):
            command = re.sub(r"\s&\s*(#.*)?$|\s+#.*$", "", line)
            log = f"{directory}/.server{servers}"
            servers += 1
            out.append(f'{command} >"{log}.out" 2>"{log}.err" &')
            out.append(f'_doc_pids="$_doc_pids $!"; _doc_listening "{log}" $!')
        else:
            out.append(line)
    return out


def main(bin_dir, paths):
    env = dict(os.environ, PATH=os.path.abspath(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    ran, skipped, failed = 0, 0, 0
    for path in paths:
        for b in blocks(path):
            if not any("offline-store" in line for line in b["code"]):
                continue
            if b["marker"].startswith("<!-- snippet: skip"):
                skipped += 1
                continue
            with tempfile.TemporaryDirectory(prefix="offline-store-doc-shell-") as directory:
                ports = {}
                prelude = SAMPLE.split("\n") if b["marker"] == "<!-- snippet: given sample -->" else []
                script = ["set -e", HELPERS, "cd " + directory]
                script += rewrite(prelude, directory, ports) + rewrite(b["code"], directory, ports)
                # Its own process group: on a timeout the block and the servers it started go together.
                p = subprocess.Popen(
                    ["sh", "-c", "\n".join(script)], cwd=directory, env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
                try:
                    output, _ = p.communicate(timeout=TIMEOUT)
                    status = p.returncode
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    output, _ = p.communicate()
                    status = f"nothing: it took more than {TIMEOUT:.0f} s"
            ran += 1
            if os.environ.get("DOC_SNIPPET_VERBOSE") == "1":
                sys.stderr.write(f"{b['path']}:{b['line']}: exited {status}\n{output}\n")
            if status != 0:
                failed += 1
                sys.stderr.write(f"{b['path']}:{b['line']}: error: the shell example exited {status}\n{output}\n")
    sys.stderr.write(f"doc-snippets: {ran} shell examples run, {failed} failed, {skipped} skipped as marked\n")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: run-shell.py BIN_DIR DOC.md...")
    sys.exit(main(sys.argv[1], sys.argv[2:]))
