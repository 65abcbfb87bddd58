"""Parsers of environment variables' text, one per kind of value: each returns the value
or raises `SettingsError` with a message that names the variable and the bad text (never a
secret's). `streams.settings` and `streams.otel.settings` build their tables from them."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr


class SettingsError(ValueError):
    """An invalid setting; the message names the environment variable."""


Parser = Callable[[str, str], Any]

_INTEGER = re.compile(r"[+-]?[0-9]+")
# Kafka's legal topic characters (the app id prefixes the changelog topic's name)
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,200}")
_SERVER = re.compile(r"\[?[A-Za-z0-9._:-]+\]?:([0-9]{1,5})")


def integer(minimum: int, allowed: tuple[int, ...] = (), maximum: int | None = None) -> Parser:
    def parse(name: str, raw: str) -> int:
        # "true", "2.0" and "1e3" are rejected: a threshold is a count, said as one
        if _INTEGER.fullmatch(raw):
            value = int(raw)
            if value in allowed or minimum <= value <= (value if maximum is None else maximum):
                return value
        extra = "".join(f" or {value}" for value in allowed)
        bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise SettingsError(f"{name} must be an integer {bound}{extra}, got {raw!r}")

    return parse


def milliseconds(minimum: int, maximum: int) -> Parser:
    def parse(name: str, raw: str) -> int:
        if _INTEGER.fullmatch(raw) and minimum <= int(raw) <= maximum:
            return int(raw)
        raise SettingsError(f"{name} must be milliseconds from {minimum} to {maximum}, got {raw!r}")

    return parse


def port(name: str, raw: str) -> int:
    if _INTEGER.fullmatch(raw) and 1 <= int(raw) <= 65535:
        return int(raw)
    raise SettingsError(f"{name} must be a port number (1-65535), got {raw!r}")


def topic_name(name: str, raw: str) -> str:
    if _TOPIC.fullmatch(raw) and raw not in (".", ".."):
        return raw
    raise SettingsError(
        f"{name} must be 1-200 characters of letters, digits, '.', '_' and '-', got {raw!r}"
    )


def servers(name: str, raw: str) -> str:
    servers = [server.strip() for server in raw.split(",")]
    for server in servers:
        match = _SERVER.fullmatch(server)
        if match is None or not 1 <= int(match.group(1)) <= 65535:
            raise SettingsError(f"{name} must be a comma-separated list of host:port, got {raw!r}")
    return ",".join(servers)


def choice(*choices: str, upper: bool = False) -> Parser:
    def parse(name: str, raw: str) -> str:
        value = raw.upper() if upper else raw
        if value in choices:
            return value
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")

    return parse


def switch(name: str, raw: str) -> bool:
    if raw.lower() in ("on", "off"):
        return raw.lower() == "on"
    raise SettingsError(f"{name} must be on or off, got {raw!r}")


def boolean(name: str, raw: str) -> bool:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def store(name: str, raw: str) -> str:
    if raw.startswith(("memory://", "rocksdb://")):
        return raw
    raise SettingsError(f"{name} must start with memory:// or rocksdb://, got {raw!r}")


def text(name: str, raw: str) -> str:
    return raw


def secret(name: str, raw: str) -> SecretStr:
    return SecretStr(raw)


def existing_file(name: str, raw: str) -> str:
    if os.path.isfile(raw):
        return raw
    raise SettingsError(f"{name} must name a readable file, got {raw!r} (no such file)")
