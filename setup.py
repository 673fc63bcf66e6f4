"""hostlib's compiled kernels: the one thing pyproject.toml cannot declare stably.

numerics' per-value passes (hostlib/_kernels.c; each picks its vector unit when it
loads), built without fast-math or contraction, so each value is the one IEEE operation
numerics states, bit for bit; without debug information, so two builds of one source are
the same file (tests/test_packaging.py). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hostlib._kernels",
            ["hostlib/_kernels.c"],
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", "-g0"],
        )
    ]
)
