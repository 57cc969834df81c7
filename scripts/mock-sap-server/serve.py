"""mock-sap on 127.0.0.1 with a bounded lifetime, for the project's tests (see ../mock-sap-server.sh).

It prints ``mock-sap serving at URL`` as its first line (the port the system chose unless
``--port``), writes its PID to ``--pid-file``, and stops after ``--lifetime`` seconds or on
SIGTERM/SIGINT. Everything else is mock-sap's own server (``mocksap.make_server``), unchanged.
"""
import argparse
import os
import signal
import sys
import threading

from mocksap import Config, make_server


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lifetime", type=float, required=True, help="seconds before it stops by itself")
    p.add_argument("--pid-file")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--db", default=":memory:", help="SQLite file for its data (default: in memory)")
    p.add_argument("--require-if-match", action="store_true")
    p.add_argument("--no-csrf", action="store_true")
    p.add_argument("--auth", help="USER:PASSWORD for HTTP basic authentication")
    p.add_argument("--oauth", help="CLIENT_ID:SECRET for OAuth 2.0 bearer tokens")
    p.add_argument("--token-ttl", type=int, default=3600)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--clock", default="")
    p.add_argument("--slow-ms", type=int, default=3000)
    p.add_argument("--latency-ms", type=int, default=0, help="delay every answer by this much")
    a = p.parse_args()

    httpd = make_server(Config(
        host="127.0.0.1", port=a.port, db_path=a.db, csrf=not a.no_csrf, quiet=True,
        require_if_match=a.require_if_match, basic_auth=a.auth, oauth=a.oauth,
        token_ttl=a.token_ttl, seed_value=a.seed, clock=a.clock, slow_ms=a.slow_ms,
        latency_ms=a.latency_ms))
    if a.pid_file:
        with open(a.pid_file, "w") as f:
            f.write(str(os.getpid()))
    print(f"mock-sap serving at http://127.0.0.1:{httpd.server_address[1]}", flush=True)

    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    stop.wait(a.lifetime)
    httpd.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
