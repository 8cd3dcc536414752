"""The ``kafkacore`` command. ``kafkacore info`` reports the build; the broker's ``serve``
command arrives with the broker."""
import argparse
import sys


def _info() -> int:
    import kafkacore

    print(f"kafkacore {kafkacore.__version__}")
    print(f"native extensions: {'on' if kafkacore.native_extensions() else 'off (pure-Python twins)'}")
    if kafkacore.native_extensions():
        from kafkacore._ext import crc

        if crc.avx512_available():
            path = "AVX-512 VPCLMULQDQ folding (long buffers) + SSE4.2 crc32"
        elif crc.hardware_available():
            path = "SSE4.2 crc32, 3-way interleaved"
        else:
            path = "software slicing-by-8"
        print(f"crc32c: {path}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kafkacore", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="show the version and which native paths are in use")
    args = parser.parse_args(argv)
    if args.version:
        import kafkacore

        print(kafkacore.__version__)
        return 0
    if args.command == "info":
        return _info()
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
