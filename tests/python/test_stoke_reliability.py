"""Bad samples, the quarantine and resume from Python (the C side is tested
in tests/unit/test_bad_samples.c, test_quarantine.c, test_resume.c)."""

import shutil

import numpy as np
import pytest
import torch

import stoke

TF = "resize=16,center-crop=16,chw,u8"


@pytest.fixture
def bad_folder(tmp_path, image_folder):
    """The image folder with two files broken: class1/002 (index 10) and
    class2/005 (index 21)."""
    root = tmp_path / "bad"
    shutil.copytree(image_folder, root)
    for rel in ("class1/002.jpg", "class2/005.jpg"):
        (root / rel).write_bytes(b"\xff\xd8\xff\xe0 not a JPEG" * 8)
    return root


def labels_of(loader):
    out = []
    for batch in loader:
        out.append((batch.indices, batch.size, batch.n_skipped,
                    batch.n_replaced))
    return out


def test_skip_shortens_the_batch_and_counts(bad_folder):
    loader = stoke.Loader(str(bad_folder), 4, num_workers=2, transform=TF,
                          on_error="skip", max_failures=5, output="stoke",
                          warmup=0, epoch_prefetch=False)
    # (No next-epoch prefetch: its bad samples would count too.)
    got = labels_of(loader)
    seen = sorted(i for idx, _, _, _ in got for i in idx)
    assert seen == [i for i in range(24) if i not in (10, 21)]
    assert sum(s for _, _, s, _ in got) == 2
    assert {n for _, n, s, _ in got if s} == {3}
    f = loader.failures()
    assert [x["index"] for x in f] == [10, 21]
    assert all(x["action"] == "skip" for x in f)
    assert "class1/002.jpg" in f[0]["where"] and f[0]["reason"]
    st = loader.stats()["bad_samples"]
    assert st["failures"] == 2 and st["skipped"] == 2


def test_replace_keeps_the_size_and_is_deterministic(bad_folder):
    def run(workers, prefetch):
        loader = stoke.Loader(str(bad_folder), 4, num_workers=workers,
                              prefetch=prefetch, transform=TF, shuffle=True,
                              seed=3, on_error="replace", max_failures=5,
                              output="stoke", epoch_prefetch=False)
        return labels_of(loader), loader.failures()
    a, fa = run(0, 1)
    b, fb = run(2, 4)
    assert a == b                          # same batches whatever W and K
    assert all(n == 4 for _, n, _, _ in a)
    assert sum(r for _, _, _, r in a) == 2
    subs = [x["substitute"] for x in fa]
    assert subs == [x["substitute"] for x in fb] and None not in subs
    assert not set(subs) & {10, 21}


def test_fail_is_the_default_and_budgets(bad_folder):
    with pytest.raises(stoke.SampleError) as e:
        for _ in stoke.Loader(str(bad_folder), 4, transform=TF):
            pass
    assert e.value.index == 10
    loader = stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                          max_failures=1)
    with pytest.raises(stoke.Error, match="class2/005.jpg"):
        for _ in loader:
            pass
    for bad in (0, "0", -1, "150%"):
        with pytest.raises(ValueError):
            stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                         max_failures=bad)
    with pytest.raises(ValueError, match="on_error"):
        stoke.Loader(str(bad_folder), 4, transform=TF, on_error="ignore")
    ok = stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                      max_failures="none")
    assert sum(len(y) for _, y in ok) == 22
    # The default budget is 1% of an epoch: 2 of 24 is over it.
    with pytest.raises(stoke.Error, match="failure budget"):
        for _ in stoke.Loader(str(bad_folder), 4, transform=TF,
                              on_error="skip"):
            pass
    frac = stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                        max_failures="10%")
    assert sum(len(y) for _, y in frac) == 22


def test_quarantine_skips_reading_later(tmp_path, bad_folder):
    q = tmp_path / "bad.quarantine"
    first = stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                         max_failures=5, quarantine=q)
    assert sum(len(y) for _, y in first) == 22
    text = q.read_text()
    assert "class1/002.jpg" in text and "class2/005.jpg" in text
    again = stoke.Loader(str(bad_folder), 4, transform=TF, on_error="skip",
                         max_failures=5, quarantine=q, output="stoke",
                         warmup=0)
    assert sum(b.size for b in again) == 22
    assert all(x["quarantined"] for x in again.failures())


def epoch_indices(it):
    return [list(b.tolist()) for _, b in it]


def test_resume_mid_epoch_with_other_workers():
    x = np.arange(200, dtype=np.float32).reshape(100, 2)
    y = np.arange(100)
    kw = dict(shuffle=True, seed=11, output="numpy")
    ref = stoke.Loader((x, y), 8, num_workers=2, **kw)
    whole = [epoch_indices(ref) for _ in range(3)]
    for cut_epoch, cut in ((0, 0), (0, 5), (1, 12), (2, 13)):
        a = stoke.Loader((x, y), 8, num_workers=2, **kw)
        for _ in range(cut_epoch):
            epoch_indices(a)
        it = iter(a)
        for _ in range(cut):
            next(it)
        state = a.state_dict()
        assert state["epoch"] == cut_epoch and state["batches_done"] == cut
        torch_state = torch.load(_roundtrip(state))   # torch.save-able
        b = stoke.Loader((x, y), 8, num_workers=0, prefetch=4, **kw)
        b.load_state_dict(torch_state)
        rest = epoch_indices(b)
        assert rest == whole[cut_epoch][cut:], (cut_epoch, cut)
        if cut_epoch < 2:
            assert epoch_indices(b) == whole[cut_epoch + 1]


def _roundtrip(state):
    import io
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return buf


def test_resume_refuses_another_dataset():
    x = np.zeros((100, 2), np.float32)
    a = stoke.Loader(x, 8)
    state = a.state_dict()
    b = stoke.Loader(np.zeros((90, 2), np.float32), 8)
    with pytest.raises(stoke.ConfigError, match="sample"):
        b.load_state_dict(state)
    bad = dict(state, stoke_state=state["stoke_state"][:-1] + b"\0")
    with pytest.raises(stoke.ConfigError):
        a.load_state_dict(bad)


def test_iterators_behave_as_torch():
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    loader = stoke.Loader((x, np.arange(8)), 2, output="numpy")
    it = iter(loader)
    assert iter(it) is it and it.loader is loader
    next(it)
    assert [b.tolist() for _, b in it] == [[2, 3], [4, 5], [6, 7]]
    with pytest.raises(StopIteration):
        next(it)                     # exhausted: not the next epoch
    old = iter(loader)
    next(old)
    new = iter(loader)               # a new iterator: a new epoch
    with pytest.raises(stoke.Error, match="newer"):
        next(old)
    assert [b.tolist() for _, b in new][0] == [0, 1]
    assert new.__length_hint__() == 0 and iter(loader).__length_hint__() == 4
    with pytest.raises(TypeError):
        next(loader)                 # like torch: a loader is not an iterator
