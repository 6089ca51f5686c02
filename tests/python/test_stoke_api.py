"""The stub (stoke/__init__.pyi) and the docs cover the public API."""

import ast
import pathlib

import stoke

STUB = pathlib.Path(stoke.__file__).with_name("__init__.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {n.name for n in node.body
                                  if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body
                if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, members


def test_stub_lists_every_public_name():
    top, members = stub_names()
    assert set(stoke.__all__) <= top, set(stoke.__all__) - top
    for cls in ("Loader", "TwoClock", "Batch", "Field", "DataLoader"):
        public = {n for n in dir(getattr(stoke, cls)) if not n.startswith("_")}
        missing = public - members[cls]
        assert not missing, f"{cls}: {missing} not in the stub"


def test_public_api_is_documented():
    for name in stoke.__all__:
        obj = getattr(stoke, name)
        if callable(obj) and not isinstance(obj, type(BaseException)):
            assert obj.__doc__, name
    for cls in (stoke.Loader, stoke.TwoClock, stoke.DataLoader):
        for n in dir(cls):
            if not n.startswith("_"):
                assert getattr(cls, n).__doc__, f"{cls.__name__}.{n}"
