"""Commands typed as text, parsed against command definitions (``/`` or Matrix's ``!``)."""

from __future__ import annotations

import pytest

from core.command_text import (
    CommandTextError,
    Token,
    help_entries,
    parse_command,
    parse_typing,
    tokenize,
)

AGENTS = {
    "name": "agents",
    "type": 1,
    "description": "Start and list subagents.",
    "options": [
        {
            "type": 1,
            "name": "spawn",
            "description": "Start a subagent on a task.",
            "options": [
                {"type": 3, "name": "task", "description": "What", "required": True},
                {"type": 3, "name": "agent", "description": "Who", "required": False},
                {
                    "type": 3,
                    "name": "mode",
                    "description": "How",
                    "required": False,
                    "choices": [
                        {"name": "run", "value": "run"},
                        {"name": "session", "value": "session"},
                    ],
                },
            ],
        },
        {"type": 1, "name": "list", "description": "Bound threads."},
    ],
}
CONFIG = {
    "name": "config",
    "type": 1,
    "description": "Flags.",
    "options": [
        {
            "type": 2,
            "name": "flags",
            "description": "A group.",
            "options": [
                {
                    "type": 1,
                    "name": "set",
                    "description": "Set a flag.",
                    "options": [
                        {"type": 3, "name": "key", "description": "k", "required": True},
                        {"type": 5, "name": "value", "description": "v", "required": True},
                        {"type": 4, "name": "hours", "description": "h"},
                        {"type": 10, "name": "ratio", "description": "r"},
                        {"type": 6, "name": "user", "description": "u"},
                        {"type": 7, "name": "channel", "description": "c"},
                    ],
                }
            ],
        }
    ],
}
STEER = {
    "name": "steer",
    "type": 1,
    "description": "Steer the agent.",
    "options": [{"type": 3, "name": "text", "description": "t", "required": True}],
}
USER_MENU = {"name": "Inspect", "type": 2, "description": ""}
DEFINITIONS = [AGENTS, CONFIG, STEER, USER_MENU]


class TestTokenize:
    def test_named_quoted_and_bare_words(self) -> None:
        assert tokenize('agents spawn task:"look into \\"X\\" now" mode:session') == [
            Token("agents"),
            Token("spawn"),
            Token('look into "X" now', "task"),
            Token("session", "mode"),
        ]

    def test_single_and_typographic_quotes(self) -> None:
        assert tokenize("a:'one two' b:“three four”") == [
            Token("one two", "a"),
            Token("three four", "b"),
        ]

    def test_unclosed_quote_is_an_error(self) -> None:
        with pytest.raises(CommandTextError, match="not closed"):
            tokenize('task:"never closed')

    def test_colon_inside_a_value_is_kept(self) -> None:
        assert tokenize("url:http://x/y") == [Token("http://x/y", "url")]


class TestParse:
    def test_spawn_with_options(self) -> None:
        parsed = parse_command('/agents spawn task:"research X" mode:session', DEFINITIONS)
        assert parsed.path == ("agents", "spawn")
        assert parsed.command == "agents spawn"
        assert parsed.options == {"task": "research X", "mode": "session"}

    def test_names_are_case_insensitive_and_choices_accept_names(self) -> None:
        parsed = parse_command("/Agents SPAWN Task:x MODE:Session", DEFINITIONS)
        assert parsed.options == {"task": "x", "mode": "session"}

    def test_loose_words_fill_the_first_unset_option(self) -> None:
        assert parse_command("/steer change course now", DEFINITIONS).options == {
            "text": "change course now"
        }
        parsed = parse_command("/agents spawn mode:run dig into logs", DEFINITIONS)
        assert parsed.options == {"mode": "run", "task": "dig into logs"}

    def test_an_unquoted_text_value_runs_to_the_next_real_option(self) -> None:
        """``task:unquoted words here`` is the task, not a task and an agent named the rest."""
        parsed = parse_command("/agents spawn task:unquoted words here", DEFINITIONS)
        assert parsed.options == {"task": "unquoted words here"}
        parsed = parse_command("/agents spawn task:look into  the logs mode:session", DEFINITIONS)
        assert parsed.options == {"task": "look into  the logs", "mode": "session"}
        parsed = parse_command("/agents spawn task:a\nsecond line agent:scout", DEFINITIONS)
        assert parsed.options == {"task": "a\nsecond line", "agent": "scout"}

    def test_words_naming_no_option_stay_in_the_value(self) -> None:
        parsed = parse_command(
            '/agents spawn task:take a note: read http://x/y say "hi" mode:run', DEFINITIONS
        )
        assert parsed.options == {"task": 'take a note: read http://x/y say "hi"', "mode": "run"}
        parsed = parse_command("/agents spawn task:x colour:red", DEFINITIONS)
        assert parsed.options == {"task": "x colour:red"}

    def test_one_word_values_leave_the_rest_loose(self) -> None:
        """Choices, numbers and flags are one word; the words after them fill the task."""
        parsed = parse_command("/agents spawn mode:session dig into logs", DEFINITIONS)
        assert parsed.options == {"mode": "session", "task": "dig into logs"}
        with pytest.raises(CommandTextError, match="hours must be an integer, not 'many'"):
            parse_command("/config flags set key:k value:on hours:many more", DEFINITIONS)

    def test_an_empty_value_takes_the_words_after_it(self) -> None:
        parsed = parse_command("/agents spawn task: hello there", DEFINITIONS)
        assert parsed.options == {"task": "hello there"}

    def test_subcommand_group_and_typed_values(self) -> None:
        parsed = parse_command(
            "/config flags set key:spawnSubagentSessions value:yes hours:3 ratio:0.5 "
            "user:<@!42> channel:<#7>",
            DEFINITIONS,
        )
        assert parsed.path == ("config", "flags", "set")
        assert parsed.options == {
            "key": "spawnSubagentSessions",
            "value": True,
            "hours": 3,
            "ratio": 0.5,
            "user": 42,
            "channel": 7,
        }

    def test_names_resolve_through_the_resolver(self) -> None:
        seen = []

        def resolve(kind: int, name: str) -> int | None:
            seen.append((kind, name))
            return {"alice": 5, "general": 9}.get(name)

        parsed = parse_command(
            "/config flags set key:k value:off user:@alice channel:#general",
            DEFINITIONS,
            resolve=resolve,
        )
        assert parsed.options["value"] is False
        assert (parsed.options["user"], parsed.options["channel"]) == (5, 9)
        assert seen == [(6, "alice"), (7, "general")]

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("agents list", "starts with /"),
            ("/", "type a command name"),
            ("/nope", "no command /nope; known: /agents, /config, /steer"),
            ("/agents", "needs a subcommand: one of spawn, list"),
            ("/agents fly", "has no subcommand 'fly'"),
            ("/agents spawn mode:run", "needs task"),
            ("/agents spawn task:x mode:forever", "mode must be one of run|session"),
            ("/agents spawn colour:red task:x", "has no option 'colour'"),
            ("/agents spawn task:x task:y", "given twice"),
            ("/agents list extra words", "don't know what 'extra words' is for"),
            ("/config flags set key:k value:maybe", "value must be true or false"),
            ("/config flags set key:k value:on hours:many", "hours must be an integer"),
            ("/config flags set key:k value:on user:bob", "no @user called 'bob'"),
        ],
    )
    def test_errors_say_what_would_work(self, text: str, message: str) -> None:
        with pytest.raises(CommandTextError, match=message.replace("|", r"\|")):
            parse_command(text, DEFINITIONS)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("/help", "starts with !"),
            ("!", "type a command name after the !; !help lists them"),
            ("!nope", "no command !nope; known: !agents, !config, !steer"),
            ("!agents", "!agents needs a subcommand"),
            ("!agents spawn mode:run", "!agents spawn needs task"),
            ("!agents list extra", "!agents list: don't know what 'extra' is for"),
        ],
    )
    def test_another_prefix_is_spelled_in_the_errors(self, text: str, message: str) -> None:
        """With ``!`` (Matrix), the same errors name commands with ``!``."""
        with pytest.raises(CommandTextError, match=message):
            parse_command(text, DEFINITIONS, prefix="!")

    def test_another_prefix_parses_the_same(self) -> None:
        """``!agents spawn …`` means what ``/agents spawn …`` means."""
        line = 'agents spawn task:"look into X" mode:session'
        assert parse_command("!" + line, DEFINITIONS, prefix="!") == parse_command(
            "/" + line, DEFINITIONS
        )

    def test_context_menu_commands_are_not_typed(self) -> None:
        with pytest.raises(CommandTextError, match="no command /Inspect"):
            parse_command("/Inspect", DEFINITIONS)


def test_help_lists_every_invocable_path() -> None:
    usages = [(e.usage, e.description) for e in help_entries(DEFINITIONS)]
    assert usages == [
        ("/agents list", "Bound threads."),
        (
            "/agents spawn task:<text> [agent:<text>] [mode:run|session]",
            "Start a subagent on a task.",
        ),
        (
            "/config flags set key:<text> value:<true|false> [hours:<integer>] "
            "[ratio:<number>] [user:<@user>] [channel:<#channel>]",
            "Set a flag.",
        ),
        ("/steer text:<text>", "Steer the agent."),
    ]


def test_help_spells_the_prefix() -> None:
    """A help list for ``!`` shows ``!`` commands."""
    usages = [e.usage for e in help_entries(DEFINITIONS, prefix="!")]
    assert usages[0] == "!agents list"
    assert usages[-1] == "!steer text:<text>"


class TestTyping:
    """The option the cursor is in, when the bot autocompletes it (as Discord's client asks)."""

    CONFIG = {
        "name": "config",
        "type": 1,
        "options": [
            {
                "type": 1,
                "name": "set",
                "options": [
                    {"type": 3, "name": "key", "required": True, "autocomplete": True},
                    {"type": 3, "name": "value", "required": True, "autocomplete": True},
                    {"type": 5, "name": "everywhere"},
                ],
            }
        ],
    }

    @pytest.mark.parametrize(
        ("text", "typed", "focused"),
        [
            ("/config set key:spa", {"key": "spa"}, "key"),
            ("/config set key:", {"key": ""}, "key"),
            ("/Config SET Key:x", {"key": "x"}, "key"),
            ("/config set key:spawn value:o", {"key": "spawn", "value": "o"}, "value"),
            ('/config set key:"a b" value:', {"key": "a b", "value": ""}, "value"),
            ("/config set key:a b value:", {"key": "a b", "value": ""}, "value"),
        ],
    )
    def test_an_autocompleted_option_being_typed(
        self, text: str, typed: dict[str, str], focused: str
    ) -> None:
        found = parse_typing(text, [AGENTS, self.CONFIG])
        assert found is not None
        assert (found.command, found.typed, found.focused) == ("config set", typed, focused)

    @pytest.mark.parametrize(
        "text",
        [
            "/config set key:spawn ",  # the cursor left the option
            "/config set everywhere:t",  # no autocomplete
            "/config key:x",  # no subcommand
            "/nope key:x",
            "key:x",
            '/config set key:"spa',  # a quoted value: typed as is
            "/agents spawn task:x",
        ],
    )
    def test_anything_else_asks_for_nothing(self, text: str) -> None:
        assert parse_typing(text, [AGENTS, self.CONFIG]) is None
