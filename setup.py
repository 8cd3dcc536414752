"""Builds the native extension modules kafkacore._ext.* from bindings/*.pyx and _native/*.c."""
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE = "_native"
CFLAGS = ["-O3", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]
LDFLAGS = []
if os.environ.get("KAFKACORE_DEBUG_BUILD"):
    CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]
if os.environ.get("KAFKACORE_SANITIZE"):
    # ci/python_sanitize.sh: the extension under AddressSanitizer + UBSan (run with libasan preloaded)
    SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"] + SAN
    LDFLAGS = SAN


def ext(name, c_sources):
    return Extension(
        f"kafkacore._ext.{name}",
        [f"bindings/{name}.pyx"] + [os.path.join(NATIVE, c) for c in c_sources],
        include_dirs=[NATIVE, "bindings", numpy.get_include()],
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


extensions = [
    ext("crc", ["kc_crc32c.c"]),
    ext("murmur2", ["kc_murmur2.c"]),
    ext("storage", ["kc_crc32c.c", "kc_record.c", "kc_log.c"]),
    ext("records", ["kc_crc32c.c", "kc_buffer.c", "kc_record.c", "kc_columns.c", "kc_utf8.c", "kc_pool.c"]),
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
        include_path=["bindings"],
    ),
)
