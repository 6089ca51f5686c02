# servers.sh — real servers for the remote-storage tests (sourced after
# tests/cli/lib.sh, which sets $TMP and $PY).  Everything listens on
# 127.0.0.1 only, on ports the kernel picks, and each server is started
# under `timeout`, so that it stops by itself even when the test dies.
#
#   start_nginx ROOT    http $NGINX_HTTP, https $NGINX_HTTPS (self-signed
#                       certificate $TMP/tls/cert.pem, made here), a
#                       bandwidth cap of $NGINX_SLOW_RATE (nginx's
#                       limit_rate, default 256k) per connection on
#                       $NGINX_SLOW.  nginx sends the first second's worth
#                       of each answer at once (its limit is rate x
#                       (seconds + 1)): only what is past that is paced
#   start_faults ROOT   the fault server (fault_server.py) on $FAULTS
#   start_s3 DIR        an S3 server (s3rver behind s3_server.js's SigV4
#                       check) on $S3_ENDPOINT, bucket $S3_BUCKET, key pair
#                       $S3_KEY_ID / $S3_SECRET with token $S3_TOKEN, its
#                       requests logged to $TMP/s3.log; s3_put FILE KEY
#                       uploads (signed, by curl)
#
# A test without nginx-light or openssl exits 77 (skipped), one without
# node or s3rver too (scripts/deps.sh installs them all).

SERVERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVER_LIFETIME=${SERVER_LIFETIME:-300}   # seconds; a hang guard only
SERVER_PIDS=()

stop_servers() {
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${SERVER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  SERVER_PIDS=()
}
trap 'stop_servers; rm -rf "$TMP"' EXIT

# free_port: a port nobody listens on now (the kernel's pick).
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something accepts on it (10 s at most).
wait_port() {
  "$PY" - "$1" <<'PYEOF' || fail "no server came up on port $1"
import socket, sys, time
end = time.monotonic() + 10
while time.monotonic() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}

start_nginx() {
  local root=$1 nginx
  nginx=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null || true)
  [ -n "$nginx" ] || { echo "nginx-light missing: skipped"; exit 77; }
  command -v openssl >/dev/null || { echo "openssl missing: skipped"; exit 77; }
  local d="$TMP/nginx"
  mkdir -p "$d/logs" "$d/tmp" "$TMP/tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/tls/key.pem" \
    -out "$TMP/tls/cert.pem" 2>/dev/null || fail "openssl could not make a certificate"
  NGINX_HTTP=$(free_port); NGINX_HTTPS=$(free_port); NGINX_SLOW=$(free_port)
  local user=""
  [ "$(id -u)" -eq 0 ] && user="user root;"
  cat >"$d/nginx.conf" <<CONF
$user
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 128; }
http {
  access_log $d/logs/access.log;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$NGINX_HTTP; root $root; }
  server {
    listen 127.0.0.1:$NGINX_HTTPS ssl;
    ssl_certificate $TMP/tls/cert.pem;
    ssl_certificate_key $TMP/tls/key.pem;
    root $root;
  }
  server { listen 127.0.0.1:$NGINX_SLOW; root $root; limit_rate ${NGINX_SLOW_RATE:-256k}; }
}
CONF
  timeout "$SERVER_LIFETIME" "$nginx" -p "$d" -c "$d/nginx.conf" -e "$d/logs/error.log" \
    >"$d/logs/stdout" 2>&1 &
  SERVER_PIDS+=($!)
  wait_port "$NGINX_HTTP"; wait_port "$NGINX_HTTPS"; wait_port "$NGINX_SLOW"
}

start_faults() {
  local root=$1
  FAULTS=$(free_port)
  timeout "$SERVER_LIFETIME" "$PY" "$SERVERS_DIR/fault_server.py" "$root" "$FAULTS" \
    "$TMP/faults.log" >"$TMP/faults.out" 2>&1 &
  SERVER_PIDS+=($!)
  wait_port "$FAULTS"
}

# s3rver 3.7.1 from npm, where scripts/deps.sh puts it (outside the repo).
S3RVER_MODULES=${S3RVER_MODULES:-/usr/local/lib/stoke-test-s3rver/node_modules}
S3_BUCKET=stoke-test
S3_KEY_ID=STOKETESTKEYID0001
S3_SECRET=Sekr1tS3Key/not+a+real+one
S3_TOKEN=Tok3nS3ssion-not-a-real-one

start_s3() {
  local dir=$1 node
  node=$(command -v node || true)
  { [ -n "$node" ] && [ -f "$S3RVER_MODULES/s3rver/package.json" ]; } ||
    { echo "node or s3rver missing (scripts/deps.sh installs them): skipped"; exit 77; }
  # The server's SigV4 check against AWS's published examples first: a
  # check that accepted anything would let every S3 test pass.
  "$node" "$SERVERS_DIR/s3_server.js" --self-test || fail "s3_server.js: its SigV4 check fails AWS's examples"
  mkdir -p "$dir"
  rm -f "$TMP/s3.port"
  # --openssl-legacy-provider: s3rver makes its continuation tokens with
  # DES, which OpenSSL 3 keeps in its legacy provider only.
  timeout "$SERVER_LIFETIME" "$node" --openssl-legacy-provider "$SERVERS_DIR/s3_server.js" \
    "$S3RVER_MODULES" "$dir" "$S3_BUCKET" "$S3_KEY_ID" "$S3_SECRET" "$S3_TOKEN" \
    "$TMP/s3.port" "$TMP/s3.log" >"$TMP/s3.out" 2>&1 &
  SERVER_PIDS+=($!)
  local i
  for i in $(seq 200); do [ -s "$TMP/s3.port" ] && break; sleep 0.05; done
  [ -s "$TMP/s3.port" ] || fail "s3 server did not start: $(cat "$TMP/s3.out")"
  S3_ENDPOINT="http://127.0.0.1:$(cat "$TMP/s3.port")"
  wait_port "$(cat "$TMP/s3.port")"
}

# s3_put FILE KEY [BUCKET REGION]: upload FILE as KEY into BUCKET (default
# $S3_BUCKET, in us-east-1), signed by curl.
s3_put() {
  curl -sS --fail -T "$1" --aws-sigv4 "aws:amz:${4:-us-east-1}:s3" --user "$S3_KEY_ID:$S3_SECRET" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "x-amz-security-token: $S3_TOKEN" \
    --globoff "$S3_ENDPOINT/${3:-$S3_BUCKET}/$2" >/dev/null || fail "upload of $2 failed"
}

# nginx_requests: requests nginx has logged so far.
# make_shards DIR N: the folder $TMP/train packed into DIR/train-*.stoke
# (40 KB shards: $n_shards of them, the last one's number in $last) and cut
# into N tar shards DIR/shard-K.tar (KEY.jpg and KEY.cls each, WebDataset's
# layout), shard K holding every N-th file of each class from the K-th.
make_shards() {
  mkdir -p "$1"
  run_stoke pack "$TMP/train" -o "$1/train" --shard-size 40KB --json "$TMP/pack.json"
  [ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
  n_shards=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["shards"])' "$TMP/pack.json")
  last=$(printf '%05d' $((n_shards - 1)))
  "$PY" - "$TMP/train" "$1" "$2" <<'PYEOF'
import os, sys, tarfile
root, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
classes = sorted(os.listdir(root))
for s in range(n):
    with tarfile.open(os.path.join(out, "shard-%d.tar" % s), "w", format=tarfile.USTAR_FORMAT) as t:
        for ci, c in enumerate(classes):
            for f in sorted(os.listdir(os.path.join(root, c)))[s::n]:
                key = "%s_%s" % (c, f.split(".")[0])
                t.add(os.path.join(root, c, f), key + ".jpg")
                cls = os.path.join(out, key + ".cls")
                open(cls, "w").write(str(ci))
                t.add(cls, key + ".cls")
                os.remove(cls)
PYEOF
}

nginx_requests() { wc -l <"$TMP/nginx/logs/access.log"; }
