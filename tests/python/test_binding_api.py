"""The binding's contract with the C library: every function declared, every mirrored struct the
library's size, the version checked, the library found (or one ImportError saying where it
looked), and handles freed exactly once, deterministically, and safely at interpreter exit."""
import ctypes
import gc
import re
import threading

import pytest

from binding_util import BINDINGS, membudget, run_python
from conftest import MODELS, ROOT

from membudget import _lib  # noqa: E402  (imported from the source tree by binding_util)
from membudget._handle import Handle  # noqa: E402

HEADERS = ROOT / "include" / "membudget"


def header_functions():
    text = (HEADERS / "membudget.h").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"\bMB_API\b[^;{]*?\b(mb_\w+)\s*\(", text))


def test_every_c_function_is_declared():
    declared = header_functions()
    assert len(declared) > 60
    assert set(_lib.PROTOTYPES) == declared
    for name in declared:
        fn = getattr(_lib.lib, name)
        assert fn.argtypes is not None, name  # restype None is void; argtypes [] for (void)


def test_mirrored_structs_have_the_library_size():
    for which, struct_type in _lib.MIRRORED:
        assert ctypes.sizeof(struct_type) == _lib.lib.mb_struct_size(which) > 0, struct_type.__name__
    assert _lib.lib.mb_struct_size(99) == 0
    # every versioned struct of the header is mirrored and checked
    text = (HEADERS / "membudget.h").read_text()
    ids = re.findall(r"MB_STRUCT_\w+ = (\d+)", text)
    assert sorted(int(i) for i in ids) == sorted(w for w, _ in _lib.MIRRORED)


def test_version_is_the_headers():
    text = (HEADERS / "version.h").read_text()
    parts = [re.search(rf"#define MB_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert membudget.__version__ == ".".join(parts) == membudget.library_version
    assert _lib.lib.mb_version_number() == int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2])


class FakeLibrary:
    """Answers like a libmembudget of another version / with another struct layout."""

    def __init__(self, version=b"0.1.0", budget_size=None):
        self.version, self.budget_size = version, budget_size

    def mb_version_string(self):
        return self.version

    def mb_struct_size(self, which):
        size = dict((w, ctypes.sizeof(t)) for w, t in _lib.MIRRORED)[which]
        return self.budget_size if which == _lib.STRUCT_BUDGET and self.budget_size else size


def test_a_mismatched_library_is_refused_at_import():
    major, minor, _ = membudget.__version__.split(".")
    assert _lib._check_version(FakeLibrary(f"{major}.{minor}.99".encode()), "x.so") == f"{major}.{minor}.99"
    with pytest.raises(ImportError, match=r"x.so is libmembudget 99.0.0, this package is"):
        _lib._check_version(FakeLibrary(b"99.0.0"), "x.so")
    _lib._check_structs(FakeLibrary(), "x.so")
    with pytest.raises(ImportError, match=r"mb_budget is 8 bytes in the library and \d+ in this package"):
        _lib._check_structs(FakeLibrary(budget_size=8), "x.so")


def test_library_override_that_fails_is_one_import_error(tmp_path):
    p = run_python("import membudget", MEMBUDGET_LIBRARY=str(tmp_path / "nope.so"))
    assert p.returncode == 1
    assert "ImportError: membudget: libmembudget was not found. Tried, in order:" in p.stderr
    assert f"$MEMBUDGET_LIBRARY: {tmp_path / 'nope.so'}: no such file" in p.stderr
    not_a_library = tmp_path / "libmembudget.so"
    not_a_library.write_text("not ELF")
    p = run_python("import membudget", MEMBUDGET_LIBRARY=str(not_a_library))
    assert p.returncode == 1 and f"$MEMBUDGET_LIBRARY: {not_a_library}: " in p.stderr
    assert "package:" not in p.stderr  # an explicit choice is not silently replaced


def test_without_override_package_then_system_are_tried():
    p = run_python("import membudget; print(membudget.library_path)", MEMBUDGET_LIBRARY=None, LD_LIBRARY_PATH=None)
    if p.returncode == 0:
        pytest.skip(f"a libmembudget is installed on this system: {p.stdout.strip()}")
    assert f"package: {BINDINGS / 'membudget' / 'libmembudget.so'}: no such file" in p.stderr
    assert "system (loader search): libmembudget.so.0:" in p.stderr


def test_handle_is_freed_once_and_never_while_borrowed():
    freed = []

    class Owner:
        pass

    owner = Owner()
    h = Handle(owner, 1234, freed.append, "thing")
    with h.borrow() as ptr:
        assert ptr == 1234
        h.close()  # another thread closing while a call runs: deferred
        assert h.closed and freed == []
        with pytest.raises(ValueError, match="thing is closed"):
            with h.borrow():
                pass
    assert freed == [1234]
    h.close()
    assert freed == [1234]
    # the garbage collector frees an unclosed handle
    owner2 = Owner()
    Handle(owner2, 5678, freed.append, "thing")
    del owner2
    gc.collect()
    assert freed == [1234, 5678]


def test_close_and_context_manager_free_the_model():
    with membudget.load(MODELS / "resnet18.onnx") as m:
        assert not m.closed
    assert m.closed
    m2 = membudget.load(MODELS / "resnet18.onnx")
    finalizer = m2._handle._finalizer
    assert finalizer.alive
    del m2
    gc.collect()
    assert not finalizer.alive


def test_close_from_another_thread_waits_for_a_running_estimate():
    m = membudget.load(MODELS / "gpt2_small_like.onnx")
    expected = membudget.estimate(m, gpu="a100-80gb", dims={"sequence": 256})
    results, errors, started = [], [], threading.Event()

    def work():
        try:
            for _ in range(20):
                results.append(membudget.estimate(m, gpu="a100-80gb", dims={"sequence": 256}))
                started.set()
        except ValueError as e:  # closed between two calls: refused, not a crash
            errors.append(e)
        started.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    m.close()
    t.join()
    assert all(r == expected for r in results) and all("closed" in str(e) for e in errors)


def test_open_models_at_interpreter_exit():
    code = (f"import membudget, threading\n"
            f"m = membudget.load({str(MODELS / 'resnet18.onnx')!r})\n"
            f"kept = [membudget.load({str(MODELS / 'bert_base_like.onnx')!r}) for _ in range(3)]\n"
            f"b = membudget.estimate(m, batch=2)\n"
            f"print(b.batch_size)\n")
    p = run_python(code)
    assert p.returncode == 0 and p.stdout == "2\n" and p.stderr == ""
