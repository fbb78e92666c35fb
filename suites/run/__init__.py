"""How scenarios run: the worker's interpreter and environment, the orchestrator, the samplers, the run store."""
