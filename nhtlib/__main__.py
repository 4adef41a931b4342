"""``python -m nhtlib build | run | list | plan`` (see `nhtlib.cli.main`)."""
import sys

from nhtlib.cli.main import main

sys.exit(main())
