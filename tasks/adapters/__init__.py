"""Adapters: the database, the mail transports, the run lock and the LLM client — the
only code that talks to the world."""
