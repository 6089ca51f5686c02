#!/usr/bin/env python3
"""make_tars.py TRAIN OUT PER_SHARD - an ImageFolder (TRAIN/class/x.jpg) as
WebDataset-style tar shards OUT/train-0000.tar, ...: key.jpg and key.cls
(the class's index in sorted order, as text), PER_SHARD samples a shard, the
keys numbered in the sorted file order.  The image benchmarks' corpus
(bench/corpus.sh) and the remote benchmark (bench/remote.sh) both use it."""
import glob
import io
import os
import sys
import tarfile


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    train, out, per = sys.argv[1], sys.argv[2], int(sys.argv[3])
    files = sorted(glob.glob(os.path.join(train, "*", "*.jpg")))
    if not files:
        sys.exit("make_tars.py: no %s/*/*.jpg" % train)
    classes = sorted({os.path.basename(os.path.dirname(f)) for f in files})
    os.makedirs(out, exist_ok=True)
    for s in range(0, len(files), per):
        name = os.path.join(out, "train-%04d.tar" % (s // per))
        with tarfile.open(name, "w", format=tarfile.USTAR_FORMAT) as t:
            for i, f in enumerate(files[s:s + per], s):
                key = "%06d" % i
                t.add(f, arcname=key + ".jpg")
                cls = str(classes.index(os.path.basename(os.path.dirname(f))))
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(cls)
                t.addfile(info, io.BytesIO(cls.encode()))


if __name__ == "__main__":
    main()
