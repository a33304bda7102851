"""The fault tests start real `serve` processes the way tests/test_serve.py does."""

from tests.test_serve import served  # noqa: F401  (a fixture, found by name)
