"""What an approval button means for its request (core.approvals.decision_of)."""

from __future__ import annotations

from core.approvals import decision_of
from core.sessions.payloads import ApprovalOption, ApprovalRequestedPayload


def request(*options: ApprovalOption) -> ApprovalRequestedPayload:
    return ApprovalRequestedPayload(
        turn_id="t1",
        step=1,
        tool_call_id="c1",
        name="write_file",
        arguments="{}",
        options=list(options),
    )


OPTIONS = (
    ApprovalOption(option_id="once", label="Yes", kind="allow_once"),
    ApprovalOption(option_id="always", label="Always", kind="allow_always"),
    ApprovalOption(option_id="no", label="No", kind="reject_once"),
    ApprovalOption(option_id="never", label="Never", kind="reject_always"),
)


class TestDecisionOf:
    def test_the_bots_own_buttons(self) -> None:
        """Allow, Allow for this session and Deny name no option of the agent's."""
        asked = request()
        assert decision_of(asked, "allow") == ("allow", None)
        assert decision_of(asked, "session") == ("allow_session", None)
        assert decision_of(asked, "deny") == ("deny", None)

    def test_an_external_agents_option_is_answered_exactly(self) -> None:
        """opt<n> is the request's n-th option, mapped to the decision its kind means."""
        asked = request(*OPTIONS)
        assert [decision_of(asked, f"opt{n}") for n in range(4)] == [
            ("allow", "once"),
            ("allow_session", "always"),
            ("deny", "no"),
            ("deny", "never"),
        ]

    def test_a_button_that_fits_no_option(self) -> None:
        """An option the request does not have, or no option at all, means nothing."""
        asked = request(*OPTIONS[:1])
        assert decision_of(asked, "opt1") is None
        assert decision_of(asked, "optx") is None
        assert decision_of(asked, "maybe") is None
