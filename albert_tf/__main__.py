"""`python -m albert_tf` runs the `albert-tf` command line."""

import sys

from albert_tf.cli import main

sys.exit(main())
