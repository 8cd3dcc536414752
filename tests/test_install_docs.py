"""Every install line the documentation gives works as written (issue 25: README said
`pip install kafkacore[spark]`, which no package index can answer). The lines are read from
README.md and docs/, so a new one cannot be added without this test knowing it; each runs in a
fresh virtualenv, in a fresh copy of the checkout, as a user would type it, and what it
installed is then used.

Slow (each line compiles the extension, or installs PySpark): it runs once, in the native pass,
where ccache (ci/compat_deps.sh) makes the compiles after the first cheap."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _kcutil import SOURCE_ROOT

ROOT = Path(SOURCE_ROOT)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
INSTALL = re.compile(r"(pip install [^`#\n;]*[^`#\n; ])")
# each line -> what shows it worked, run with the virtualenv's python from a directory without
# the checkout (so the checkout's own kafkacore cannot be what is imported)
CHECKS = {
    "pip install .": "import kafkacore, sys; sys.exit(not kafkacore.native_extensions())",
    "pip install '.[spark]'": "import kafkacore, kafkacore_spark, pyspark; print(pyspark.__version__)",
    "pip install build && python -m build": None,  # checked by its files in dist/
    "pip install dist/kafkacore-0.1.0-*.whl": "import kafkacore, sys; sys.exit(not kafkacore.native_extensions())",
}

pytestmark = [
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout beside the tests"),
    pytest.mark.skipif(bool(os.environ.get("KAFKACORE_NO_EXTENSIONS")), reason="runs once, in the native pass"),
]


def documented_lines():
    found = {}
    for doc in DOCS:
        for m in INSTALL.finditer(doc.read_text()):
            line = m.group(1).strip()
            if line.startswith("pip install build") and "python -m build" not in line:
                continue
            found.setdefault(line, doc.relative_to(ROOT).as_posix())
    return found


def test_every_documented_install_line_is_one_this_test_runs():
    found = documented_lines()
    assert set(found) == set(CHECKS), {line: doc for line, doc in found.items() if line not in CHECKS}


def _checkout_copy(dest):
    files = subprocess.run(["git", "-C", SOURCE_ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            dst = dest / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())


def test_each_documented_install_line_works_in_a_fresh_virtualenv(tmp_path):
    checkout = tmp_path / "checkout"
    _checkout_copy(checkout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKACORE_", "VIRTUAL_ENV", "PYTHONPATH"))}
    for i, (line, check) in enumerate(CHECKS.items()):
        venv = tmp_path / f"venv-{i}"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        run_env = dict(env, PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
        done = subprocess.run(["bash", "-c", f"set -e; {line}"], cwd=checkout, env=run_env, capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"{line!r} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if check is None:
            names = sorted(p.name for p in (checkout / "dist").iterdir())
            assert any(n.endswith(".whl") for n in names) and any(n.endswith(".tar.gz") for n in names), names
            continue
        used = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=elsewhere, env=run_env,
                              capture_output=True, text=True, timeout=300)
        assert used.returncode == 0, f"after {line!r}: {used.stdout}{used.stderr}"
        where = subprocess.run([str(venv / "bin" / "kafkacore"), "info"], cwd=elsewhere, env=run_env,
                               capture_output=True, text=True, timeout=120)
        assert where.returncode == 0 and str(venv) in where.stdout, where.stdout + where.stderr
