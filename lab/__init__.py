"""The lab: coldiron's research and bookkeeping, beside the product and never installed.

What is here (``lab/README.md``): the bounds on how well Cold Iron can be played, the
experiments behind the shipped models, the report seed and its look log, the tables of the
README and docs/ rendered from their records, the shipped models' pins, the experiment log.
The lab imports the product (``coldiron_env``, ``agents``); nothing in the product imports
the lab. Run its commands from the checkout's root: ``.venv/bin/python -m lab.tables``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np

ROOT: Final = Path(__file__).resolve().parent.parent
"""The checkout the lab lives in."""
RECORDS: Final = ROOT / "lab" / "records"
"""The lab's committed records (research results, the look log, the experiment log)."""


def unpack_wins(bits: str, episodes: int) -> list[bool]:
    """The per-deal wins ``agents.evaluation.arena.pack_wins`` wrote into a record."""
    unpacked = np.unpackbits(np.frombuffer(bytes.fromhex(bits), dtype=np.uint8))[:episodes]
    return [bool(x) for x in unpacked]
