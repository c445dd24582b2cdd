"""The program ``python -m cvxmetric.verification``: the harness' report, or, as ``... check``, the
problems' check of a metric learned on the user's data (:mod:`cvxmetric.problems.cli`). A program
is no layer (design §2): it may start any of them."""
import sys

if sys.argv[1:2] == ["check"]:
    from cvxmetric.problems.cli import main as check

    raise SystemExit(check(sys.argv[2:]))

from .cli import main

raise SystemExit(main())
