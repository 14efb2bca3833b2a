"""Commands typed as text: ``/agents spawn task:"look into X" mode:session``, ``!help``.

Where there is a message box rather than Discord's command picker, a line starting
with the command prefix is parsed here against command definitions in the shape of
Discord's application commands (name, description, options with a type, choices,
``required``). The playground's page types ``/`` against the definitions the bot
registered (exactly what Discord's client reads too) and sends a real interaction;
Matrix, which has no commands of its own, types ``!`` against the Matrix adapter's.
Parsing against definitions, rather than a list kept here, means a command added
there works here without touching this module, with the same errors everywhere.

Syntax, close to what Discord's own client accepts when pasted:

- words after the ``/`` name the command, then its subcommand group and subcommand;
- ``name:value`` sets an option; the value may be quoted (``"…"``, ``'…'`` or
  ``“…”``), with ``\\"`` inside double quotes. An unquoted text value runs to the
  next ``option:`` that is one of the command's own options, as in Discord's box:
  ``task:look into the logs mode:session`` is the task "look into the logs" (a word
  like ``note:`` or ``http://`` that names no option stays in the value); a value
  with choices, a number, a flag or a mention is one word;
- other words are joined into the first option not given by name
  (``/steer change course`` is ``/steer text:"change course"``);
- values are typed from the definition: integers, numbers, booleans (true/false,
  yes/no, on/off), choices (by value or name), and users / channels / roles as
  mentions (``<@1>``, ``<#2>``, ``<@&3>``), ids, or names a resolver knows.

While a line is typed, :func:`parse_typing` finds the option being typed in, when
the bot autocompletes it (``autocomplete`` in its definition), so the page can ask
the bot for choices as Discord's client does.

Everything here is pure (no chat platform, no I/O) so it is unit-tested directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CommandTextError",
    "HelpEntry",
    "ParsedCommand",
    "Resolver",
    "Token",
    "Typing",
    "help_entries",
    "parse_command",
    "parse_typing",
    "tokenize",
]

Json = Mapping[str, Any]
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER = 3, 4, 5, 6, 7, 8, 9, 10
_ENTITY_TYPES = frozenset({USER, CHANNEL, ROLE, MENTIONABLE})
_TYPE_NAMES = {
    STRING: "text",
    INTEGER: "integer",
    BOOLEAN: "true|false",
    USER: "@user",
    CHANNEL: "#channel",
    ROLE: "@role",
    MENTIONABLE: "@mention",
    NUMBER: "number",
}
_TRUE = frozenset({"true", "yes", "on", "1", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "n"})
_QUOTES = {'"': '"', "'": "'", "“": "”", "„": "“", "«": "»"}

Resolver = Callable[[int, str], int | None]
"""``(option type, name)`` -> the id of the user, channel or role called ``name``."""


class CommandTextError(ValueError):
    """The text is not a valid invocation; the message says what would be."""


@dataclass(frozen=True, slots=True)
class Token:
    """A word of the command line: ``name`` is set for ``name:value`` words.

    ``start`` and ``end`` are where its value lies in the text (a quoted one with its
    quotes), so an unquoted value can be extended over the words after it as typed.
    """

    value: str
    name: str | None = None
    quoted: bool = field(default=False, compare=False)
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A command ready to invoke: ``path`` is command, group, subcommand names."""

    path: tuple[str, ...]
    options: dict[str, Any]

    @property
    def command(self) -> str:
        """The path as ``FakeDiscord.invoke_command`` takes it: ``"agents spawn"``."""
        return " ".join(self.path)


@dataclass(frozen=True, slots=True)
class Typing:
    """A command line being typed, its last option autocompleted by the bot: what Discord's
    client sends while the cursor is in that option (values as typed, not typed yet)."""

    path: tuple[str, ...]
    typed: dict[str, str]
    focused: str

    @property
    def command(self) -> str:
        return " ".join(self.path)


@dataclass(frozen=True, slots=True)
class HelpEntry:
    """One line of the help list: how to type it, and what it does."""

    usage: str
    description: str


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char in "_-"


def tokenize(text: str) -> list[Token]:
    """Split a command line into words, honouring quotes and ``name:value`` pairs."""
    tokens: list[Token] = []
    index, length = 0, len(text)
    while index < length:
        if text[index].isspace():
            index += 1
            continue
        name: str | None = None
        start = index
        while index < length and _is_name_char(text[index]):
            index += 1
        if index > start and index < length and text[index] == ":":
            name = text[start:index].lower()
            index += 1
        else:
            index = start
        begin = index
        quoted = index < length and text[index] in _QUOTES
        value, index = _read_value(text, index)
        tokens.append(Token(value=value, name=name, quoted=quoted, start=begin, end=index))
    return tokens


def _gather(tokens: list[Token], text: str, definitions: Sequence[Json]) -> list[Token]:
    """Let each unquoted text option take the words after it, up to the next real option.

    ``text`` is what ``tokens`` were read from: the value is cut from it as typed
    (spaces and line breaks kept). Options with choices or of another type keep
    one word, so ``mode:run dig into logs`` still gives the loose words to the task.
    """
    by_name = {str(d["name"]).lower(): d for d in definitions}
    gathered: list[Token] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        definition = by_name.get(token.name or "")
        if definition is None or token.quoted or not _takes_words(definition):
            gathered.append(token)
            continue
        end = token.end
        while index < len(tokens) and (tokens[index].name or "") not in by_name:
            end = tokens[index].end
            index += 1
        value = text[token.start : end].strip()
        gathered.append(Token(value, token.name, start=token.start, end=end))
    return gathered


def _takes_words(definition: Json) -> bool:
    """A free text option: its unquoted value may be several words."""
    return int(definition.get("type", STRING)) == STRING and not definition.get("choices")


def _read_value(text: str, index: int) -> tuple[str, int]:
    """A quoted or bare value starting at ``index``; returns it and where it ended."""
    length = len(text)
    if index < length and text[index] in _QUOTES:
        closing = _QUOTES[text[index]]
        index += 1
        chars: list[str] = []
        while index < length and text[index] != closing:
            if text[index] == "\\" and closing == '"' and index + 1 < length:
                index += 1
            chars.append(text[index])
            index += 1
        if index >= length:
            raise CommandTextError(f"a quoted value is not closed: add the missing {closing}")
        return "".join(chars), index + 1
    start = index
    while index < length and not text[index].isspace():
        index += 1
    return text[start:index], index


def _find(definitions: Iterable[Json], name: str, types: Iterable[int]) -> Json | None:
    wanted = set(types)
    for definition in definitions:
        same_name = str(definition.get("name", "")).lower() == name.lower()
        if same_name and int(definition.get("type", 1)) in wanted:
            return definition
    return None


def parse_command(
    text: str,
    definitions: Sequence[Json],
    *,
    resolve: Resolver | None = None,
    prefix: str = "/",
) -> ParsedCommand:
    """Parse ``/command [group] [subcommand] name:value …`` against command definitions.

    ``definitions`` are chat-input command bodies (as the bot uploaded them to
    Discord); ``prefix`` starts a command (``!`` on Matrix) and is how the errors
    spell one. Raises :class:`CommandTextError` with a message meant for the person
    typing.
    """
    line = text.strip()
    if not line.startswith(prefix):
        raise CommandTextError(f"a command starts with {prefix}")
    tokens = tokenize(line[len(prefix) :])
    if not tokens or tokens[0].name is not None or not tokens[0].value:
        raise CommandTextError(f"type a command name after the {prefix}; {prefix}help lists them")
    chat_input = [d for d in definitions if int(d.get("type", 1)) == 1]
    root = _find(chat_input, tokens[0].value, (1,))
    if root is None:
        known = ", ".join(sorted(f"{prefix}{d['name']}" for d in chat_input)) or "none yet"
        raise CommandTextError(f"no command {prefix}{tokens[0].value}; known: {known}")
    path = [str(root["name"])]
    node: Json = root
    rest = tokens[1:]
    while _subcommands(node):
        if not rest or rest[0].name is not None:
            names = ", ".join(str(o["name"]) for o in _subcommands(node))
            raise CommandTextError(f"{prefix}{' '.join(path)} needs a subcommand: one of {names}")
        found = _find(_subcommands(node), rest[0].value, (SUB_COMMAND, SUB_COMMAND_GROUP))
        if found is None:
            names = ", ".join(str(o["name"]) for o in _subcommands(node))
            raise CommandTextError(
                f"{prefix}{' '.join(path)} has no subcommand {rest[0].value!r}; it has {names}"
            )
        path.append(str(found["name"]))
        node, rest = found, rest[1:]
    definitions_here = list(node.get("options") or [])
    rest = _gather(rest, line[len(prefix) :], definitions_here)
    options = _options(path, definitions_here, rest, resolve, prefix)
    return ParsedCommand(path=tuple(path), options=options)


_TYPING_OPTION = re.compile(r"(?:^|\s)(?P<name>[\w-]+):(?P<value>[^\s\"'“„«]*)$")


def parse_typing(text: str, definitions: Sequence[Json]) -> Typing | None:
    """The option the cursor (at the end of ``text``) is in, if the bot autocompletes it.

    None for anything else: a line that is not a command, one whose last word is not
    ``name:value``, an option without autocomplete, a quoted value being typed.
    """
    match = _TYPING_OPTION.search(text)
    if not text.startswith("/") or match is None:
        return None
    try:
        parsed = _walk_typing(text[: match.start("name")], definitions)
    except CommandTextError:
        return None
    if parsed is None:
        return None
    path, node, typed = parsed
    by_name = {str(d["name"]).lower(): d for d in node.get("options") or []}
    focused = by_name.get(match.group("name").lower())
    if focused is None or not focused.get("autocomplete"):
        return None
    typed[str(focused["name"])] = match.group("value")
    return Typing(tuple(path), typed, str(focused["name"]))


def _walk_typing(
    head: str, definitions: Sequence[Json]
) -> tuple[list[str], Json, dict[str, str]] | None:
    """The command path of ``head`` and the ``name:value`` options typed in it, as text."""
    line = head.strip()[1:]
    tokens = tokenize(line)
    chat_input = [d for d in definitions if int(d.get("type", 1)) == 1]
    if not tokens or tokens[0].name is not None:
        return None
    node = _find(chat_input, tokens[0].value, (1,))
    if node is None:
        return None
    path, rest = [str(node["name"])], tokens[1:]
    while _subcommands(node):
        if not rest or rest[0].name is not None:
            return None
        found = _find(_subcommands(node), rest[0].value, (SUB_COMMAND, SUB_COMMAND_GROUP))
        if found is None:
            return None
        path.append(str(found["name"]))
        node, rest = found, rest[1:]
    options = list(node.get("options") or [])
    known = {str(d["name"]).lower(): str(d["name"]) for d in options}
    rest = _gather(rest, line, options)
    typed = {known[t.name]: t.value for t in rest if t.name is not None and t.name in known}
    return path, node, typed


def _subcommands(node: Json) -> list[Json]:
    return [
        o
        for o in node.get("options") or []
        if int(o.get("type", 0)) in (SUB_COMMAND, SUB_COMMAND_GROUP)
    ]


def _options(
    path: list[str],
    definitions: list[Json],
    tokens: list[Token],
    resolve: Resolver | None,
    prefix: str,
) -> dict[str, Any]:
    usage = prefix + " ".join(path)
    by_name = {str(d["name"]).lower(): d for d in definitions}
    raw: dict[str, str] = {}
    loose: list[str] = []
    for token in tokens:
        if token.name is None:
            loose.append(token.value)
            continue
        definition = by_name.get(token.name)
        if definition is None:
            names = ", ".join(by_name) or "no options"
            raise CommandTextError(f"{usage} has no option {token.name!r}; options: {names}")
        if str(definition["name"]) in raw:
            raise CommandTextError(f"option {definition['name']!r} is given twice")
        raw[str(definition["name"])] = token.value
    if loose:
        unfilled = [d for d in definitions if str(d["name"]) not in raw]
        if not unfilled:
            raise CommandTextError(
                f"{usage}: don't know what {' '.join(loose)!r} is for; use name:value"
            )
        raw[str(unfilled[0]["name"])] = " ".join(loose)
    missing = [str(d["name"]) for d in definitions if d.get("required") and d["name"] not in raw]
    if missing:
        hint = " ".join(f"{name}:…" for name in missing)
        raise CommandTextError(f"{usage} needs {', '.join(missing)} (add {hint})")
    return {name: _typed(by_name[name.lower()], value, resolve) for name, value in raw.items()}


def _typed(definition: Json, value: str, resolve: Resolver | None) -> Any:
    name, kind = str(definition["name"]), int(definition.get("type", STRING))
    choices = list(definition.get("choices") or [])
    if choices:
        for choice in choices:
            if value.lower() in (str(choice["value"]).lower(), str(choice["name"]).lower()):
                return choice["value"]
        allowed = "|".join(str(c["value"]) for c in choices)
        raise CommandTextError(f"{name} must be one of {allowed}, not {value!r}")
    try:
        if kind == INTEGER:
            return int(value)
        if kind == NUMBER:
            return float(value)
    except ValueError:
        wanted = "an integer" if kind == INTEGER else "a number"
        raise CommandTextError(f"{name} must be {wanted}, not {value!r}") from None
    if kind == BOOLEAN:
        lowered = value.lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        raise CommandTextError(f"{name} must be true or false, not {value!r}")
    if kind in _ENTITY_TYPES:
        return _entity(name, kind, value, resolve)
    return value


def _entity(name: str, kind: int, value: str, resolve: Resolver | None) -> int:
    """A user, channel or role option: a mention, a bare id, or a name to resolve."""
    stripped = value.strip()
    for prefix in ("<@&", "<@!", "<@", "<#"):
        if stripped.startswith(prefix) and stripped.endswith(">"):
            stripped = stripped[len(prefix) : -1]
            break
    if stripped.isdigit():
        return int(stripped)
    found = resolve(kind, stripped.lstrip("@#")) if resolve is not None else None
    if found is None:
        raise CommandTextError(f"{name}: no {_TYPE_NAMES[kind]} called {value!r}")
    return found


def help_entries(definitions: Sequence[Json], *, prefix: str = "/") -> list[HelpEntry]:
    """One entry per invocable command path, sorted, for a help list."""
    entries: list[HelpEntry] = []
    command_prefix = prefix

    def walk(prefix: list[str], node: Json) -> None:
        subs = _subcommands(node)
        if subs:
            for sub in subs:
                walk([*prefix, str(sub["name"])], sub)
            return
        parts = [command_prefix + " ".join(prefix)]
        for option in node.get("options") or []:
            choices = [str(c["value"]) for c in option.get("choices") or []]
            kind = "|".join(choices) if choices else _TYPE_NAMES.get(int(option["type"]), "value")
            shown = f"{option['name']}:<{kind}>" if not choices else f"{option['name']}:{kind}"
            parts.append(shown if option.get("required") else f"[{shown}]")
        entries.append(HelpEntry(" ".join(parts), str(node.get("description") or "")))

    for definition in definitions:
        if int(definition.get("type", 1)) == 1:
            walk([str(definition["name"])], definition)
    return sorted(entries, key=lambda e: e.usage)
