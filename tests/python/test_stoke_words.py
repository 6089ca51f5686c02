"""The doctor's advice is structure, worded by each front end: stoke.Loader
names its keyword arguments, stoke.DataLoader torch's, and no text is
rewritten after the fact.  Every JSON document carries schema_version, and
the HTML page is drawn without the command-line tool."""

import json

import pytest

import stoke
from stoke import _stoke

FLAGS = ("-j ", "--prefetch", "--echo", "--pin-memory", "--device-prefetch")


def producer_bound():
    """1 ms of CPU a sample against a step of nothing: the ladder ends in
    data echoing, whatever the machine."""
    loader = stoke.Loader(stoke.synthetic("spin:1ms", samples=64), 8,
                          num_workers=2, warmup=0, output="stoke")
    for _ in range(2):
        for b in loader:
            b.release()
    return loader


def test_loader_advice_names_arguments_not_flags():
    loader = producer_bound()
    d = loader.diagnose(cores=2)
    assert d["advice"], d
    for a in d["advice"]:
        assert isinstance(a, _stoke.Advice) and isinstance(a, dict)
        assert not any(f in a["text"] for f in FLAGS), a["text"]
        # The same line, worded again from its structure.
        assert a.text_for("loader") == a["text"]
    echo = [a for a in d["advice"] if a["kind"] == "data_echoing"][0]
    assert f"echo={echo['echo']}:" in echo["text"], echo["text"]
    text = loader.report(cores=2)
    assert not any(f in text for f in FLAGS), text
    # A dict like any other: JSON keys only, serialisable.
    assert json.loads(json.dumps(d))["advice"][0]["kind"] == \
        d["advice"][0]["kind"]
    with pytest.raises(ValueError):
        echo.text_for("cli")
    with pytest.raises(ValueError):
        _stoke.Loader.diagnose(loader, 2, None, words="nope")
    loader.close()


def test_dataloader_words_are_torchs():
    loader = producer_bound()
    d = _stoke.Loader.diagnose(loader, 2, None, words="dataloader")
    for a in d["advice"]:
        assert "prefetch=" not in a["text"], a["text"]
        assert not any(f in a["text"] for f in FLAGS), a["text"]
        if a["kind"] == "prefetch":
            assert "prefetch_factor=" in a["text"], a["text"]
    echo = [a for a in d["advice"] if a["kind"] == "data_echoing"][0]
    assert "stoke.DataLoader has no echo=" in echo["text"], echo["text"]
    loader.close()


def test_json_documents_carry_schema_version(tmp_path):
    loader = producer_bound()
    path = tmp_path / "run.json"
    loader.save_json(path, cores=2)
    doc = json.loads(path.read_text())
    assert list(doc)[0] == "schema_version" and doc["schema_version"] == 1
    # stoke report's page, drawn by the report library (no argv, no CLI).
    html = tmp_path / "report.html"
    _stoke.render_report([str(path)], str(html))
    assert html.read_text().startswith("<!DOCTYPE html>")
    loader.close()


def test_render_report_names_the_bad_input(tmp_path):
    with pytest.raises(stoke.IOError, match="nonexistent.json"):
        _stoke.render_report([str(tmp_path / "nonexistent.json")],
                             str(tmp_path / "out.html"))
    assert not (tmp_path / "out.html").exists()


class Regen:
    """Six batches of 10 ms each epoch."""

    def __iter__(self):
        import time
        for _ in range(6):
            time.sleep(0.01)
            yield [0] * 4


def test_twoclock_deadline_speaks_python():
    clock = stoke.TwoClock(Regen(), warmup=1)
    for _ in range(3):
        for _batch in clock:
            pass
    text = clock.report(train_epochs=10, deadline="1h")
    row = [x for x in text.split("\n") if x.startswith("  now ")][0]
    assert "num_workers=" in row and "-j " not in row, row
