"""`pip install ./bindings/python` builds libmembudget with scikit-build-core, bundles it in the
package, and the installed package finds it with no MEMBUDGET_LIBRARY. Slow (a fresh venv and a
full library build, about a minute) and needs PyPI for the build backend, so it runs only with
MEMBUDGET_TEST_INSTALL=1:

    MEMBUDGET_TEST_INSTALL=1 MEMBUDGET_LIBRARY=build/py/libmembudget.so MEMBUDGET_CLI=build/py/membudget \
        .venv/bin/python -m pytest -q tests/python/test_binding_install.py
"""
import json
import os
import subprocess
import sys

import pytest

from binding_util import BINDINGS, membudget
from conftest import MODELS

pytestmark = pytest.mark.skipif(os.environ.get("MEMBUDGET_TEST_INSTALL") != "1",
                                reason="slow: set MEMBUDGET_TEST_INSTALL=1 to build and install the package")


def test_pip_install_bundles_the_library(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(BINDINGS)],
                       capture_output=True, text=True, timeout=900, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert not (BINDINGS / "build").exists()  # built out of the source tree
    env = {k: v for k, v in os.environ.items() if k not in ("MEMBUDGET_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    code = ("import json, membudget\n"
            f"b = membudget.estimate({str(MODELS / 'resnet18.onnx')!r}, gpu='t4')\n"
            "print(json.dumps([membudget.__version__, membudget.library_version, membudget.library_path,"
            " membudget.__file__, b.to_dict()]))\n")
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, cwd="/", timeout=120)
    assert p.returncode == 0, p.stderr
    version, library_version, library_path, package_file, budget = json.loads(p.stdout)
    assert version == library_version == membudget.__version__
    site = os.path.dirname(package_file)
    assert library_path == os.path.join(site, "libmembudget.so") and str(venv) in site
    assert budget == membudget.estimate(MODELS / "resnet18.onnx", gpu="t4").to_dict()
