"""fault_server.py ROOT PORT LOG — an HTTP server of the tests' own that
serves ROOT's files (GET with one Range, or whole) and misbehaves as the
first segment of the path says, so that a client's retries, timeouts and
limits meet each fault on purpose:

  /ok/F            the file, as a plain server would
  /etag/F          the same with an ETag (its size and mtime, as nginx
                   makes one), so that the remote cache keeps it
  /503x2/F         the first 2 requests for each (file, range) get 503,
  /429x2/F         ... 429 (SlowDown), then the file
  /resetx2/F       ... a closed connection without an answer
  /shortx2/F       ... a body cut off halfway (Content-Length says all)
  /slow50/F        50 ms before each answer (latency)
  /throttle/F      20 ms before each answer, and every other request for
                   each (file, range) answered 429: a server that keeps
                   pushing back, half of the requests (the live
                   autotuner's io-fewer)
  /cap8000/F       the body through one link of 8000 kB/s that every
                   connection shares (a bandwidth cap on the server's
                   side, unlike nginx's limit_rate, which is per connection
                   and sends each answer's first second at once)
  /always503/F     503, always
  /stall/F         headers, then silence (for the stall timeout)
  /huge/F          a Content-Length of 2**60 and endless bytes
  /loop/N          a redirect to /loop/N+1, for ever
  /norange/F       the whole file with 200, whatever the Range says
  /flipx1/F        the first answer for each range of sample data has one
                   byte flipped (a CRC mismatch)

Standard library only; 127.0.0.1 only; every request is logged as one line
"PATH RANGE STATUS" in LOG.  It stops by itself when its parent's
`timeout` ends it (tests/remote/servers.sh)."""
import http.server
import os
import re
import socketserver
import sys
import threading
import time

ROOT, PORT, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen = {}
lock = threading.Lock()


def count(key):
    with lock:
        seen[key] = seen.get(key, 0) + 1
        return seen[key]


# The one link of /capN/: the time it is next free.  Each chunk takes its
# bytes / rate of the link's time, first come first served, so that all
# connections together get the rate, and an idle link saves no credit.
link = {"free": 0.0}
LINK_CHUNK = 16384


def link_send(wfile, body, rate):
    for i in range(0, len(body), LINK_CHUNK):
        chunk = body[i:i + LINK_CHUNK]
        with lock:
            now = time.monotonic()
            link["free"] = max(now, link["free"]) + len(chunk) / rate
            wait = link["free"] - now
        time.sleep(wait)
        wfile.write(chunk)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out as two writes: with Nagle's algorithm
    # the body waited for the client's delayed ACK of the headers, so every
    # answer took about 40 ms more than its mode says (seen: p50 44.6 ms on
    # /ok/), and a plain server read as latency-bound.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def log(self, status):
        with lock, open(LOG, "a") as f:
            f.write(f"{self.path} {self.headers.get('Range', '-')} {status}\n")

    def answer(self, status, body=b"", headers=()):
        self.log(status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("/", 2)
        mode, name = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
        name = name.split("?", 1)[0]
        if mode == "loop":
            self.log(302)
            self.send_response(302)
            hop = int(re.match(r"\d*", name).group() or 0)
            self.send_header("Location", f"/loop/{hop + 1}.stoke")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            return self.answer(404, b"no such file\n")
        # Only the range is read: a benchmark's shards are megabytes, its
        # ranges kilobytes (bench/remote.sh).
        size = os.path.getsize(path)
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        lo, hi = 0, size - 1
        if m:
            lo = int(m.group(1))
            hi = min(int(m.group(2)) if m.group(2) else hi, size - 1)
            if lo > hi:
                return self.answer(416, b"", [("Content-Range", f"bytes */{size}")])
        partial = m is not None and mode != "norange"
        if mode == "norange":
            lo, hi = 0, size - 1
        with open(path, "rb") as f:
            f.seek(lo)
            body = f.read(hi - lo + 1)
        n = count((mode, name, rng))
        fault = re.fullmatch(r"(503|429|reset|short|flip)x(\d+)", mode)
        # A flip damages sample data only: a packed header or index has no
        # second chance (it is the shard's own description).
        if fault and fault.group(1) == "flip" and not (64 < lo and hi < size - 1):
            fault = None
        if mode == "always503" or (fault and n <= int(fault.group(2))):
            kind = "503" if mode == "always503" else fault.group(1)
            if kind in ("503", "429"):
                return self.answer(int(kind), b"slow down\n", [("Retry-After", "0")])
            if kind == "reset":
                self.log("reset")
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if kind == "short":
                self.log("short")
                self.send_response(206 if partial else 200)
                if partial:
                    self.send_header("Content-Range", f"bytes {lo}-{hi}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if kind == "flip" and body:
                body = bytes([body[0] ^ 0xFF]) + body[1:]
        if mode == "throttle":
            time.sleep(0.02)
            if n % 2 == 1:
                return self.answer(429, b"slow down\n", [("Retry-After", "0")])
        if mode.startswith("slow"):
            time.sleep(int(mode[4:]) / 1000)
        if mode == "stall":
            self.log("stall")
            self.send_response(206 if partial else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
            return
        if mode == "huge":
            self.log("huge")
            self.send_response(200)
            self.send_header("Content-Length", str(2 ** 60))
            self.end_headers()
            try:
                for _ in range(1 << 16):
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                pass
            self.close_connection = True
            return
        headers = [("Content-Range", f"bytes {lo}-{hi}/{size}")] if partial else []
        if mode == "etag":
            st = os.stat(path)
            headers.append(("ETag", '"%x-%x"' % (int(st.st_mtime), st.st_size)))
        cap = re.fullmatch(r"cap(\d+)", mode)
        if cap:
            self.log(206 if partial else 200)
            self.send_response(206 if partial else 200)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            return link_send(self.wfile, body, int(cap.group(1)) * 1000)
        self.answer(206 if partial else 200, body, headers)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server(("127.0.0.1", PORT), Handler).serve_forever()
