"""stoke.Loader over shards in S3 (s3://bucket/prefix and a brace list of
keys), served by s3rver behind tests/remote/s3_server.js's SigV4 check on
127.0.0.1: the same batches, bit for bit, as the local shards, packed and
tar, at 1 and 3 workers; a wrong secret is refused naming the s3:// URL,
403 and SignatureDoesNotMatch, and neither the secret nor the token shows
in the error, report() or save_json().  The server runs under `timeout`
and stops by itself.  Without node or s3rver (scripts/deps.sh installs
them) the module is skipped, as test_stoke_remote is without nginx."""
import os
import shutil
import subprocess
import tarfile
import time

import pytest

# The servers' and uploads' processes run without the sanitizer runtime
# that a sanitizer build preloads into the test's Python: node and curl
# under it hung (ASan CI: the first upload timed out).
TOOL_ENV = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "TSAN_OPTIONS",
                         "UBSAN_OPTIONS")}

from conftest import ROOT, make_image_folder
from remote_shards import KW, epochs, pack_shards, same

stoke = pytest.importorskip("stoke")
torch = pytest.importorskip("torch")

MODULES = os.environ.get("S3RVER_MODULES",
                         "/usr/local/lib/stoke-test-s3rver/node_modules")
NODE = shutil.which("node")
LIFETIME = "300"  # seconds: a hang guard only
BUCKET = "stoke-test"
KEY_ID = "STOKETESTKEYID0002"
SECRET = "PySekr1tS3Key/not+a+real+one"
TOKEN = "PyTok3nS3ssion-not-a-real-one"


def put(endpoint, path, key):
    subprocess.run(["curl", "-sS", "--fail", "-T", str(path), "--aws-sigv4",
                    "aws:amz:us-east-1:s3", "--user", f"{KEY_ID}:{SECRET}",
                    "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                    "-H", f"x-amz-security-token: {TOKEN}",
                    f"{endpoint}/{BUCKET}/{key}"],
                   check=True, capture_output=True, timeout=60, env=TOOL_ENV)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    if not NODE or not os.path.exists(os.path.join(MODULES, "s3rver")) \
            or not shutil.which("curl"):
        pytest.skip("node, curl or s3rver missing (scripts/deps.sh)")
    tmp = tmp_path_factory.mktemp("s3")
    make_image_folder(tmp / "train", classes=3, per_class=6)
    local = tmp / "local"
    local.mkdir()
    shards = pack_shards(tmp / "train", local, tmp)
    assert shards >= 3
    classes = sorted(os.listdir(tmp / "train"))
    for s in range(2):
        with tarfile.open(local / f"shard-{s}.tar", "w",
                          format=tarfile.USTAR_FORMAT) as t:
            for ci, c in enumerate(classes):
                for f in sorted(os.listdir(tmp / "train" / c))[s::2]:
                    key = f"{c}_{f.split('.')[0]}"
                    t.add(tmp / "train" / c / f, key + ".jpg")
                    cls = tmp / (key + ".cls")
                    cls.write_text(str(ci))
                    t.add(cls, key + ".cls")
    port_file = tmp / "s3.port"
    proc = subprocess.Popen(
        ["timeout", LIFETIME, NODE, "--openssl-legacy-provider",
         str(ROOT / "tests/remote/s3_server.js"), MODULES, str(tmp / "data"),
         BUCKET, KEY_ID, SECRET, TOKEN, str(port_file), str(tmp / "s3.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert port_file.exists(), "the S3 server did not start"
        endpoint = f"http://127.0.0.1:{port_file.read_text()}"
        for p in sorted(local.glob("train-*.stoke")):
            put(endpoint, p, f"packed/{p.name}")
        for p in sorted(local.glob("shard-*.tar")):
            put(endpoint, p, f"tars/{p.name}")
        yield {"tmp": tmp, "local": local, "last": shards - 1,
               "endpoint": endpoint, "log": tmp / "s3.log"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def aws(s3, monkeypatch):
    """The AWS_* settings for the test server; a page of 2 keys, so that a
    listing goes on by NextContinuationToken."""
    for k, v in {"AWS_ENDPOINT_URL": s3["endpoint"], "AWS_REGION": "us-east-1",
                 "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
                 "AWS_SESSION_TOKEN": TOKEN,
                 "STOKE_TEST_S3_MAX_KEYS": "2",
                 # never the AWS files of whoever runs the tests
                 "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                 "AWS_CONFIG_FILE": "/nonexistent/config"}.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    return s3


@pytest.mark.parametrize("workers,io", [(1, 1), (3, 8)])
def test_packed_s3_bit_identical_to_local(aws, workers, io):
    last = aws["last"]
    local = epochs(stoke.Loader(
        str(aws["local"] / f"train-{{00000..{last:05d}}}.stoke"),
        num_workers=workers, **KW))
    for spec in (f"s3://{BUCKET}/packed/",
                 f"s3://{BUCKET}/packed/train-{{00000..{last:05d}}}.stoke"):
        got = epochs(stoke.Loader(spec, num_workers=workers,
                                  io_concurrency=io, **KW))
        same(local, got)
    log = aws["log"].read_text()
    assert "continuation-token=" in log, log[:2000]


def test_tar_s3_bit_identical_to_local(aws):
    local = epochs(stoke.Loader(str(aws["local"] / "shard-{0..1}.tar"),
                                num_workers=2, **KW))
    got = epochs(stoke.Loader(f"s3://{BUCKET}/tars/", num_workers=2, **KW))
    same(local, got)


def test_wrong_secret_refused_and_never_shown(aws, monkeypatch, tmp_path):
    wrong = "PyWr0ngS3cretNeverShown"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    with pytest.raises(stoke.Error) as e:
        stoke.Loader(f"s3://{BUCKET}/packed/", num_workers=1, **KW)
    msg = str(e.value)
    assert wrong not in msg and TOKEN not in msg, msg
    assert "s3://stoke-test/" in msg and "403" in msg, msg
    assert "SignatureDoesNotMatch" in msg, msg
    # A good loader's report, stats, trace and saved run: no secret.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    loader = stoke.Loader(f"s3://{BUCKET}/packed/", num_workers=1, trace=True,
                          **KW)
    epochs(loader, 1)
    loader.save_json(str(tmp_path / "run.json"))
    loader.save_trace(str(tmp_path / "trace.json"))
    text = (loader.report() + repr(loader) + str(loader.stats()) +
            (tmp_path / "run.json").read_text() +
            (tmp_path / "trace.json").read_text())
    assert SECRET not in text and TOKEN not in text
    assert "s3://stoke-test/packed/" in text
