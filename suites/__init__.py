"""WHICH scenarios run and how they are REPORTED. Never imports a framework: workers do that."""
