"""Following a sequence of change notifications in the metadata store, as Kafka's
ZkNodeChangeNotificationListener does for config changes and ACL changes.

A writer adds a sequential child under a root (/config/changes/config_change_0000000042); the
child names what changed, not the change, so a reader re-reads the entity it names. Every broker
watches the root's children; each round takes, in sequence order, the notifications above the
last one processed and hands their data to the owner's handler (an owner reads each named entity
once per round however many notifications name it). A round that fails (the store unreachable)
is retried after RETRY_BACKOFF_S and processes the same notifications again: re-reading an entity
is harmless. After each round, notifications older than CHANGE_EXPIRATION_MS are deleted - every
broker does it, one already deleted by another is fine."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("kafkacore.cluster")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs (DynamicConfigManager, AclAuthorizer)
RETRY_BACKOFF_S = 1.0  # after a failed round (the store unreachable): try again


class ChangeNotificationListener:
    """Calls ``on_changes([(child name, data), ...])`` (a coroutine function, on the event loop)
    with the notifications under ``root`` not yet processed - possibly none, when a round is
    woken for another reason. ``what`` names the notifications in log lines."""

    def __init__(self, zk, root: str, prefix: str, on_changes: Callable[[list[tuple[str, bytes]]], Awaitable[None]],
                 *, node_id: int, what: str):
        self.zk = zk
        self.root = root
        self.prefix = prefix
        self.on_changes = on_changes
        self.node_id = node_id
        self.what = what
        self.last_executed = -1  # sequence number of the last notification processed
        self._ctimes: dict[int, int] = {}  # notifications seen -> creation time (ms), for the purge
        self._wake = None
        self._task = None
        self._watch = None
        self._loop = None
        self._closed = False

    async def start(self, loop):
        self._loop = loop
        self._wake = asyncio.Event()
        await self.call(self.zk.make_sure_persistent_path_exists, self.root)
        self._task = loop.create_task(self._run())
        # the watch fires at once with the current children, then on every change (kazoo's thread)
        self._watch = await self.call(self.zk.watch_children, self.root, self._on_children)

    async def call(self, fn, *args):
        """A blocking store call, off the event loop."""
        return await self._loop.run_in_executor(None, fn, *args)

    def _on_children(self, _children):
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self._closed:
            loop.call_soon_threadsafe(self._wake.set)

    def shutdown(self):
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
        if self._task is not None:
            self._task.cancel()

    async def _run(self):
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.process()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - store unreachable: the next round catches up
                log.warning("broker %d: %s not processed (%s); retrying", self.node_id, self.what, e)
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._wake.set()

    async def process(self):
        """One round: the new notifications to the owner, then the purge."""
        children = await self.call(self.zk.get_children, self.root)
        pending = sorted((int(c[len(self.prefix):]), c) for c in children
                         if c.startswith(self.prefix) and c[len(self.prefix):].isdigit())
        last = self.last_executed
        changes = []
        for seq, name in pending:
            if seq <= last:
                continue
            got = await self.call(self.zk.get_data, f"{self.root}/{name}")
            last = seq
            if got is None:
                continue  # purged by another broker meanwhile
            data, stat = got
            self._ctimes[seq] = stat.ctime
            changes.append((name, data))
        await self.on_changes(changes)
        self.last_executed = last
        await self._purge()

    async def _purge(self):
        now = int(time.time() * 1000)  # ctime is the store's wall clock
        for seq in sorted(self._ctimes):
            if seq > self.last_executed or now - self._ctimes[seq] <= CHANGE_EXPIRATION_MS:
                continue
            await self.call(self.zk.delete_recursive, f"{self.root}/{self.prefix}{seq:010d}")
            del self._ctimes[seq]
