"""What a confined command sees of the environment: what tools need, never a credential."""

from __future__ import annotations

from whiz.environments.envvars import confined_env


def test_tools_settings_pass_and_credentials_do_not():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/v",
        "PYTHONPATH": "src",
        "PYTHON_KEYRING_TOKEN": "t",
        "OPENAI_API_KEY": "k",
        "OPENAI_BASE_URL": "u",
        "ANTHROPIC_AUTH": "a",
        "HF_TOKEN": "h",
        "AWS_REGION": "r",
        "GITHUB_ACTIONS": "true",
        "WHIZ_API_KEY": "w",
        "SSH_AUTH_SOCK": "/s",
        "DB_PASSWORD": "p",
        "MY_SERVICE_TOKEN": "m",
        "RANDOM_OTHER": "x",
    }
    assert confined_env(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/v",
        "PYTHONPATH": "src",
    }
