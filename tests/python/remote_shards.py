"""What the remote-storage tests (test_stoke_remote, test_stoke_s3) share:
packed shards made from an image folder, the batches of a few epochs, and
their comparison bit for bit."""
import json
import subprocess

from conftest import cli_path

# The loader settings both compare local and remote reads under.
KW = dict(batch_size=4, shuffle=True, seed=3, output="torch",
          transform="random-resized-crop=32,flip,chw,u8")


def pack_shards(train, out, work, shard_size="12KB"):
    """`stoke pack` of the folder train into out/train-*.stoke (work holds
    its JSON); the number of shards made."""
    r = subprocess.run([cli_path(), "pack", str(train), "-o",
                        str(out / "train"), "--shard-size", shard_size,
                        "--json", str(work / "pack.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads((work / "pack.json").read_text())["shards"]


def epochs(loader, n=2):
    out = []
    for _ in range(n):
        for x, y in loader:
            out.append((x.clone(), y.clone()))
    return out


def same(a, b):
    import torch
    assert len(a) == len(b) and len(a) > 0
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
