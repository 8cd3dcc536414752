"""Builds the native extension modules kafkacore._ext.* from bindings/*.pyx and _native/*.c.

- ccache, when it is on PATH and CC is not set, compiles: the same sources with the same flags
  (the editable build, the wheel, the sdist's build, another virtualenv's install) are then
  compiled once per machine. The compile commands name no build-environment path (the
  bindings use no numpy C API), so builds in pip's temporary directories hit the cache too.
- KAFKACORE_NO_EXTENSION_BUILD=1 builds no extension: ci/env.sh's editable install, whose
  extension is then built once in place (build_ext --inplace) instead of twice.
"""
import copy
import os
import shutil
import sysconfig

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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


if "CC" not in os.environ and shutil.which("ccache") and not os.environ.get("KAFKACORE_NO_CCACHE"):
    os.environ["CC"] = "ccache " + (sysconfig.get_config_var("CC") or "cc")
    # pip builds in a new temporary directory each time: leave the directory out of the hash
    os.environ.setdefault("CCACHE_NOHASHDIR", "1")


def ext(name, c_sources):
    return Extension(
        f"kafkacore._ext.{name}",
        [f"bindings/{name}.pyx"] + [os.path.join(NATIVE, c) for c in c_sources],
        include_dirs=[NATIVE, "bindings"],
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
    )


class BuildExtension(build_ext):
    """Gives every extension its own object directory.

    Several extensions compile the same C file (kc_crc32c.c); under `build_ext -j` they are
    built concurrently and would otherwise write and link the same object file at once.
    """

    def build_extension(self, ext):
        own = copy.copy(self)
        own.build_temp = os.path.join(self.build_temp, ext.name)
        build_ext.build_extension(own, ext)


extensions = [
    ext("crc", ["kc_crc32c.c"]),
    ext("murmur2", ["kc_murmur2.c"]),
    ext("storage", ["kc_crc32c.c", "kc_record.c", "kc_log.c"]),
    ext("records", ["kc_crc32c.c", "kc_murmur2.c", "kc_buffer.c", "kc_record.c", "kc_append.c", "kc_columns.c", "kc_utf8.c", "kc_pool.c"]),
]

if os.environ.get("KAFKACORE_NO_EXTENSION_BUILD"):
    setup()
else:
    setup(
        cmdclass={"build_ext": BuildExtension},
        ext_modules=cythonize(
            extensions,
            compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                                 "cdivision": True, "initializedcheck": False},
            include_path=["bindings"],
        ),
    )
