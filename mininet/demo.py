#!/usr/bin/env python3
"""The end-to-end demo (`make run`): p4net.demo, which says what it does.

python mininet/demo.py --workers 4 --size 1000000 --density 0.1 --dtype float32
"""

import sys

from p4net.demo import main

if __name__ == "__main__":
    sys.exit(main())
