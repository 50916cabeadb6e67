"""How many examples a property test runs under the loaded hypothesis profile (tests/conftest.py).

`examples(300)` is 300 under the `ci` profile (`make test`) and 30 under `fast` (`make test-fast`): the
profile's `max_examples` (100 or 10) scales each test's own full count, never below 5.
"""

from __future__ import annotations

from hypothesis import settings

CI_EXAMPLES = 100
"""The `ci` profile's max_examples: the scale at which `examples(n)` is `n`."""


def examples(full: int) -> int:
    """The example count for a test whose full run is `full` examples, under the profile in force."""
    return max(5, full * settings.default.max_examples // CI_EXAMPLES)
