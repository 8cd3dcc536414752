"""What users install: every module of the source tree is in the package being tested, the
public names import from a clean directory, and ``kafkacore info`` says where the package was
loaded from. Under ci/installed_test.sh this is the installed wheel or sdist; a hand-kept
package list once left kafkacore.client out of the wheel."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _kcutil import SOURCE_ROOT
from broker_client import free_port

import kafkacore

SOURCE_PACKAGES = {"kafkacore": Path(SOURCE_ROOT) / "kafkacore",
                   "kafkacore_spark": Path(SOURCE_ROOT) / "spark_ext" / "kafkacore_spark"}


def _installed_file(top, rel):
    """Where the tested package has the module ``rel`` of package ``top``, without importing it
    (kafkacore_spark imports pyspark, which an install without the spark extra lacks)."""
    spec = importlib.util.find_spec(top)
    assert spec is not None, f"{top} is not installed"
    for location in spec.submodule_search_locations:
        for candidate in (Path(location) / rel.with_suffix(".py"), Path(location) / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@pytest.mark.skipif(not SOURCE_PACKAGES["kafkacore"].is_dir(), reason="no source tree beside the tests")
def test_every_source_module_is_in_the_tested_package():
    missing, seen = [], 0
    for top, root in SOURCE_PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            seen += 1
            if _installed_file(top, rel) is None:
                missing.append(f"{top}/{rel}.py")
    assert seen > 100 and missing == []


@pytest.mark.skipif(not SOURCE_PACKAGES["kafkacore"].is_dir(), reason="no source tree beside the tests")
def test_the_web_consoles_static_files_are_in_the_tested_package():
    """The console serves its page, scripts and styles from package data (pyproject's
    package-data, MANIFEST.in for the sdist): a wheel without them would serve nothing."""
    source = SOURCE_PACKAGES["kafkacore"] / "console" / "static"
    names = sorted(p.name for p in source.iterdir() if p.is_file())
    assert {"index.html", "app.js", "console.css"} <= set(names)
    installed = Path(importlib.util.find_spec("kafkacore.console").submodule_search_locations[0]) / "static"
    assert [n for n in names if not (installed / n).is_file()] == []
    assert all((installed / n).read_bytes() == (source / n).read_bytes() for n in names)


def test_public_names_import_from_a_clean_directory(tmp_path):
    code = ("from kafkacore import Producer, Consumer, Broker, RecordMetadata; "
            "import kafkacore.client, kafkacore.embedded, kafkacore.broker.handlers; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_spark_extension_imports_where_pyspark_is_installed(tmp_path):
    pytest.importorskip("pyspark")
    out = subprocess.run([sys.executable, "-c", "import kafkacore_spark, kafkacore_spark.source; print('ok')"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_spark_extension_without_pyspark_says_how_to_install_it(tmp_path):
    """pyspark hidden (None in sys.modules makes its import fail, installed or not): the error
    is an ImportError whose message says what to install, not one from deep inside a module."""
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "try:\n    import kafkacore_spark\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("kafkacore_spark needs PySpark") and "pip install '.[spark]'" in out.stdout, out.stdout


def test_info_says_where_the_package_was_loaded_from(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kafkacore", "info"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    where = os.path.dirname(os.path.abspath(kafkacore.__file__))
    assert f"loaded from: {where}" in out.stdout.splitlines()


@pytest.mark.skipif(not os.environ.get("KAFKACORE_TEST_INSTALLED"), reason="only against an installed package")
def test_the_installed_package_is_not_the_checkout():
    where = Path(kafkacore.__file__).resolve()
    assert Path(SOURCE_ROOT).resolve() not in where.parents
    assert "site-packages" in where.parts


@pytest.mark.skipif(not (Path(SOURCE_ROOT) / ".git").exists() or not (Path(SOURCE_ROOT) / "ci" / "main.sh").exists(),
                    reason="needs the git checkout beside the tests")
@pytest.mark.skipif(bool(os.environ.get("KAFKACORE_NO_EXTENSIONS")), reason="runs once, in the native pass")
def test_the_main_job_on_a_fresh_checkout_installs_only_what_the_broker_needs(tmp_path):
    """README's first command on a fresh copy of the checkout: ci/main.sh creates its own
    .venv, builds the extension and serves; the virtualenv holds the package's dependencies
    only (it held the test, benchmark and Spark extras, 1.1 GB, before)."""
    import signal
    import tomllib

    files = subprocess.run(["git", "-C", SOURCE_ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    checkout = tmp_path / "checkout"
    for name in filter(None, files.decode().split("\0")):
        src = Path(SOURCE_ROOT) / name
        if src.is_file():
            dst = checkout / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKACORE_", "VIRTUAL_ENV"))}

    def main_job():
        port = free_port()
        proc = subprocess.Popen(["bash", "ci/main.sh", "--port", str(port), "--data-dir", str(tmp_path / "data")],
                                cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        out = []
        try:
            for line in proc.stdout:
                out.append(line)
                if "listening on" in line:
                    break
            assert any(f"listening on 127.0.0.1:{port}" in ln for ln in out), "".join(out)[-3000:]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        return "".join(out)

    main_job()
    built = {p.name: p.stat().st_mtime_ns for p in (checkout / "kafkacore" / "_ext").glob("*.so")}
    assert len(built) == 4, built
    # the editable install compiled nothing (the extension is built once, in place)
    assert "building 'kafkacore._ext" not in (checkout / ".venv" / ".install.log").read_text()
    # a second run reuses the virtualenv and the build: nothing installed, nothing compiled, no warning
    again = main_job()
    assert "[env] installing" not in again and "WARNING" not in again, again
    assert {p.name: p.stat().st_mtime_ns for p in (checkout / "kafkacore" / "_ext").glob("*.so")} == built
    listed = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze",
                             "--disable-pip-version-check"], capture_output=True, text=True, check=True).stdout
    installed = {ln.split("==")[0].lower().replace("_", "-") for ln in listed.split()}
    extras = tomllib.loads((Path(SOURCE_ROOT) / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    only_extras = {dep.split(">")[0].split("<")[0].split("=")[0].strip().lower() for deps in extras.values()
                   for dep in deps}
    only_extras -= {"numpy", "pyarrow"}  # dependencies of the package too
    assert installed & only_extras == set()
    assert {"kafkacore", "numpy", "lz4", "zstandard", "xxhash", "cramjam"} <= installed


