#!/usr/bin/python3
"""A webhook receiver for dtrun's events: for the tests, and for users who want one.

    receiver.py [--port N] [--port-file F] [--out events.jsonl] [--secret-env NAME] [--mode MODE]
                [--raw DIR] [--tls CERT KEY]

Every POST body (one event object, or an array of them) is checked and each
event appended to --out as one line. With --secret-env, the body must carry
X-Dtrun-Timestamp and X-Dtrun-Signature: sha256=<HMAC-SHA256(secret,
timestamp "." body)>; a wrong or missing signature, or a timestamp more than
5 minutes away (a replay), is answered 401 and recorded in --out as
{"rejected": reason}. Modes make it misbehave, for the tests:

    ok            200 (default)
    stall:S       hold every request S seconds, then answer 200
    close         close the connection without answering
    status:C[:R]  answer HTTP C (e.g. 429, 500), with Retry-After: R if given
    flaky:P       answer 500 to a random fraction P of the requests (0.5: half), 200 to the rest
    half          take the events, then close the connection halfway through a 200 (a receiver
                  that dies while answering: the sender retries, the ids tell the copies apart)
    refuse:S      take this request (answering "Connection: close"), then refuse connections for
                  S seconds (nothing listens on the port), then answer 200 again

With --fail-from REGEX, requests are answered 200 until one whose body matches REGEX; that one
and the next --fail-count - 1 get --mode (all later ones, without --fail-count), then 200 again:
a failure that starts at a chosen event, however the run is timed.

With --raw, each request's body and its X-Dtrun-* and Authorization headers are kept in DIR/N.body
and DIR/N.headers (N counting from 1), so a test can replay or alter one.
With --tls it speaks HTTPS with that certificate (a self-signed one shows that
dtrun verifies certificates unless told not to).
POST /_mode with the mode as body switches it at run time (GET /_stats says
how many requests, events and connections were seen). The port is written to
--port-file once listening (port 0 picks a free one).
"""
import argparse
import hashlib
import hmac
import json
import os
import re
import socket
import random
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
flaky = random.Random(1)  # the flaky mode's coin, seeded: a soak's failures can be replayed
state = {"mode": "ok", "requests": 0, "events": 0, "connections": 0, "rejected": 0}
plan = {"from": None, "mode": "ok", "count": 0, "left": 0}  # --fail-from: when and how long the mode applies
refuse_until = [0.0]  # time.monotonic() before which nothing is answered (refuse:S)


def record(out, items):
    with lock, open(out, "a") as f:
        for item in items:
            f.write(json.dumps(item, separators=(",", ":")) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: dtrun reuses its connection
    # one send per answer, and no Nagle wait: with headers and body written apart, each request
    # would sit out the client's 40 ms delayed ACK
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        with lock:
            state["connections"] += 1

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_stats":
            with lock:
                body = json.dumps(state).encode()
            return self.answer(200, body, [("Content-Type", "application/json")])
        self.answer(404)

    def check_signature(self, body):
        secret = os.environ.get(self.server.secret_env, "").encode()
        ts = self.headers.get("X-Dtrun-Timestamp")
        sig = self.headers.get("X-Dtrun-Signature", "")
        if ts is None or not sig.startswith("sha256="):
            return "unsigned"
        want = hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, sig[len("sha256="):]):
            return "bad signature"
        if abs(time.time() - int(ts)) > 300:
            return "stale timestamp"
        return None

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/_mode":
            with lock:
                state["mode"] = body.decode().strip()
                plan["left"] = 0
            return self.answer(200)
        if time.monotonic() < refuse_until[0]:  # the listener is about to close (refuse:S)
            self.close_connection = True
            self.connection.shutdown(2)
            return
        with lock:
            if plan["from"] and plan["from"].search(body.decode("utf-8", "replace")):
                plan["from"] = None
                state["mode"], plan["left"] = plan["mode"], plan["count"]
            mode = state["mode"]
            if plan["left"] > 0:
                plan["left"] -= 1
                if plan["left"] == 0:
                    state["mode"] = "ok"  # after this one
            state["requests"] += 1
            n = state["requests"]
        if self.server.raw:
            with open(os.path.join(self.server.raw, "%d.body" % n), "wb") as f:
                f.write(body)
            with open(os.path.join(self.server.raw, "%d.headers" % n), "w") as f:
                for k in ("X-Dtrun-Timestamp", "X-Dtrun-Signature", "Authorization"):
                    if k in self.headers:
                        f.write("%s: %s\n" % (k, self.headers[k]))
        if mode == "close":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        closing = ()
        if mode.startswith("refuse:"):
            with lock:
                refuse_until[0] = time.monotonic() + float(mode.split(":")[1])
                state["mode"] = "ok"  # once listening again
            self.server.socket.shutdown(socket.SHUT_RDWR)  # connections are refused from now on
            self.server.socket.close()
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            closing = [("Connection", "close")]
        if mode == "half":
            try:
                doc = json.loads(body)
                items = doc if isinstance(doc, list) else [doc]
                with lock:
                    state["events"] += len(items)
                record(self.server.out, items)
            except ValueError:
                pass
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nok")  # 98 bytes short
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if mode.startswith("stall:"):
            time.sleep(float(mode.split(":")[1]))
        elif mode.startswith("status:"):
            parts = mode.split(":")
            headers = [("Retry-After", parts[2])] if len(parts) > 2 else []
            return self.answer(int(parts[1]), b"receiver told to fail", headers)
        elif mode.startswith("flaky:") and flaky.random() < float(mode.split(":")[1]):
            return self.answer(500, b"receiver failing this one at random")
        if self.server.secret_env:
            why = self.check_signature(body)
            if why:
                with lock:
                    state["rejected"] += 1
                record(self.server.out, [{"rejected": why}])
                return self.answer(401, why.encode())
        try:
            doc = json.loads(body)
        except ValueError as e:
            return self.answer(400, ("not JSON: %s" % e).encode())
        items = doc if isinstance(doc, list) else [doc]
        with lock:
            state["events"] += len(items)
        record(self.server.out, items)
        self.answer(200, b"ok", closing)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--out", default="received.jsonl")
    ap.add_argument("--secret-env")
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--raw")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--fail-from", metavar="REGEX")
    ap.add_argument("--fail-count", type=int, default=0)
    a = ap.parse_args()
    state["mode"] = a.mode
    if a.fail_from:
        state["mode"] = "ok"
        plan.update({"from": re.compile(a.fail_from), "mode": a.mode, "count": a.fail_count})

    def listen(port):
        srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        srv.daemon_threads = True
        srv.out, srv.secret_env, srv.raw = a.out, a.secret_env, a.raw
        if a.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(a.tls[0], a.tls[1])
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        return srv

    srv = listen(a.port)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(a.port_file + ".tmp", a.port_file)
    try:
        while True:
            srv.serve_forever()  # until a refuse:S shuts the listener
            srv.server_close()
            time.sleep(max(0.0, refuse_until[0] - time.monotonic()))
            srv = listen(port)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
