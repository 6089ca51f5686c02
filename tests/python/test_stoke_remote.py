"""stoke.Loader over shards given as URLs, served by real servers started
here on 127.0.0.1 (nginx for HTTP, the tests' own fault server,
tests/remote/fault_server.py): the same batches, bit for bit, as the local
shards at any worker count and io_concurrency; on_error="replace" for a
sample the server keeps damaging; no secret of a URL in any output; bad
options refused.  Each server runs under `timeout` and stops by itself."""
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from conftest import ROOT, STRICT, make_image_folder
from remote_shards import KW, epochs, pack_shards, same

stoke = pytest.importorskip("stoke")
torch = pytest.importorskip("torch")

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx"
                                  if os.path.exists("/usr/sbin/nginx") else None)
LIFETIME = "300"  # seconds: a hang guard only
SECRET = "Sekr1tPassw0rd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no server came up on port {port}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if not NGINX:
        pytest.skip("nginx-light missing")
    tmp = tmp_path_factory.mktemp("remote")
    make_image_folder(tmp / "train", classes=3, per_class=6)
    www = tmp / "www"
    www.mkdir()
    shards = pack_shards(tmp / "train", www, tmp)
    assert shards >= 2
    d = tmp / "nginx"
    (d / "logs").mkdir(parents=True)
    (d / "tmp").mkdir()
    port = free_port()
    user = "user root;" if os.geteuid() == 0 else ""
    temps = "".join(f"  {k}_temp_path {d}/tmp/{k};\n"
                    for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (d / "nginx.conf").write_text(f"""{user}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/logs/error.log;
events {{ worker_connections 128; }}
http {{
  access_log {d}/logs/access.log;
{temps}  server {{ listen 127.0.0.1:{port}; root {www}; }}
}}
""")
    procs = [subprocess.Popen(["timeout", LIFETIME, NGINX, "-p", str(d), "-c",
                               str(d / "nginx.conf"), "-e",
                               str(d / "logs/error.log")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    fport = free_port()
    procs.append(subprocess.Popen(
        ["timeout", LIFETIME, "/usr/bin/python3",
         str(ROOT / "tests/remote/fault_server.py"), str(www), str(fport),
         str(tmp / "faults.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        wait_port(port)
        wait_port(fport)
        yield {"tmp": tmp, "www": www, "last": shards - 1,
               "http": f"http://127.0.0.1:{port}",
               "faults": f"http://127.0.0.1:{fport}"}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def pattern(base, last):
    return f"{base}/train-{{00000..{last:05d}}}.stoke"


def test_bit_identical_to_local_at_any_workers_and_concurrency(served):
    local = epochs(stoke.Loader(pattern(served["www"], served["last"]),
                                num_workers=2, **KW))
    for workers, io in ((0, 1), (1, 4), (3, 2)):
        remote = stoke.Loader(pattern(served["http"], served["last"]),
                              num_workers=workers, io_concurrency=io, **KW)
        same(local, epochs(remote))


def test_block_order_read_ahead_bit_identical(served):
    kw = dict(KW, shuffle="block=16KiB")
    local = epochs(stoke.Loader(pattern(served["www"], served["last"]),
                                num_workers=1, **kw))
    for workers, io in ((1, 1), (3, 4)):
        remote = stoke.Loader(pattern(served["http"], served["last"]),
                              num_workers=workers, io_concurrency=io, **kw)
        same(local, epochs(remote))


def tar_shards(served):
    """The image folder cut into two WebDataset tar shards under the web
    root (once); their pattern under a base."""
    www, train = served["www"], served["tmp"] / "train"
    if not (www / "shard-1.tar").exists():
        import tarfile
        classes = sorted(os.listdir(train))
        for s in range(2):
            with tarfile.open(www / f"shard-{s}.tar", "w",
                              format=tarfile.USTAR_FORMAT) as t:
                for ci, c in enumerate(classes):
                    for f in sorted(os.listdir(train / c))[s::2]:
                        key = f"{c}_{f.split('.')[0]}"
                        t.add(train / c / f, key + ".jpg")
                        cls = served["tmp"] / (key + ".cls")
                        cls.write_text(str(ci))
                        t.add(cls, key + ".cls")
    return lambda base: f"{base}/shard-{{0..1}}.tar"


def test_tar_streamed_bit_identical_with_a_fetch_section(served):
    # Streamed by Range requests (no spool): the same batches as the local
    # shards in either order, at any workers and io_concurrency, and the
    # reads show in the stats' fetch section as a packed shard's do.
    tars = tar_shards(served)
    for shuffle in (True, "block=16KiB"):
        kw = dict(KW, shuffle=shuffle)
        local = epochs(stoke.Loader(tars(served["www"]), num_workers=1, **kw))
        for workers, io in ((1, 1), (3, 4)):
            remote = stoke.Loader(tars(served["http"]), num_workers=workers,
                                  io_concurrency=io, **kw)
            same(local, epochs(remote))
    f = remote.stats()["fetch"]
    assert f["requests"] > 0 and f["bytes"] > 0, f
    assert f["io_concurrency"] == 4, f


def test_replace_a_sample_the_server_keeps_damaging(served):
    # /flipx99/ flips a byte of every answer for sample data: each read of
    # a sample fails its CRC-32 twice and the sample is bad.
    url = pattern(served["faults"] + "/flipx99", served["last"])
    loader = stoke.Loader(url, num_workers=2, on_error="replace",
                          max_failures=None, retry_backoff="1ms",
                          max_replace_tries=2, **KW)
    with pytest.raises(stoke.Error) as e:
        epochs(loader, 1)
    assert "CRC-32 mismatch" in str(e.value)
    # Every sample is damaged, so replacing fails too; one bad shard of
    # good ones is replaced from the good ones and keeps the batch size.
    mixed = [f"{served['faults']}/flipx99/train-00000.stoke",
             pattern(served["http"], served["last"]).replace("{00000..", "{00001..")]
    loader = stoke.Loader(mixed, num_workers=2, on_error="replace",
                          max_failures=100, **KW)
    batches = epochs(loader, 1)
    assert len(batches) == len(loader)
    assert all(x.shape[0] == 4 for x, _ in batches[:-1])
    assert "CRC-32 mismatch" in loader.report()


def test_no_secret_in_any_output(served, tmp_path):
    host = served["http"].split("//", 1)[1]
    url = (f"http://stoke:{SECRET}@{host}/train-{{00000..{served['last']:05d}}}"
           f".stoke?X-Amz-Signature={SECRET}")
    loader = stoke.Loader(url, num_workers=1, trace=True, **KW)
    epochs(loader, 1)
    loader.save_json(str(tmp_path / "run.json"))
    loader.save_trace(str(tmp_path / "trace.json"))
    text = (loader.report() + repr(loader) + str(loader.stats()) +
            (tmp_path / "run.json").read_text() +
            (tmp_path / "trace.json").read_text())
    assert SECRET not in text
    assert f"http://{host}/train-" in text
    bad = f"http://stoke:{SECRET}@{served['faults'].split('//')[1]}/always503/train-00000.stoke?sig={SECRET}"
    with pytest.raises(stoke.Error) as e:
        stoke.Loader(bad, http_attempts=2, retry_backoff="1ms", **KW)
    assert SECRET not in str(e.value) and "HTTP 503" in str(e.value)
    assert "after 2 attempts" in str(e.value)


def test_bad_remote_options(served):
    url = pattern(served["http"], served["last"])
    for kw in ({"io_concurrency": 0}, {"io_concurrency": 65},
               {"http_attempts": 0}, {"stall_timeout": "0.1ms"},
               {"retry_budget": -1}):
        with pytest.raises(ValueError):
            stoke.Loader(url, **kw, **KW)
    with pytest.raises(TypeError):
        stoke.Loader(url, tls_verify="no", **KW)


def whole_gets(served):
    """Whole-object answers (status 200) nginx has logged so far."""
    log = (served["tmp"] / "nginx" / "logs" / "access.log").read_text()
    return sum(1 for line in log.splitlines() if line.split()[8] == "200")


def test_cache_fetches_each_shard_once_and_reads_bit_identical(served,
                                                                tmp_path):
    local = epochs(stoke.Loader(pattern(served["www"], served["last"]),
                                num_workers=2, **KW))
    url = pattern(served["http"], served["last"])
    cache = tmp_path / "cache"
    before = whole_gets(served)
    first = stoke.Loader(url, num_workers=2, cache=cache, **KW)
    same(local, epochs(first))
    entries = sorted((cache / "remote").glob("r-*.stoke"))
    n = served["last"] + 1
    assert whole_gets(served) - before == n
    assert len(entries) == n
    size_all = sum(e.stat().st_size for e in entries)
    # The cache's counts in stats(): every shard fetched into it, and
    # nothing read remotely while it ran (no fetch section).
    c = first.stats()["remote_cache"]
    assert (c["hits"], c["misses"], c["bytes_fetched"]) == (0, n, size_all), c
    assert "fetch" not in first.stats()
    before = whole_gets(served)
    second = stoke.Loader(url, num_workers=2, cache=cache, **KW)
    same(local, epochs(second))
    assert whole_gets(served) == before  # read from the cache
    c = second.stats()["remote_cache"]
    assert (c["hits"], c["misses"], c["bytes_cached"]) == (n, 0, size_all), c
    # A budget of one shard: at the end only what fits stays.
    small = tmp_path / "small"
    size = entries[0].stat().st_size
    same(local, epochs(stoke.Loader(url, num_workers=1, cache=small,
                                    cache_max=size, io_concurrency=1, **KW)))
    kept = sum(e.stat().st_size for e in (small / "remote").glob("r-*.stoke"))
    assert kept <= size


def test_stats_fetch_section(served):
    local = stoke.Loader(pattern(served["www"], served["last"]),
                         num_workers=1, **KW)
    epochs(local)
    assert "fetch" not in local.stats()
    assert "remote_cache" not in local.stats()
    remote = stoke.Loader(pattern(served["faults"] + "/ok", served["last"]),
                          num_workers=2, io_concurrency=3, **KW)
    epochs(remote)
    f = remote.stats()["fetch"]
    assert set(f) == {"requests", "retries", "throttled", "bytes",
                      "bytes_per_s", "latency_p50_ms", "latency_p95_ms",
                      "in_flight", "io_concurrency", "body_frac",
                      "verdict"}, f
    assert f["requests"] > 0 and f["bytes"] > 0, f
    assert 0 <= f["body_frac"] <= 1, f
    assert f["retries"] == 0 and f["throttled"] == 0, f
    assert f["io_concurrency"] == 3, f


def test_tune_sweeps_io_concurrency_for_remote_shards(served):
    # As `stoke tune` does: after the worker knee, io_concurrency at it,
    # each point a source of its own.  40 ms before each answer makes one
    # request in flight several times slower than four (no time is
    # compared: the knee is checked against the rule on the points).
    url = pattern(served["faults"] + "/slow40", served["last"])
    kw = dict(KW, shuffle="block=2KiB")
    res = stoke.tune(url, workers=[1], prefetch=[2], io_sweep=[1, 4], **kw)
    io = res["io_sweep"]
    pts = io["points"]
    assert [p["io_concurrency"] for p in pts] == [1, 4], pts
    assert all(p["status"] == "measured" for p in pts), pts
    best = max(p["samples_per_s"] for p in pts)
    want = min(p["io_concurrency"] for p in pts
               if p["samples_per_s"] >= (1 - res["tolerance"]) * best)
    assert io["knee"]["io_concurrency"] == want, io
    assert res["io_concurrency"] == want
    assert res["loader_kwargs"]["io_concurrency"] == want, res["loader_kwargs"]
    # The knee's loader_kwargs make a loader.
    epochs(stoke.Loader(pattern(served["http"], served["last"]),
                        **dict(kw, **res["loader_kwargs"])))
    # More values than the ladder's seven: each point its own source.
    many = stoke.tune(url, workers=[1], prefetch=[2],
                      io_sweep=[1, 2, 3, 4, 5, 6, 7, 8, 9], **kw)
    assert [p["io_concurrency"] for p in many["io_sweep"]["points"]] == \
        list(range(1, 10)), many["io_sweep"]
    # "off" sweeps nothing; a local set has nothing to sweep.
    off = stoke.tune(url, workers=[1], prefetch=[2], io_sweep="off", **kw)
    assert "io_sweep" not in off
    local = stoke.tune(pattern(served["www"], served["last"]), workers=[1],
                       prefetch=[2], **kw)
    assert "io_sweep" not in local and "io_concurrency" not in local
    with pytest.raises(ValueError, match="io_sweep"):
        stoke.tune(url, workers=[1], io_sweep=[0], **kw)
