"""Chooses between the compiled extension modules and their pure-Python twins.

``KAFKACORE_NO_EXTENSIONS=1`` selects the twins. Without it a missing extension falls back
to the twin too, unless ``KAFKACORE_REQUIRE_EXTENSIONS=1`` (set by the test runner for the
native pass) makes that an error, so a broken build can't silently test the twins twice.
"""
import importlib
import os


def extensions_disabled() -> bool:
    return os.environ.get("KAFKACORE_NO_EXTENSIONS", "") not in ("", "0")


def load_native(name: str):
    """The module ``kafkacore._ext.<name>``, or None when the twins are to be used."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(f"kafkacore._ext.{name}")
    except ImportError:
        if os.environ.get("KAFKACORE_REQUIRE_EXTENSIONS", "") not in ("", "0"):
            raise
        return None
