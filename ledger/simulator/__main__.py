"""``python -m ledger.simulator``."""

import sys

from ledger.simulator.cli import main

sys.exit(main())
