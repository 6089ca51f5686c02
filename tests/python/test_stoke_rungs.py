"""The storage and sample-cost rungs from Python: Loader(echo=, echo_mode=,
shuffle="block", block_window=, cache=, cache_max=, ram_cache=)."""

import numpy as np
import pytest

import stoke


def indices(loader):
    out = []
    for b in loader:
        out.append(list(b.indices))
        b.release()
    return out


def test_echo_batch_and_example():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20, dtype=np.int64)
    plain = stoke.Loader((x, y), 4, shuffle=True, seed=3, output="stoke")
    echo = stoke.Loader((x, y), 4, shuffle=True, seed=3, output="stoke",
                        echo=3, num_workers=2, warmup=0)
    assert len(echo) == 3 * len(plain) == 15
    assert echo.config["echo"] == 3 and echo.config["echo_mode"] == "batch"
    want = indices(plain)
    got = indices(echo)
    assert got == [ix for ix in want for _ in range(3)]
    st = echo.stats()
    assert st["samples"] == 60 and st["fresh_samples"] == 20, st
    assert st["echo"] == 3 and st["steps_per_s"] > 0, st
    ex = stoke.Loader((x, y), 4, shuffle=True, seed=3, output="numpy",
                      echo=2, echo_mode="example")
    steps = [(a.copy(), b.copy()) for a, b in ex]
    assert len(steps) == 10
    # Arrays have no random transform: each copy is the sample itself.
    for k in range(0, 10, 2):
        np.testing.assert_array_equal(steps[k][0], steps[k + 1][0])
    for bad in ({"echo": 0}, {"echo": True}, {"echo_mode": "sample"}):
        with pytest.raises(ValueError):
            stoke.Loader((x, y), 4, **bad)
    for l in (plain, echo, ex):
        l.close()


def test_block_shuffle():
    x = np.zeros((100, 4), np.float32)  # 16 bytes a sample
    loader = stoke.Loader((x,), 10, shuffle="block=160", block_window=2,
                          seed=1, output="stoke")
    assert loader.config["shuffle"] == "block"
    e0, e1 = indices(loader), indices(loader)
    flat = [i for b in e0 for i in b]
    assert sorted(flat) == list(range(100)) and e0 != e1
    # 160-byte blocks of 10 samples, windows of 2: the first 20 positions
    # are 2 whole blocks.
    assert len({i // 10 for i in flat[:20]}) == 2
    with pytest.raises(ValueError):
        stoke.Loader((x,), 10, shuffle="sideways")
    with pytest.raises(ValueError):
        stoke.Loader((x,), 10, shuffle=True, block_window=2)
    loader.close()


def test_cache_and_ram_cache(tmp_path, image_folder):
    t = "random-resized-crop=24,flip,chw,u8"
    first = stoke.Loader(image_folder, 4, transform=t, shuffle=True,
                         num_workers=2, cache=tmp_path / "cache",
                         output="numpy", warmup=0)
    a = [x.copy() for x, _ in first]
    first.close()  # the cache's writer publishes what it wrote
    assert list((tmp_path / "cache").glob("*/*.stoke"))
    again = stoke.Loader(image_folder, 4, transform=t, shuffle=True,
                         num_workers=2, cache=tmp_path / "cache",
                         output="numpy", warmup=0)
    b = [x.copy() for x, _ in again]
    assert again.stats()["cache"]["hits"] >= 24
    again.close()
    for u, v in zip(a, b):  # the cached bytes decode to the same pixels
        np.testing.assert_array_equal(u, v)
    ev = stoke.Loader(image_folder, 4, transform="resize=28,center-crop=24",
                      ram_cache=True, output="numpy", warmup=0)
    for _ in range(2):
        for x, _ in ev:
            pass
    del x
    assert ev.stats()["cache"]["ram_hits"] == 24
    ev.close()
    with pytest.raises(stoke.ConfigError, match="deterministic"):
        stoke.Loader(image_folder, 4, transform=t, ram_cache="1MiB")
