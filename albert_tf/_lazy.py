"""`lazy_attributes`: a package's public names imported on first use (PEP 562), so that importing
the package stays light (no TensorFlow until a name that needs it is used)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Mapping, MutableMapping, Tuple


def lazy_attributes(
    package: str, names: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """`(__getattr__, __dir__)` for `package` that import `names` (name -> module) on first use.

    A name once imported is kept in `namespace` (the package's globals), so later look-ups are
    plain attribute reads.
    """
    lazy: Dict[str, str] = dict(names)

    def __getattr__(name: str) -> Any:
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
