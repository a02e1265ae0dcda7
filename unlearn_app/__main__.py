"""``python -m unlearn_app`` runs the ``unlearn`` command (useful where the console script is not on PATH)."""

import sys

from unlearn_app.cli import main

sys.exit(main())
