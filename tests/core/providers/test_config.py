"""ProviderConfig and build_provider: settings from TOML, the key from the environment."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from core._redaction import forget_secrets
from core.errors import ConfigError
from core.logging import RedactSecrets
from core.providers import ChatMessage, ProviderConfig, build_provider
from tests.fixtures.fake_llm import FakeLLM, text_reply

KEY = "sk-from-the-environment-42"


def config(**values: Any) -> ProviderConfig:
    return ProviderConfig.model_validate(
        {"base_url": "http://127.0.0.1:11434/v1", "model": "qwen", **values}
    )


@pytest.fixture(autouse=True)
def _forget_registered_keys() -> Any:
    """build_provider registers keys with the log redactor; keep that out of other tests."""
    yield
    forget_secrets()


class TestProviderConfig:
    def test_minimal_table_gets_defaults(self) -> None:
        """Only base_url and model are needed; a trailing slash is dropped."""
        cfg = config(base_url="http://127.0.0.1:11434/v1/")
        assert cfg.kind == "openai"
        assert cfg.base_url == "http://127.0.0.1:11434/v1"
        assert (cfg.api_key_env, cfg.timeout_s, cfg.max_retries) == (None, 120.0, 4)

    def test_integers_are_accepted_for_seconds(self) -> None:
        """TOML ``timeout_s = 30`` is an int; it is a valid number of seconds."""
        assert config(timeout_s=30).timeout_s == 30

    @pytest.mark.parametrize(
        "values",
        [
            {"unknown": 1},
            {"kind": "anthropic"},
            {"timeout_s": 0},
            {"timeout_s": "30"},
            {"max_retries": -1},
            {"model": ""},
            {"base_url": "ftp://host/v1"},
            {"base_url": "127.0.0.1:11434/v1"},
        ],
    )
    def test_mistakes_are_refused(self, values: dict[str, Any]) -> None:
        """Unknown keys, other kinds, bad numbers, coercions and non-http URLs fail."""
        with pytest.raises(ValidationError):
            config(**values)

    def test_credentials_in_the_url_are_refused_without_echoing_them(self) -> None:
        """A key smuggled into base_url is refused and not repeated in the error."""
        with pytest.raises(ValidationError) as caught:
            config(base_url=f"https://user:{KEY}@api.example.com/v1")
        assert KEY not in str(caught.value.errors(include_input=False))

    def test_a_key_pasted_as_api_key_env_is_not_echoed(self) -> None:
        """api_key_env must be a variable NAME; a pasted key is refused without showing it."""
        with pytest.raises(ValidationError) as caught:
            config(api_key_env="sk-abc.def-123")
        assert "variable" in str(caught.value.errors(include_input=False))


class TestBuildProvider:
    async def test_the_key_comes_from_the_named_variable(self, llm: FakeLLM) -> None:
        """build_provider reads the variable once; requests carry it as a bearer token."""
        cfg = config(base_url=llm.base_url, api_key_env="TEST_LLM_KEY", max_retries=0)
        llm.add(text_reply("hi"))
        async with build_provider(cfg, {"TEST_LLM_KEY": KEY}, name="local") as provider:
            assert (provider.name, provider.model) == ("local", "qwen")
            async with asyncio.timeout(5):
                events = [e async for e in provider.stream([ChatMessage(role="user", content="x")])]
        assert events[0].type == "text"
        assert llm.requests[0].headers["Authorization"] == f"Bearer {KEY}"
        logged = RedactSecrets()(None, "info", {"event": f"echo {KEY}"})
        assert KEY not in logged["event"]

    async def test_no_key_env_sends_no_key(self, llm: FakeLLM) -> None:
        """A local server without api_key_env gets no Authorization header."""
        llm.add(text_reply("hi"))
        async with build_provider(config(base_url=llm.base_url), {}) as provider:
            async with asyncio.timeout(5):
                _ = [e async for e in provider.stream([ChatMessage(role="user", content="x")])]
        assert "Authorization" not in llm.requests[0].headers

    @pytest.mark.parametrize("env", [{}, {"OPENAI_API_KEY": ""}])
    def test_a_missing_variable_is_a_config_error(self, env: dict[str, str]) -> None:
        """An unset or empty variable fails at start-up, naming the variable and the key path."""
        with pytest.raises(ConfigError) as caught:
            build_provider(config(api_key_env="OPENAI_API_KEY"), env, name="openai")
        assert caught.value.key_path == "providers.openai.api_key_env"
        assert "OPENAI_API_KEY" in str(caught.value)
