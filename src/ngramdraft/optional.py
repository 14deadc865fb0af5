"""Optional packages (engines, tokenizers), imported only when a feature needs them."""

import importlib
from types import ModuleType

from .errors import MissingDependencyError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise MissingDependencyError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{what} needs the {module.split('.')[0]} package: pip install 'ngramdraft[{extra}]'"
        ) from e
