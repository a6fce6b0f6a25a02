"""Shared by the test_binding_* modules: the Python binding imported from the source tree
(bindings/python), against the library ctest names in MEMBUDGET_LIBRARY.

In the sanitizer build (ctest sets MEMBUDGET_SANITIZED=1) the binding tests are skipped: an
ASan-instrumented libmembudget cannot be loaded into a Python that was not started with the
ASan runtime preloaded, and preloading it would run CPython and numpy under LeakSanitizer, which
reports the interpreter's own allocations. The C paths the binding calls are the ones the CLI
tests already run under ASan in that build."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

BINDINGS = ROOT / "bindings" / "python"

if os.environ.get("MEMBUDGET_SANITIZED") == "1":
    pytest.skip("the Python binding is not loaded into Python from a sanitizer build",
                allow_module_level=True)
if not os.environ.get("MEMBUDGET_LIBRARY"):
    pytest.fail("MEMBUDGET_LIBRARY is not set: run these tests through ctest", pytrace=False)

if str(BINDINGS) not in sys.path:
    sys.path.insert(0, str(BINDINGS))

import membudget  # noqa: E402,F401  (the tests import it from here)


def python_env(**extra):
    """Environment for a child Python that imports the binding from the source tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BINDINGS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update({k: v for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:
        env.pop(k, None)
    return env


def run_python(code, python=sys.executable, timeout=300, **env):
    """Run `code` in a child interpreter; returns CompletedProcess (text mode)."""
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=python_env(**env), cwd="/")
