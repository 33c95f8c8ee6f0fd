"""Each executor's process gets its own CLI's variables, and only those."""

from __future__ import annotations

from pathlib import Path

from dispatch.environment import agent_env
from tests.dispatch.agent_support import agent_settings
from vigil.redaction import MASK, Redactor

OPERATOR = {
    "PATH": "/usr/bin:/bin",
    "ANTHROPIC_API_KEY": "sk-ant-operator",
    "ANTHROPIC_BASE_URL": "https://gateway.example",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth-operator",
    "CLAUDE_CONFIG_DIR": "/srv/claude",
    "OPENAI_API_KEY": "sk-openai-operator",
    "CODEX_HOME": "/srv/codex",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "HTTPS_PROXY": "http://user:proxy-pass-9@proxy:3128",
    "no_proxy": "localhost",
    "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
    "DATABASE_PASSWORD": "not-for-agents",
}


def test_claude_gets_its_credentials_endpoint_and_proxies_but_not_codexs(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source=OPERATOR, executor="claude")
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR"):
        assert env[name] == OPERATOR[name]
    for name in ("HTTPS_PROXY", "no_proxy", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == OPERATOR[name]
    for name in ("OPENAI_API_KEY", "CODEX_HOME", "AWS_SECRET_ACCESS_KEY", "DATABASE_PASSWORD"):
        assert name not in env


def test_codex_gets_its_own_and_not_claudes(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source=OPERATOR, executor="codex")
    assert env["OPENAI_API_KEY"] == "sk-openai-operator"
    assert env["CODEX_HOME"] == "/srv/codex"
    assert env["HTTPS_PROXY"] == OPERATOR["HTTPS_PROXY"]
    assert "ANTHROPIC_API_KEY" not in env
    assert "CLAUDE_CONFIG_DIR" not in env


def test_cloud_credentials_pass_only_with_the_bedrock_switch(home: Path) -> None:
    settings = agent_settings(home)
    assert "AWS_SECRET_ACCESS_KEY" not in agent_env(settings, 1, 2, source=OPERATOR, executor="claude")
    bedrock = {**OPERATOR, "CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1"}
    env = agent_env(settings, 1, 2, source=bedrock, executor="claude")
    assert env["AWS_SECRET_ACCESS_KEY"] == "aws-secret-value"
    assert env["AWS_REGION"] == "eu-west-1"


def test_other_executors_get_no_cli_variables_and_pass_env_adds_more(home: Path) -> None:
    settings = agent_settings(home, dispatch={"pass_env": ["DATABASE_PASSWORD"]})
    env = agent_env(settings, 1, 2, source=OPERATOR, executor="command")
    assert "ANTHROPIC_API_KEY" not in env
    assert "HTTPS_PROXY" not in env
    assert env["DATABASE_PASSWORD"] == "not-for-agents"


def test_what_is_passed_is_redacted_the_proxy_password_too(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source=OPERATOR, executor="claude")
    redactor = Redactor.from_env(env)
    text = redactor.text("key sk-ant-operator, token oauth-operator, proxy proxy-pass-9")
    assert text == f"key {MASK}, token {MASK}, proxy {MASK}"
