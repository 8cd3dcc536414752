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
