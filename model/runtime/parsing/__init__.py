"""Offline English dependency parsing with stanza models trained from UD English-EWT."""

from groundsearch.model.runtime.parsing.parser import ParseError, Parser, clean_text
from groundsearch.model.runtime.parsing.tree import DependencyTree, Node

__all__ = ["DependencyTree", "Node", "ParseError", "Parser", "clean_text"]
