"""Locate the project's data directories (templates/, manifests/): see kpack._data."""

from __future__ import annotations

from kpack._data import data_dir

__all__ = ["data_dir"]
