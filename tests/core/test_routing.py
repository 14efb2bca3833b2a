"""BoundDeliveryRouter: every reason code, in SPEC.md's order."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.routing import BoundDeliveryRouter
from tests.fixtures.bindings import T0, StaticLookup, binding, conv, later

PARENT = "100"


def router(*records, now=None, **kwargs) -> tuple[BoundDeliveryRouter, StaticLookup]:
    lookup = StaticLookup(*records)
    return BoundDeliveryRouter(lookup, clock=FakeClock(now or later(1)), **kwargs), lookup


class TestReasonCodes:
    def test_missing_target_session(self) -> None:
        """An empty session key falls back without asking the service."""
        r, lookup = router(binding("s", conv("t1", PARENT)))
        res = r.resolve_destination(target_session_key="", requester=conv(PARENT))
        assert (res.mode, res.reason, res.binding) == ("fallback", "missing-target-session", None)
        assert lookup.calls == []

    def test_no_active_binding(self) -> None:
        """A session with no bindings falls back."""
        r, _ = router(binding("other", conv("t1", PARENT)))
        res = r.resolve_destination(target_session_key="s", requester=conv(PARENT))
        assert (res.mode, res.reason) == ("fallback", "no-active-binding")

    def test_single_active_binding_without_requester(self) -> None:
        """Without a requester, the only live binding is the destination."""
        b = binding("s", conv("t1", PARENT))
        r, _ = router(b)
        res = r.resolve_destination(target_session_key="s")
        assert (res.mode, res.reason, res.binding) == ("bound", "single-active-binding", b)

    def test_ambiguous_without_requester(self) -> None:
        """Without a requester, two live bindings cannot be told apart."""
        r, _ = router(binding("s", conv("t1", PARENT)), binding("s", conv("t2", PARENT)))
        res = r.resolve_destination(target_session_key="s")
        assert (res.mode, res.reason, res.binding) == (
            "fallback",
            "ambiguous-without-requester",
            None,
        )

    @pytest.mark.parametrize("field", ["channel", "account_id", "conversation_id"])
    def test_invalid_requester(self, field: str) -> None:
        """A requester missing its channel, account or conversation id falls back."""
        r, _ = router(binding("s", conv("t1", PARENT)))
        bad = conv(PARENT).model_copy(update={field: ""})
        res = r.resolve_destination(target_session_key="s", requester=bad)
        assert (res.mode, res.reason) == ("fallback", "invalid-requester")

    def test_requester_match_exact_conversation(self) -> None:
        """A completion asked for inside the bound thread goes to that thread."""
        a, b = binding("s", conv("t1", PARENT)), binding("s", conv("t2", PARENT))
        r, _ = router(a, b)
        res = r.resolve_destination(target_session_key="s", requester=conv("t2", PARENT))
        assert (res.mode, res.reason, res.binding) == ("bound", "requester-match", b)

    def test_requester_match_exact_beats_child(self) -> None:
        """The requester's own conversation wins over a thread under it."""
        own, child = binding("s", conv(PARENT)), binding("s", conv("t1", PARENT))
        r, _ = router(child, own)
        res = r.resolve_destination(target_session_key="s", requester=conv(PARENT))
        assert res.binding == own

    def test_requester_match_child_of_requester(self) -> None:
        """A thread whose parent is the requester's channel is chosen over other threads."""
        elsewhere = binding("s", conv("t9", "999"))
        child = binding("s", conv("t1", PARENT))
        r, _ = router(elsewhere, child)
        res = r.resolve_destination(target_session_key="s", requester=conv(PARENT))
        assert (res.mode, res.reason, res.binding) == ("bound", "requester-match", child)

    def test_requester_match_several_children_picks_most_recent(self) -> None:
        """Two threads of one session under the requester: the most recently active wins."""
        old = binding("s", conv("t1", PARENT), last_activity_at=later(1))
        new = binding("s", conv("t2", PARENT), last_activity_at=later(2))
        r, _ = router(old, new, now=later(3))
        res = r.resolve_destination(target_session_key="s", requester=conv(PARENT))
        assert (res.mode, res.binding) == ("bound", new)

    def test_requester_match_only_binding_on_account(self) -> None:
        """The only binding on the requester's channel and account is chosen."""
        b = binding("s", conv("t1", "555"))
        r, _ = router(b, binding("s", conv("t7", "555", account="other")))
        res = r.resolve_destination(target_session_key="s", requester=conv(PARENT))
        assert (res.mode, res.reason, res.binding) == ("bound", "requester-match", b)

    def test_single_active_binding_fallback_when_fail_open(self) -> None:
        """With fail_closed off, the one binding on another account is used."""
        b = binding("s", conv("t1", PARENT, account="other"))
        r, _ = router(b)
        res = r.resolve_destination(
            target_session_key="s", requester=conv(PARENT), fail_closed=False
        )
        assert (res.mode, res.reason, res.binding) == (
            "bound",
            "single-active-binding-fallback",
            b,
        )

    def test_no_requester_match_when_fail_closed(self) -> None:
        """With fail_closed on, a binding on another account is never used."""
        r, _ = router(binding("s", conv("t1", PARENT, account="other")))
        res = r.resolve_destination(
            target_session_key="s", requester=conv(PARENT), fail_closed=True
        )
        assert (res.mode, res.reason, res.binding) == ("fallback", "no-requester-match", None)

    def test_no_requester_match_with_several_elsewhere(self) -> None:
        """Fail-open still refuses to guess between two bindings elsewhere."""
        r, _ = router(
            binding("s", conv("t1", PARENT, account="x")),
            binding("s", conv("t2", PARENT, account="y")),
        )
        res = r.resolve_destination(
            target_session_key="s", requester=conv(PARENT), fail_closed=False
        )
        assert (res.mode, res.reason) == ("fallback", "no-requester-match")

    def test_several_on_account_none_matching_falls_back(self) -> None:
        """Two bindings on the account, neither the requester nor under it: no guess."""
        r, _ = router(binding("s", conv("t1", "555")), binding("s", conv("t2", "556")))
        res = r.resolve_destination(
            target_session_key="s", requester=conv(PARENT), fail_closed=False
        )
        assert (res.mode, res.reason) == ("fallback", "no-requester-match")


class TestIsolation:
    def test_same_conversation_id_on_two_accounts(self) -> None:
        """A conversation id bound on account A does not match a requester on account B."""
        on_a = binding("s", conv("t1", PARENT, account="a"))
        on_b_other = binding("s", conv("t2", "777", account="b"))
        r, _ = router(on_a, on_b_other)
        res = r.resolve_destination(target_session_key="s", requester=conv("t1", account="b"))
        assert res.binding == on_b_other  # the only one on account b, not the same id on a

    def test_same_conversation_id_on_two_channels(self) -> None:
        """The channel is part of a conversation's identity."""
        r, _ = router(binding("s", conv("t1", PARENT, channel="slack")))
        res = r.resolve_destination(target_session_key="s", requester=conv("t1"), fail_closed=True)
        assert (res.mode, res.reason) == ("fallback", "no-requester-match")

    def test_channel_name_case(self) -> None:
        """'Discord' and 'discord' are one channel."""
        b = binding("s", conv("t1", PARENT, channel="Discord"))
        r, _ = router(b)
        res = r.resolve_destination(target_session_key="s", requester=conv("t1", channel="DISCORD"))
        assert (res.mode, res.reason, res.binding) == ("bound", "requester-match", b)

    def test_two_sessions_bound_under_one_parent(self) -> None:
        """Each session's completion goes to its own thread, never to the parent or a sibling."""
        a = binding("session-a", conv("ta", PARENT))
        b = binding("session-b", conv("tb", PARENT))
        r, _ = router(a, b)
        ra = r.resolve_destination(target_session_key="session-a", requester=conv(PARENT))
        rb = r.resolve_destination(target_session_key="session-b", requester=conv(PARENT))
        assert (ra.mode, ra.binding) == ("bound", a)
        assert (rb.mode, rb.binding) == ("bound", b)


class TestStaleBindings:
    @pytest.mark.parametrize("status", ["ended", "ending"])
    def test_non_active_never_resolves(self, status: str) -> None:
        """A service that hands back an ended or ending binding is not believed."""
        r, _ = router(binding("s", conv("t1", PARENT), status=status))
        res = r.resolve_destination(target_session_key="s", requester=conv("t1", PARENT))
        assert (res.mode, res.reason, res.binding) == ("fallback", "no-active-binding", None)

    def test_expired_never_resolves(self) -> None:
        """A binding whose expires_at has passed is not resolved, even without a requester."""
        r, _ = router(binding("s", conv("t1", PARENT), expires_at=later(5)), now=later(5))
        res = r.resolve_destination(target_session_key="s", fail_closed=False)
        assert (res.mode, res.reason) == ("fallback", "no-active-binding")

    def test_expired_does_not_make_live_one_ambiguous(self) -> None:
        """An expired sibling is ignored, so the live binding is the single one."""
        live = binding("s", conv("t2", PARENT))
        r, _ = router(binding("s", conv("t1", PARENT), expires_at=T0), live)
        res = r.resolve_destination(target_session_key="s")
        assert (res.reason, res.binding) == ("single-active-binding", live)


class TestLogging:
    def test_every_resolution_logs_one_event(self) -> None:
        """Each resolution emits exactly one routing.resolved with mode and reason."""
        b = binding("s", conv("t1", PARENT))
        r, _ = router(b)
        with capture_logs() as logs:
            r.resolve_destination(target_session_key="s", requester=conv(PARENT))
            r.resolve_destination(target_session_key="nope", requester=conv(PARENT))
        events = [e for e in logs if e["event"] == "routing.resolved"]
        assert len(events) == 2
        assert (events[0]["mode"], events[0]["reason"], events[0]["binding_id"]) == (
            "bound",
            "requester-match",
            b.binding_id,
        )
        assert (events[1]["mode"], events[1]["reason"], events[1]["binding_id"]) == (
            "fallback",
            "no-active-binding",
            None,
        )

    def test_a_fallback_names_the_guild_it_was_asked_in(self) -> None:
        """With no binding to take it from, the caller's scope is the line's guild."""
        r, _ = router()
        with capture_logs() as logs:
            r.resolve_destination(target_session_key="s", requester=conv(PARENT), scope="g-7")
        (event,) = [e for e in logs if e["event"] == "routing.resolved"]
        assert (event["mode"], event["account"], event["guild"]) == (
            "fallback",
            conv(PARENT).account_id,
            "g-7",
        )
