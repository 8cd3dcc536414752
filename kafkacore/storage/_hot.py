"""The storage engine's native hot paths (kafkacore._ext.storage), or their pure-Python twin
(_hot_py) with KAFKACORE_NO_EXTENSIONS=1 or when the extension is missing."""
from .._loader import load_native

_native = load_native("storage")
if _native is not None:
    hot = _native
else:
    from . import _hot_py as hot

IS_NATIVE = _native is not None
__all__ = ["IS_NATIVE", "hot"]
