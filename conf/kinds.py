"""Which config model a YAML file selects: its top-level ``kind`` (``ate``, the core release,
when absent). Each kind's loader validates and makes ``data.path`` absolute."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from conf.models import ConfigError, read_raw, with_absolute_paths

# kind -> "module:loader(path, overrides, base)"
LOADERS: dict[str, str] = {
    "ate": "conf.models:load_config",
    "cluster_dp": "conf.cluster_dp:load_cluster_dp_config",
    "federated": "conf.federated:load_federated_config",
    "user_level": "conf.user_level:load_user_level_config",
}


def kind_of(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
            base: dict[str, Any] | None = None) -> str:
    """The ``kind`` the settings declare (after overrides); unknown kinds are refused."""
    raw, where = read_raw(path, overrides, base)
    kind = raw.get("kind", "ate")
    if kind not in LOADERS:
        raise ConfigError(f"invalid {where}: kind {kind!r} is not one of "
                          f"{', '.join(sorted(LOADERS))} (leave it out for the core ATE release)")
    return kind


def load_any(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
             base: dict[str, Any] | None = None) -> Any:
    """The validated config of whichever kind the settings declare."""
    module, attr = LOADERS[kind_of(path, overrides, base)].split(":")
    loader = getattr(importlib.import_module(module), attr)
    return with_absolute_paths(loader(path, overrides, base))
