"""ConfigError, in a module of its own that imports nothing: the settings, the URL parsers
and the adapters that refuse a setting all import it from here, so that none of them has
to import another to say "this setting is wrong" (no import cycle runs through it)."""


class ConfigError(ValueError):
    """A setting is missing or malformed; the message is one line meant for the operator,
    naming the setting and the fix, never its secret."""
