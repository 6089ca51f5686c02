#!/usr/bin/env python3
"""remote_open.py SPEC [IO] - seconds stoke.Loader takes to open SPEC (the
shards' indices for packed ones, the headers' windows for tar ones), what
a run waits for before its first batch; no sample is read.  IO: the
io_concurrency (default 8).  For bench/remote.sh."""
import sys
import time

import stoke


def main():
    spec = sys.argv[1]
    kw = {"io_concurrency": int(sys.argv[2])} if len(sys.argv) > 2 else {}
    t0 = time.perf_counter()
    loader = stoke.Loader(spec, batch_size=64, **kw)
    dt = time.perf_counter() - t0
    print("%.3f" % dt)
    loader.close()


if __name__ == "__main__":
    main()
