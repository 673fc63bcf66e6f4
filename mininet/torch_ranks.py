#!/usr/bin/env python3
"""torchrun for the Mininet topology: p4net.torch_ranks, which says what it does.

python mininet/torch_ranks.py --workers 4 -- python examples/clicks_rank.py --backend p4reduce
"""

import sys

from p4net.torch_ranks import main

if __name__ == "__main__":
    sys.exit(main())
