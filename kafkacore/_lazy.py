"""Package attributes that load on first use (PEP 562): a package's __init__ names what it
offers without importing the modules that hold it, so importing one light module of a package
does not pay for its heavy siblings."""
import importlib


def lazy_getattr(package: str, namespace: dict, table: dict):
    """A module ``__getattr__`` for ``package``: ``table`` maps each name to the submodule that
    defines it (relative, without the leading dot); a name once loaded is kept in ``namespace``
    (the package's globals()), so the hook runs once per name."""

    def __getattr__(name):
        mod = table.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{mod}", package), name)
        namespace[name] = value
        return value

    return __getattr__
