"""Built-in recorded sessions for the demo: ordinary work, no loops (written for loopwatch;
the demo needs no files from outside the package)."""

from __future__ import annotations

from typing import Any

from loopwatch.streams.client import Call
from loopwatch.streams.demo.conversation import Outcome
from loopwatch.streams.demo.replay import Recording, Turn


def _step(text: str | None, *calls: tuple[str, str, dict[str, Any]]) -> Turn:
    return Turn("assistant", text, calls=tuple(Call(i, n, a) for i, n, a in calls))


def _results(step: Turn, *values: Any, errors: dict[int, str] | None = None) -> Turn:
    errors = errors or {}
    return Turn(
        "results",
        outcomes=tuple(
            Outcome(call, None if i in errors else value, errors.get(i))
            for i, (call, value) in enumerate(zip(step.calls, values, strict=True))
        ),
    )


def _bugfix() -> Recording:
    find = _step(
        "I'll find where the cart total is computed.",
        ("call_01", "grep", {"pattern": "def cart_total", "path": "shop/"}),
    )
    read = _step(None, ("call_02", "read_file", {"path": "shop/cart.py", "offset": 30}))
    edit = _step(
        "The discount is applied after tax; it should be applied before.",
        (
            "call_03",
            "edit_file",
            {
                "path": "shop/cart.py",
                "old_string": "total = (subtotal * (1 + tax)) - discount",
                "new_string": "total = (subtotal - discount) * (1 + tax)",
            },
        ),
    )
    test = _step(None, ("call_04", "bash", {"command": "pytest -q tests/test_cart.py"}))
    test_error = "1 failed: test_cart_rounding (expected 10.70, got 10.7)"
    fix_rounding = _step(
        "One rounding assertion compares strings; the value itself is right. Fixing the test.",
        (
            "call_05",
            "edit_file",
            {
                "path": "tests/test_cart.py",
                "old_string": "assert str(total) == '10.70'",
                "new_string": "assert total == Decimal('10.70')",
            },
        ),
    )
    retest = _step(None, ("call_06", "bash", {"command": "pytest -q tests/test_cart.py"}))
    turns = (
        Turn("system", "You are a careful software engineer working in /srv/shop."),
        Turn("user", "Customers report totals that are too high when a coupon is used."),
        find,
        _results(find, ["shop/cart.py:41: def cart_total(items, tax, discount):"]),
        read,
        _results(read, {"content": "<lines 30-80 of shop/cart.py>", "lines": 51}),
        edit,
        _results(edit, {"replaced": 1}),
        test,
        _results(test, None, errors={0: test_error}),
        fix_rounding,
        _results(fix_rounding, {"replaced": 1}),
        retest,
        _results(retest, "12 passed in 0.41s"),
        _step("Fixed: the coupon is now subtracted before tax. All 12 cart tests pass."),
    )
    return Recording("bugfix-coupon-total", "coder", turns)


def _airline() -> Recording:
    user = _step(None, ("call_11", "get_user_details", {"user_id": "mia_li_3668"}))
    booking = _step(None, ("call_12", "get_reservation_details", {"reservation_id": "NO6JO3"}))
    change = _step(
        None,
        (
            "call_13",
            "update_reservation_flights",
            {"reservation_id": "NO6JO3", "cabin": "economy", "flights": ["HAT136"]},
        ),
    )
    turns = (
        Turn("system", "You are an airline customer-service agent. Follow the policy."),
        Turn("user", "Hi, I'd like to move my Seattle trip one day later. I'm mia_li_3668."),
        user,
        _results(user, {"name": "Mia Li", "membership": "gold", "reservations": ["NO6JO3"]}),
        booking,
        _results(booking, {"flights": ["HAT135"], "cabin": "economy", "status": "confirmed"}),
        _step("HAT136 leaves one day later at the same fare. Shall I change it for you?"),
        Turn("user", "Yes please."),
        change,
        _results(change, {"status": "confirmed", "flights": ["HAT136"]}),
        _step("Done: reservation NO6JO3 is now on HAT136. Anything else?"),
    )
    return Recording("airline-change-date", "support", turns)


def _analytics() -> Recording:
    schema = _step(
        "Looking at both tables at once.",
        ("toolu_21", "describe_table", {"table": "orders"}),
        ("toolu_22", "describe_table", {"table": "refunds"}),
    )
    query = _step(
        None,
        (
            "toolu_23",
            "run_sql",
            {
                "query": "SELECT date_trunc('week', o.created_at) AS week, "
                "count(r.id)::float / count(o.id) AS refund_rate FROM orders o "
                "LEFT JOIN refunds r ON r.order_id = o.id GROUP BY 1 ORDER BY 1"
            },
        ),
    )
    turns = (
        Turn("user", "What was the weekly refund rate over the last quarter?"),
        schema,
        _results(
            schema,
            {"columns": ["id", "created_at", "total"]},
            {"columns": ["id", "order_id", "amount"]},
        ),
        query,
        _results(query, {"rows": 13, "max": 0.041, "min": 0.018}),
        _step("The weekly refund rate ranged from 1.8% to 4.1%, peaking in week 9."),
    )
    return Recording("analytics-refund-rate", "analyst", turns)


BUILTIN: tuple[Recording, ...] = (_bugfix(), _airline(), _analytics())
"""Clean sessions: none of them should ever get a warning."""
