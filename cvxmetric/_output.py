"""Keep what a dependency prints out of the project's own output.

Compiled libraries write to the process' file descriptors directly, past Python's
``sys.stdout``: HiGHS (``highspy``) prints a banner and a licence line to fd 1 the first time a
``Highs`` object is created in a process, before any option can silence it. Where a library has
no switch for such output, the call runs inside :func:`foreign_output_redirected`, which points
the file descriptor elsewhere for its duration. The report's command line runs its whole
computation inside it as well (:func:`cvxmetric.verification.cli.main`), so its stdout carries the
table or the JSON and nothing else.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional

__all__ = ["foreign_output_redirected"]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):   # a closed or replaced stream
            pass


@contextlib.contextmanager
def foreign_output_redirected(fd: int = 1, to: Optional[int] = None) -> Iterator[None]:
    """Point file descriptor ``fd`` at ``to`` (default: ``os.devnull``) while the block runs.

    Python's own ``print`` calls in the block still go to ``sys.stdout`` as usual when
    ``sys.stdout`` is not fd ``fd`` (pytest's capture, a notebook kernel); code that must print
    should do so outside the block. Where the descriptor cannot be duplicated (no fd ``fd`` in
    this process) the block runs unchanged.

    Parameters
    ----------
    fd : int
        The descriptor to redirect (1: standard output).
    to : int or None
        The descriptor that receives the output (e.g. 2 to keep it visible on stderr); None
        discards it.
    """
    _flush()
    try:
        saved = os.dup(fd)
    except OSError:
        yield
        return
    target = os.open(os.devnull, os.O_WRONLY) if to is None else to
    try:
        try:
            os.dup2(target, fd)
        except OSError:   # ``to`` is not open: discard instead
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        yield
    finally:
        _flush()
        os.dup2(saved, fd)
        os.close(saved)
        if to is None:
            os.close(target)
