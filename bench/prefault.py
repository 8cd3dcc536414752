"""Touching fresh memory before a timed part, for the benchmarks that write to the page cache."""


def prefault_memory(gib):
    """Touches ``gib`` GiB of fresh memory once and frees it, just before a timed part. On this
    VM (Firecracker, virtio-balloon with free page reporting) a guest page the host has not
    backed costs a host page fault on first use, and freed pages are handed back to the host
    within seconds: a new 1 GiB file is written at 0.4-0.9 GB/s, or 2-4.5 GB/s right after
    memory was touched (dd, 2026-11-26). A server's memory is backed; without this, a
    broker's or a follower's page-cache writes measure the hypervisor."""
    import numpy as np

    block = np.ones(gib << 30, dtype=np.uint8)  # every page written once
    del block
