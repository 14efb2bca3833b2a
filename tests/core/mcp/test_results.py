"""What the model reads of a tool result: text as it is, other content as placeholders."""

from __future__ import annotations

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from core.mcp import result_text


def text_of(*content: ContentBlock, structured: dict[str, object] | None = None) -> str:
    return result_text(CallToolResult(content=list(content), structured_content=structured))


class TestResultText:
    def test_texts_are_joined_by_newlines(self) -> None:
        """Text blocks are the answer, one per line."""
        text = text_of(TextContent(text="one"), TextContent(text="two"))
        assert text == "one\ntwo"

    def test_other_blocks_are_placeholders(self) -> None:
        """Images, audio and resources become short placeholders; embedded text is kept."""
        text = text_of(
            ImageContent(data="AAAA" * 10, mime_type="image/png"),
            AudioContent(data="AAA=", mime_type="audio/wav"),
            ResourceLink(name="r", uri="file:///tmp/r.txt"),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///b.bin", blob="AAAA", mime_type=None)
            ),
            EmbeddedResource(resource=TextResourceContents(uri="file:///t.txt", text="inline")),
        )
        assert text.splitlines() == [
            "[image image/png, 30 bytes]",
            "[audio audio/wav, 2 bytes]",
            "[resource file:///tmp/r.txt]",
            "[resource file:///b.bin]",
            "inline",
        ]

    def test_structured_content_when_nothing_else(self) -> None:
        """A result with only structured content reads as its JSON."""
        assert text_of(structured={"a": 1}) == '{"a": 1}'
        assert text_of(TextContent(text="t"), structured={"a": 1}) == "t"
