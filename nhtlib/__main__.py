"""``python -m nhtlib build | run | list | plan``, the same as the `nht-book` command (see `nhtlib.cli.main`)."""
import sys

from nhtlib.cli.main import main

sys.exit(main())
