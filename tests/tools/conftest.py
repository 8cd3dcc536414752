"""The operator tools' tests run the ``kafkacore`` command against real brokers; tests/ holds the
shared helpers (broker_client, _cli, _peers)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
