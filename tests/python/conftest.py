"""Shared fixtures: where the built CLI and the models are (set by ctest)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("MEMBUDGET_MODELS", ROOT / "models"))


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("MEMBUDGET_CLI")
    if not path:
        pytest.fail("MEMBUDGET_CLI is not set: run these tests through ctest")
    return path


def run(cli_path, *args, check=None):
    """Run the CLI; returns CompletedProcess (text mode)."""
    p = subprocess.run([cli_path, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def info_json(cli_path, model, *extra):
    p = run(cli_path, "info", model, "--json", *extra, check=0)
    return json.loads(p.stdout)
