"""WHAT is measured: framework-neutral model specs, scenarios and the record format."""
