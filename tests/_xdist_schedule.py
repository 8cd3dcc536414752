"""CI's pytest-xdist schedule (ci/env.sh: `-n 2 --dist loadfile`): whole modules per worker, as
xdist's loadfile, with two changes that shorten a pass without changing what runs.

- tests/spark/ is one unit: its Spark session and broker are session-scoped (a JVM that takes
  tens of seconds to start, and holds ~1 GB), so loadfile, spreading its modules over both
  workers, started them twice.
- The long units go first. loadfile hands out modules with the most tests first, so the cluster
  modules (a few tests, each minutes of three brokers and a ZooKeeper) came last and one worker
  ran them alone while the other sat idle. Longest first, the many short modules fill the end.
  A unit's length is guessed from where it is or what it is (what it starts: JVMs, clusters,
  fresh virtualenvs, subprocess loops), then from its number of tests.
"""
from xdist.scheduler import LoadFileScheduling

# test directories whose modules start JVMs, clusters or other clients' processes: seconds to
# minutes per test, whatever their number
_LONG_DIRS = ("spark", "cluster", "compat", "tools")
# modules elsewhere with a few tests of a minute or more each (measured on the wheel pass): fresh
# virtualenvs that compile the extension or install PySpark, a Spark pipeline in its own JVM,
# SIGKILL loops, hypothesis parity runs over whole segments; loadfile sent most of them last
_LONG_MODULES = ("test_install_docs.py", "test_packaging.py", "test_readme.py", "test_eos_kill_loop.py",
                 "test_storage_hot.py", "test_client_transactions.py")
# the directory whose modules share session-scoped servers: one unit, on one worker
_ONE_UNIT_DIR = "spark"


def _dirs(path):
    return path.split("/")[:-1]


class LongestFirstLoadFile(LoadFileScheduling):
    _ordered = False

    def _split_scope(self, nodeid):
        path = nodeid.split("::", 1)[0]
        dirs = _dirs(path)
        if _ONE_UNIT_DIR in dirs:
            return "/".join(dirs[:dirs.index(_ONE_UNIT_DIR) + 1]) + "/"
        return path

    def _assign_work_unit(self, node):
        if not self._ordered:
            # the first assignment: order the whole queue once, as schedule() has filled it
            units = sorted(self.workqueue.items(), key=_length, reverse=True)
            self.workqueue.clear()
            self.workqueue.update(units)
            self._ordered = True
        super()._assign_work_unit(node)


def _length(unit):
    scope, tests = unit
    dirs = scope.rstrip("/").split("/")
    # a long module's minutes are in a few tests, so it goes before the long directories' modules
    rank = (3 if _ONE_UNIT_DIR in dirs else 2 if dirs[-1] in _LONG_MODULES
            else 1 if any(d in _LONG_DIRS for d in dirs[:-1]) else 0)
    return rank, len(tests)
