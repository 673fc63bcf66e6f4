"""softswitch/interp/cse.py: repeated subexpressions of an action body computed once, with
the same results as the body as written (run both on many inputs), and never hoisted where
that could raise or read a stale value."""

from __future__ import annotations

import random

import pytest

from softswitch.interp.cse import hoist_common

WIDE = (1 << 4096) - 1


def run(lines: list[str], env: dict) -> dict:
    """Locals after running the body as a function over `env`'s names."""
    names = sorted(env)
    src = f"def body({', '.join(names)}):\n" + "".join(f"    {ln}\n" for ln in lines)
    src += "    return {k: v for k, v in locals().items() if not k.startswith('_c')}\n"
    ns: dict = {}
    exec(compile(src, "<test>", "exec"), ns)  # noqa: S102 - the test's own source
    try:
        return ns["body"](**env)
    except Exception as exc:  # noqa: BLE001 - compared by type
        return {"raised": type(exc).__name__}


def small(name: str) -> bool:
    return name in ("f1", "f2")


BODY = [
    "f3 = ((f1 + f2) & 0xff) | ((f1 + f2) & 0xff) << 8",
    "f4 = (0x1 if ((f1 + f2) & 0xff) == f3 else 0x0) if f5 else ((f1 + f2) & 0xff)",
    "f1 = f1 + 1",  # f1 changes: (f1 + f2) below is a new value
    "f6 = ((f1 + f2) & 0xff) + ((f1 + f2) & 0xff)",
    "if f6 > 4:",
    "    f2 = 0",
    "f7 = ((f1 + f2) & 0xff) * ((f1 + f2) & 0xff)",  # f2 may have changed in the if
    "f8 = (P[0] ^ f5) + (P[0] ^ f5)",
    f"f9 = ((f5 + f5) & {hex(WIDE)}) - ((f5 + f5) & {hex(WIDE)})",
]


def test_hoisted_body_computes_what_the_body_does():
    out = hoist_common(BODY, small)
    assert out != BODY and any(line.startswith("_c") for line in out)
    rng = random.Random(1)
    for _ in range(300):
        env = {
            "f1": rng.randrange(1 << 16),
            "f2": rng.randrange(1 << 16),
            "f5": rng.choice([0, 1, rng.randrange(1 << 4096)]),
            "P": [rng.randrange(1 << 32)],
        }
        assert run(out, env) == run(BODY, env), env


def test_a_value_read_after_its_names_change_is_computed_again():
    out = hoist_common(["a = (x + 1) * 2", "x = 5", "b = (x + 1) * 2"], lambda n: False)
    assert out == ["a = (x + 1) * 2", "x = 5", "b = (x + 1) * 2"]


@pytest.mark.parametrize(
    "line",
    [
        # a shift by a variable in one arm only: hoisting it would raise when c is false
        "y = ((1 << n) + (1 << n)) if c else 0",
        # a division by a variable after `and`: evaluated only when n != 0
        "y = (n != 0) and ((10 // n) + (10 // n) > 1)",
    ],
)
def test_what_may_raise_stays_where_it_was_evaluated(line):
    out = hoist_common([line], lambda n: False)
    for env in ({"n": -1, "c": 0}, {"n": 0, "c": 0}, {"n": 3, "c": 1}):
        assert run(out, env) == run([line], env)
    assert out == [line]


def test_a_shift_by_a_narrow_unsigned_field_may_be_hoisted_from_an_arm():
    line = "y = ((1 << f1) + (1 << f1)) if c else 0"
    out = hoist_common([line], small)
    assert out[0].startswith("_c") and len(out) == 2
    for env in ({"f1": 7, "c": 0}, {"f1": 7, "c": 1}):
        assert run(out, env) == run([line], env)


def test_registers_and_the_phv_are_never_hoisted():
    body = ["a = R1[i] + R1[i]", "R1[i] = 3", "b = F[2] + F[2]", "c = V[1] + V[1]"]
    assert hoist_common(body, lambda n: False) == body


def test_a_body_with_nothing_repeated_is_left_as_it_is():
    body = ["a = x + 1", "b = y * 2"]
    assert hoist_common(body, lambda n: False) is body
