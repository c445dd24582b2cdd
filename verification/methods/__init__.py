"""One module per method, each defining ``SPEC`` (a :class:`cvxmetric.verification.registry.MethodSpec`)."""
