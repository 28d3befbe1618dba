"""Offline English dependency parsing with stanza models trained from UD English-EWT."""

from model.parsing.parser import ParseError, Parser, parse
from model.parsing.tree import DependencyTree, Node

__all__ = ["DependencyTree", "Node", "ParseError", "Parser", "parse"]
