"""One module per method, each defining ``SPEC`` (a :class:`verification.registry.MethodSpec`)."""
