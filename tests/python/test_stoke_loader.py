"""stoke.Loader from Python: sources, output modes, epochs, errors and the
reports.  Zero-copy and lifetime are tested in test_stoke_memory.py."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import stoke

from conftest import cli_path, python_env, run_python


def arrays(n=100, d=4):
    x = np.arange(n * d, dtype=np.float32).reshape(n, d)
    y = np.arange(n, dtype=np.int64)
    return x, y


def test_import_and_version():
    assert stoke.__version__ == stoke._stoke.version()
    assert issubclass(stoke.SampleError, stoke.Error)
    assert issubclass(stoke.SampleTimeout, TimeoutError)
    assert issubclass(stoke.ConfigError, ValueError)
    assert issubclass(stoke.BudgetError, MemoryError)


def test_import_from_a_fresh_interpreter():
    r = run_python("import stoke, sys; print(stoke.__file__); "
                   "print(stoke.__version__)")
    assert r.returncode == 0, r.stderr
    assert "build" in r.stdout and stoke.__version__ in r.stdout


@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_tuple_of_arrays_in_order(workers):
    x, y = arrays(100)
    loader = stoke.Loader((x, y), 16, num_workers=workers)
    assert len(loader) == 7
    seen = []
    for bx, by in loader:
        assert isinstance(bx, torch.Tensor) and bx.dtype == torch.float32
        assert by.dtype == torch.int64
        assert torch.equal(bx, torch.from_numpy(x[by.numpy()]))
        seen += by.tolist()
    assert seen == list(range(100))


def test_output_numpy_and_layouts():
    x, y = arrays(10)
    single = stoke.Loader(x, 4, output="numpy")
    batches = list(single)
    assert [b.shape for b in batches] == [(4, 4), (4, 4), (2, 4)]
    assert isinstance(batches[0], np.ndarray)
    np.testing.assert_array_equal(np.concatenate(batches), x)
    d = stoke.Loader({"feat": x, "lab": y}, 5, output="numpy")
    b = next(iter(d))
    assert set(b) == {"feat", "lab"}
    np.testing.assert_array_equal(b["lab"], y[:5])


def test_output_stoke_batch_fields():
    x, y = arrays(12)
    loader = stoke.Loader({"x": x, "y": y}, 4, output="stoke")
    for batch in loader:
        assert isinstance(batch, stoke.Batch)
        assert batch.size == 4 and batch.names == ("x", "y")
        assert batch.indices == list(range(4 * batch.number,
                                           4 * batch.number + 4))
        bx, by = batch                      # unpacking
        assert bx.shape == (4, 4) and bx.dtype == "f32"
        assert batch["y"].shape == (4,) and batch.y.dtype == "i64"
        assert batch[1].name == "y" and batch[-2].name == "x"
        np.testing.assert_array_equal(np.asarray(batch.x), x[batch.indices])
        with pytest.raises(KeyError):
            batch["nope"]
        with pytest.raises(AttributeError):
            batch.nope
        with pytest.raises(IndexError):
            batch[2]


def test_synthetic_source_and_its_costs():
    src = stoke.synthetic("sleep:1ms", samples=32, shape=(3, 8, 8))
    # No next-epoch prefetch: the stage counts are this epoch's alone.
    loader = stoke.Loader(src, 8, num_workers=4, output="numpy", warmup=0,
                          epoch_prefetch=False)
    shapes = [(x.shape, y.shape) for x, y in loader]
    assert shapes == [((8, 3, 8, 8), (8,))] * 4
    st = loader.stats()
    assert st["steps"] == 4 and st["samples"] == 32
    read = {s["name"]: s for s in st["stages"]}["read"]
    assert read["count"] == 32 and read["mean_us"] >= 1000
    with pytest.raises(ValueError):
        stoke.synthetic("nap:1ms")


def test_images_source(image_folder):
    loader = stoke.Loader(str(image_folder), 5, num_workers=2,
                          transform="resize=32,center-crop=32,chw,u8")
    assert len(loader) == 5
    labels = []
    for img, lab in loader:
        assert img.shape[1:] == (3, 32, 32) and img.dtype == torch.uint8
        labels += lab.tolist()
    assert sorted(labels) == sorted([c for c in range(3) for _ in range(8)])


def test_epochs_shuffle_and_set_epoch():
    x, y = arrays(64)
    def order(workers, epoch=None, prefetch=2):
        loader = stoke.Loader((x, y), 8, shuffle=True, seed=7,
                              num_workers=workers, prefetch=prefetch)
        if epoch is not None:
            loader.set_epoch(epoch)
        return [b.tolist() for _, b in loader]
    base = order(0)
    assert sorted(sum(base, [])) == list(range(64))
    assert base != [list(range(i, i + 8)) for i in range(0, 64, 8)]
    assert order(4) == base and order(2, prefetch=5) == base
    assert order(0, epoch=3) != base
    loader = stoke.Loader((x, y), 8, shuffle=True, seed=7)
    first = [b.tolist() for _, b in loader]
    second = [b.tolist() for _, b in loader]      # each iter() an epoch
    assert first == base and second != first
    assert second == order(0, epoch=1)


def test_early_break_starts_the_next_epoch():
    x, y = arrays(64)
    loader = stoke.Loader((x, y), 8, num_workers=2, output="numpy")
    for k in range(5):
        for i, (_, b) in enumerate(loader):
            if i == k % 3:
                break
        full = [b.tolist() for _, b in loader]
        assert sorted(sum(full, [])) == list(range(64))


def test_drop_last_rank_world_from_env(monkeypatch):
    x, y = arrays(10)
    assert len(stoke.Loader((x, y), 4, drop_last=True)) == 2
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = stoke.Loader((x, y), 2, output="numpy")
    assert loader.config["rank"] == 1 and loader.config["world_size"] == 2
    assert sum(len(b) for _, b in loader) == 5
    assert stoke.Loader((x, y), 2, rank=0, world_size=1).config["rank"] == 0


def test_configuration_errors():
    x, y = arrays(10)
    with pytest.raises(stoke.ConfigError, match="rows"):
        stoke.Loader((x, y[:5]), 2)
    with pytest.raises(stoke.ConfigError, match="contiguous"):
        stoke.Loader(x[:, ::2], 2)
    with pytest.raises(stoke.ConfigError, match="contiguous"):
        stoke.Loader(torch.zeros(4, 4).t(), 2)
    with pytest.raises(stoke.ConfigError, match="element format"):
        stoke.Loader(np.zeros(4, np.uint16), 2)
    with pytest.raises(stoke.ConfigError, match="transform"):
        stoke.Loader(x, 2, transform="resize=8")
    with pytest.raises(ValueError, match="batch_size"):
        stoke.Loader(x, 0)
    with pytest.raises(ValueError, match="output"):
        stoke.Loader(x, 2, output="jax")
    with pytest.raises(TypeError, match="stoke.DataLoader"):
        stoke.Loader(torch.utils.data.TensorDataset(torch.zeros(3)), 2)
    with pytest.raises(FileNotFoundError):
        stoke.Loader("/no/such/dir", 2)
    with pytest.raises(stoke.BudgetError, match="memory budget"):
        stoke.Loader(x, 2, mem_budget="1KiB")
    with pytest.raises(stoke.ConfigError, match="rank"):
        stoke.Loader(x, 2, rank=3, world_size=2)


def test_sample_error_names_the_file(tmp_path, image_folder):
    import shutil
    root = tmp_path / "bad"
    shutil.copytree(image_folder, root)
    victim = sorted((root / "class1").iterdir())[2]
    victim.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG at all" * 4)
    loader = stoke.Loader(str(root), 4, num_workers=2,
                          transform="resize=16,center-crop=16,chw,u8")
    with pytest.raises(stoke.SampleError) as info:
        for _ in loader:
            pass
    e = info.value
    assert e.path == str(victim)
    assert e.index == 10   # class0 has 8, then class1/002
    assert str(victim) in str(e) and e.code == -4
    # The loader is poisoned: later calls say so.
    with pytest.raises(stoke.Error):
        next(iter(loader))


def test_timeout_names_the_sample():
    src = stoke.synthetic("sleep:400ms", samples=4, shape=(2,))
    loader = stoke.Loader(src, 2, num_workers=1, timeout=0.1)
    with pytest.raises(stoke.SampleTimeout) as info:
        next(iter(loader))
    assert info.value.index in range(4) and "timeout" in str(info.value)


def test_ctrl_c_while_waiting_raises_promptly(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(textwrap.dedent("""
        import sys, time, stoke
        loader = stoke.Loader(stoke.synthetic("sleep:60s", samples=2),
                              1, num_workers=1)
        print("ready", flush=True)
        t0 = time.monotonic()
        try:
            next(iter(loader))
        except KeyboardInterrupt:
            print("interrupted after %.2f s" % (time.monotonic() - t0))
            sys.exit(0)
        sys.exit(1)
    """))
    p = subprocess.Popen([sys.executable, str(script)], env=python_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline()
    finally:
        # next() does not wait for the worker's 60 s sample, but the
        # loader's destroy at exit does (nothing is detached): kill it.
        p.kill()
        p.communicate()
    assert line.startswith("interrupted after"), line
    secs = float(line.split("after ")[1].split()[0])
    assert 0.4 < secs < 3.0, line


def test_fork_child_refuses_the_loader():
    code = textwrap.dedent("""
        import os, numpy as np, stoke
        loader = stoke.Loader(np.zeros((8, 2), np.float32), 2,
                              num_workers=1, output="numpy")
        pid = os.fork()
        if pid == 0:
            try:
                next(iter(loader))
                os._exit(3)
            except stoke.Error as e:
                os._exit(0 if "fork" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        print(sum(1 for _ in loader))
    """)
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "4"]


def test_stats_diagnose_report_and_json(tmp_path):
    src = stoke.synthetic("sleep:2ms", samples=64, shape=(4,))
    loader = stoke.Loader(src, 8, num_workers=0, warmup=1, trace=True)
    for epoch in range(3):
        for x, y in loader:
            pass
    st = loader.stats()
    for key in ("steps", "samples", "wait_s", "compute_s", "wait_ratio",
                "wait_p50_ms", "wait_p95_ms", "wait_p99_ms", "wait_max_ms",
                "queue_empty_frac", "queue_mean_depth", "peak_rss_bytes",
                "verdict", "stages", "samples_per_s", "wait_histogram"):
        assert key in st, key
    assert st["steps"] == 16 and st["epochs"] == 2   # warm-up left out
    assert st["wait_ratio"] > 0.9 and st["verdict"] == "starving"
    d = loader.diagnose()
    assert d["verdict"] == "starving"
    assert d["model"]["workers"] == 0 and d["advice"]
    assert any(a["kind"] == "workers" and a["speedup"] > 1.5
               for a in d["advice"])
    text = loader.report()
    assert "verdict: starving" in text and "advice" in text
    assert "num_workers=" in text  # the advice speaks Python
    path = tmp_path / "run.json"
    loader.save_json(str(path))
    doc = json.loads(path.read_text())
    assert doc["diagnosis"]["verdict"] == "starving"
    assert doc["config"]["compute"] == "the Python loop"
    html = tmp_path / "report.html"
    r = subprocess.run([cli_path(), "report", str(path), "-o", str(html)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "starving" in html.read_text()
    trace = tmp_path / "trace.json"
    loader.save_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("name") == "wait" for e in events) == 24
    no_trace = stoke.Loader(src, 8)
    with pytest.raises(stoke.ConfigError, match="trace=True"):
        no_trace.save_trace(str(trace))


def test_diagnose_before_any_epoch():
    loader = stoke.Loader(np.zeros((4, 2), np.float32), 2)
    d = loader.diagnose()
    assert d["verdict"] == "unknown" and "epoch" in d["reason"]
    assert "no measured steps" in loader.report()


def test_close_and_context_manager():
    x, y = arrays(8)
    with stoke.Loader((x, y), 4, num_workers=2) as loader:
        held = next(iter(loader))
    assert loader.closed
    with pytest.raises(stoke.Error, match="closed"):
        next(iter(loader))
    assert held[1].tolist() == [0, 1, 2, 3]   # still valid after close


def test_config_and_repr():
    x, y = arrays(20)
    loader = stoke.Loader((x, y), 5, num_workers=3, prefetch=4, timeout="2s",
                          mem_budget="64MiB", output="numpy")
    c = loader.config
    assert (c["batch_size"], c["num_workers"], c["prefetch"]) == (5, 3, 4)
    assert c["timeout"] == 2.0 and c["mem_budget"] == 64 << 20
    assert c["batches_per_epoch"] == 4 and c["output"] == "numpy"
    assert "3 workers" in repr(loader)
    assert loader.num_workers == 3 and loader.batch_size == 5
    assert loader.host_bytes() > 0
    assert stoke.Loader(x, 4, num_workers="cores").num_workers == os.cpu_count()
