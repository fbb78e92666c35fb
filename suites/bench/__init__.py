"""The suites as pytest-benchmark files, and what runs them."""
