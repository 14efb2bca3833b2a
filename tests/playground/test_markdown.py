"""The playground's Discord markdown: Discord's rules, and nothing from a message executes."""

from __future__ import annotations

import pytest

from bot.playground.markdown import Names, render_markdown

NAMES = Names(
    user=lambda i: {1: "alice"}.get(i),
    role=lambda i: {2: "mods"}.get(i),
    channel=lambda i: {3: "general"}.get(i),
)


def md(text: str) -> str:
    return render_markdown(text, NAMES)


class TestBlocks:
    def test_a_fenced_block_keeps_its_language_and_its_text_verbatim(self) -> None:
        html = md("tree:\n```text\nroot\n└─ **child** <b>\n```\nend")
        assert '<pre class="codeblock" data-lang="text"><code>root\n└─ **child** &lt;b&gt;' in html
        assert "<strong>" not in html
        assert html.endswith('<div class="line">end</div>')

    def test_a_fence_without_a_language(self) -> None:
        assert md("```\nx = 1\n```") == '<pre class="codeblock"><code>x = 1</code></pre>'

    def test_headings_need_a_space_and_stop_at_three(self) -> None:
        assert md("# Big") == "<h1>Big</h1>"
        assert md("### Small") == "<h3>Small</h3>"
        assert md("#nospace") == '<div class="line">#nospace</div>'
        assert md("#### four") == '<div class="line">#### four</div>'

    def test_quotes_one_line_and_the_rest_of_the_message(self) -> None:
        assert md("> a\n> b\nc") == (
            '<blockquote><div class="line">a<br>b</div></blockquote><div class="line">c</div>'
        )
        assert md("x\n>>> all\nof **it**") == (
            '<div class="line">x</div>'
            '<blockquote><div class="line">all<br>of <strong>it</strong></div></blockquote>'
        )

    def test_lists_nest_by_indent_and_numbers_keep_their_start(self) -> None:
        assert md("- a\n  - b\n- c") == "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"
        assert md("3. x\n4. y") == '<ol start="3"><li>x</li><li>y</li></ol>'
        assert md("- a\n1. b") == "<ul><li>a</li></ul><ol><li>b</li></ol>"

    def test_subtext(self) -> None:
        assert md("-# 🔧 clock__now") == '<div class="subtext">🔧 clock__now</div>'


class TestInline:
    @pytest.mark.parametrize(
        ("text", "html"),
        [
            ("**b**", "<strong>b</strong>"),
            ("*i* and _i_", "<em>i</em> and <em>i</em>"),
            ("__u__", "<u>u</u>"),
            ("~~s~~", "<s>s</s>"),
            ("||secret||", '<span class="spoiler">secret</span>'),
            ("***both***", "<strong><em>both</em></strong>"),
            ("__*ui*__", "<u><em>ui</em></u>"),
            ("snake_case_name", "snake_case_name"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("`**not bold**`", "<code>**not bold**</code>"),
            ("``a ` b``", "<code>a ` b</code>"),
            (r"\*literal\*", "*literal*"),
        ],
    )
    def test_emphasis_as_discord_does_it(self, text: str, html: str) -> None:
        assert md(text) == f'<div class="line">{html}</div>'

    def test_mentions_are_pills_named_and_never_pings(self) -> None:
        html = md("<@1> <@!1> <@&2> <#3> <@99>")
        assert html.count('class="mention user-mention">@alice<') == 2
        assert "@mods<" in html
        assert 'data-channel="3">#general<' in html
        assert "@unknown-user" in html

    def test_masked_links_and_bare_urls_open_in_a_new_tab(self) -> None:
        html = md("[docs](https://example.org/a?b=1&c=2) and https://example.org/x.")
        assert '<a href="https://example.org/a?b=1&amp;c=2" target="_blank"' in html
        assert ">docs</a>" in html
        assert '<a href="https://example.org/x" target="_blank"' in html
        assert html.endswith("</a>.</div>")


class TestNothingExecutes:
    @pytest.mark.parametrize(
        "text",
        [
            "<script>alert(1)</script>",
            '<img src=x onerror="alert(1)">',
            "**<script>x</script>**",
            "```\n</code></pre><script>x</script>\n```",
            "[click](javascript:alert(1))",
            '[x](https://a.b/"onmouseover="alert(1))',
            "> <iframe src=//evil>",
        ],
    )
    def test_markup_in_a_message_stays_text(self, text: str) -> None:
        html = md(text)
        assert "<script" not in html
        assert "<img" not in html
        assert "<iframe" not in html
        assert "javascript:" not in html or "href" not in html
        assert 'onmouseover="' not in html

    def test_everyone_and_here_stay_plain_text(self) -> None:
        assert md("@everyone @here") == '<div class="line">@everyone @here</div>'
