"""HOW it is run: one adapter per framework, and the worker that runs one scenario in its own process."""
