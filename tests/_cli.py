"""Running the ``kafkacore`` command as its users do: a subprocess ``python -m kafkacore ...``
started from the checkout's root (as broker_client.BrokerProcess starts brokers), so it runs the
code under test; the suite's environment (PYTHONPATH, KAFKACORE_NO_EXTENSIONS) passes through."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from broker_client import ROOT


@dataclass
class Result:
    args: list
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def jsonl(self):
        return [json.loads(line) for line in self.out.splitlines()]

    def lines(self):
        return self.out.splitlines()

    def table(self):
        """The rows of a table printed alone, as {HEADER: cell}, split on runs of 2+ spaces."""
        import re

        lines = [line for line in self.lines() if line.strip()]
        heads = re.split(r"\s{2,}", lines[0].strip())
        return [dict(zip(heads, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]


def kafkacore(*args, bootstrap=None, timeout=60.0, check=True, input=None) -> Result:
    """Runs ``kafkacore [-b bootstrap] args...``; with ``check``, a non-zero exit fails the test
    with what the command printed."""
    argv = [sys.executable, "-m", "kafkacore"] + (["-b", bootstrap] if bootstrap else []) + [str(a) for a in args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT), input=input)
    result = Result(argv[3:], p.returncode, p.stdout, p.stderr)
    if check and p.returncode != 0:
        raise AssertionError(f"kafkacore {' '.join(result.args)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return result


def fails(*args, code, bootstrap=None, timeout=60.0) -> str:
    """Runs a command that must fail with ``code`` and report it in one line on stderr, no
    traceback, nothing on stdout; returns that line."""
    r = kafkacore(*args, bootstrap=bootstrap, timeout=timeout, check=False)
    assert r.code == code, f"kafkacore {' '.join(r.args)} exited {r.code}, expected {code}:\n{r.out}{r.err}"
    assert "Traceback" not in r.err, r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkacore "), r.err
    assert r.out == "", r.out
    return lines[0]


def read_terminal(leader: int) -> bytes:
    """All a pseudo-terminal's leader side holds once its follower is closed. One read returns
    only what has reached the leader at that moment (perhaps the first draw of several), so read
    until the end, which Linux reports as EIO."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
