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
    # Blocks and windows that do not divide evenly: 103 samples are 10
    # blocks of 10 and one of 3, 11 blocks are 5 windows of 2 and one of 1.
    # The partial block and window are there, every sample once.
    for workers in (0, 1, 3):
        odd = stoke.Loader((np.zeros((103, 4), np.float32),), 10,
                           shuffle="block=160", block_window=2, seed=2,
                           num_workers=workers, output="stoke")
        for epoch in range(2):
            got = [i for b in indices(odd) for i in b]
            missing = sorted(set(range(103)) - set(got))
            assert not missing, (workers, epoch, "missing", missing)
            assert sorted(got) == list(range(103)), (workers, epoch, got)
        odd.close()
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


def producer_bound(**kw):
    """A producer that cannot keep up even with every core: 1 ms of CPU a
    sample against a step of nothing."""
    loader = stoke.Loader(stoke.synthetic("spin:1ms", samples=64), 8,
                          num_workers=2, warmup=0, output="stoke", **kw)
    for _ in range(2):
        for b in loader:
            b.release()
    return loader


def test_cost_and_price():
    loader = producer_bound(gpu_price="2.50/h")
    st = loader.stats()
    c = st["cost"]
    assert c["gpu_price_per_hour"] == 2.5, c
    assert abs(c["per_epoch"] - c["seconds_per_epoch"] * 2.5 / 3600) < 1e-12
    assert abs(c["wait_per_epoch"] - c["per_epoch"] * c["wait_share"]) < 1e-12
    text = loader.report(cores=2)
    assert "  at $2.50/h    $" in text and "waiting: $" in text, text
    loader.close()
    none = producer_bound()
    assert none.stats()["cost"]["per_epoch"] is None
    assert none.stats()["cost"]["seconds_per_sample"] > 0
    none.close()
    for price, per_hour in ((3, 3.0), ("$1.20/h", 1.2), ("0.06/min", 3.6),
                            ("0.001/s", 3.6)):
        x = np.zeros((8, 2), np.float32)
        l = stoke.Loader((x,), 4, gpu_price=price, output="stoke")
        assert l.stats()["cost"]["gpu_price_per_hour"] == \
            pytest.approx(per_hour), price
        l.close()
    for bad in ("2.5/week", "cheap", -1, True):
        with pytest.raises((ValueError, TypeError)):
            stoke.Loader((np.zeros((8, 2), np.float32),), 4, gpu_price=bad)


def test_echo_advice_names_the_argument():
    """The doctor's last resort names Loader's echo=; for stoke.DataLoader,
    which has none, it says to use each batch in the loop."""
    from stoke import _stoke
    from stoke.dataloader import _dataloader_words
    loader = producer_bound()
    d = loader.diagnose(cores=2)
    echo = [a for a in d["advice"] if a["kind"] == "data_echoing"]
    assert echo, d["advice"]
    n = echo[0]["echo"]
    assert f"echo={n}" in echo[0]["text"] and "--echo" not in echo[0]["text"]
    raw = _stoke.Loader.diagnose(loader, 2, None)
    words = _dataloader_words(raw)
    t = [a for a in words["advice"] if a["kind"] == "data_echoing"][0]["text"]
    assert f"each batch {n} times in the training loop" in t, t
    assert "stoke.DataLoader has no echo=" in t, t
    loader.close()


def test_dataloader_price():
    pytest.importorskip("torch")
    dl = stoke.DataLoader(list(range(32)), batch_size=8, num_workers=1,
                          gpu_price="2.50/h", warmup=0)
    for _ in range(2):
        for _batch in dl:
            pass
    c = dl.stats()["cost"]
    assert c["gpu_price_per_hour"] == 2.5 and c["per_epoch"] > 0, c
    dl.close()
    with pytest.raises(ValueError):
        stoke.DataLoader(list(range(8)), gpu_price="2.5/week")
