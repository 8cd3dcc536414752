"""Suite-wide setup: which implementation is under test, and Hypothesis profiles.

Environment:
  KAFKACORE_NO_EXTENSIONS=1       test the pure-Python twins (must not load the extensions)
  KAFKACORE_REQUIRE_EXTENSIONS=1  test the compiled extensions (a missing build is an error)
  CI=...                          use the deterministic "ci" Hypothesis profile
  HYPOTHESIS_PROFILE=name         pick a profile explicitly ("dev", "ci", "thorough")
  KAFKACORE_TEST_INSTALLED=1      test an installed kafkacore (ci/installed_test.sh): importing it
                                  from a source checkout is an error
  KAFKACORE_SOURCE_ROOT=dir       the checkout, for tests that read its files (README, ci/)
"""
import os

import pytest
from hypothesis import HealthCheck, settings

import kafkacore
from kafkacore import checksum, partitioner, record
from kafkacore.storage import _hot as storage_hot


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("dev", deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "ci", deadline=None, derandomize=True, database=None, max_examples=50, print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile("thorough", deadline=None, max_examples=2000, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


def _modules():
    return {m.__name__: m._native is not None for m in (checksum, partitioner, record, storage_hot)}


def _describe():
    active = kafkacore.native_extensions()
    per_module = ", ".join(f"{name.split('.')[-1]}={'native' if n else 'twin'}" for name, n in _modules().items())
    return active, (f"kafkacore {kafkacore.__version__}: native extensions "
                    f"{'ACTIVE' if active else 'NOT active (pure-Python twins)'} [{per_module}]")


def pytest_report_header(config):
    _, line = _describe()
    return [line, f"kafkacore loaded from {os.path.dirname(os.path.abspath(kafkacore.__file__))}", f"hypothesis profile: {settings.get_current_profile_name()}"]


def pytest_configure(config):
    # kafka-python (a cross-check, not the code under test) uses deprecated importlib APIs.
    for msg in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{msg}:DeprecationWarning")
    active, line = _describe()
    if _flag("KAFKACORE_TEST_INSTALLED"):
        where = os.path.dirname(os.path.abspath(kafkacore.__file__))
        if "site-packages" not in where.split(os.sep):
            raise pytest.UsageError(f"KAFKACORE_TEST_INSTALLED=1 but kafkacore was imported from {where}, "
                                    "not from an installed package")
    if _flag("KAFKACORE_REQUIRE_EXTENSIONS") and not active:
        raise pytest.UsageError(f"KAFKACORE_REQUIRE_EXTENSIONS=1 but {line}")
    if _flag("KAFKACORE_NO_EXTENSIONS") and active:
        raise pytest.UsageError(f"KAFKACORE_NO_EXTENSIONS=1 but {line}")


@pytest.fixture(scope="session", autouse=True)
def _record_mode(record_testsuite_property):
    """Puts the mode into the JUnit XML too, so a CI report says what it tested."""
    active, line = _describe()
    record_testsuite_property("kafkacore_native_extensions", str(active))
    record_testsuite_property("kafkacore_mode", line)
    # The env asserts again here so that they also hold under xdist workers.
    if _flag("KAFKACORE_REQUIRE_EXTENSIONS"):
        assert kafkacore.native_extensions() is True, line
    if _flag("KAFKACORE_NO_EXTENSIONS"):
        assert kafkacore.native_extensions() is False, line


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile as CI runs it: tests/spark/ on one worker, the long modules first
    (tests/_xdist_schedule.py)."""
    if config.getoption("dist") != "loadfile":
        return None
    from _xdist_schedule import LongestFirstLoadFile
    return LongestFirstLoadFile(config, log)


def pytest_terminal_summary(terminalreporter):
    _, line = _describe()
    terminalreporter.write_line(f"tested: {line}")
