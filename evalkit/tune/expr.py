"""Tie expressions of a search space: a small arithmetic expression over parameter ids (``tie = "2 * k"``),
parsed once with :mod:`ast` and evaluated without ``eval`` — numbers, parameter ids, ``+ - * / // % **``, unary
minus and a fixed set of functions (min, max, floor, ceil, round, abs, log, exp, sqrt, int, float).

Usage::

    e = Expr("max(1, k // 2)", "param 'candidates'")
    e.names            # {'k'}: the parameter ids it reads
    e({"k": 9})        # 4
"""
from __future__ import annotations

import ast
import math
from typing import Any, Callable

from retrievers.errors import ConfigError

_FUNCS: dict[str, Callable] = {"min": min, "max": max, "floor": math.floor, "ceil": math.ceil, "round": round,
                               "abs": abs, "log": math.log, "exp": math.exp, "sqrt": math.sqrt, "int": int,
                               "float": float}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b}


class Expr:
    """A small arithmetic expression over parameter ids, evaluated without ``eval``."""

    def __init__(self, text: str, where: str):
        self.text = text
        try:
            self.tree = ast.parse(str(text), mode="eval").body
        except SyntaxError:
            raise ConfigError(f"{where}: tie {text!r} is not a valid expression") from None
        self.names: set[str] = set()
        self._check(self.tree, where)

    def _check(self, node, where):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                      bool):
            return
        if isinstance(node, ast.Name):
            if node.id not in _FUNCS:
                self.names.add(node.id)
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, where)
            self._check(node.right, where)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self._check(node.operand, where)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and not node.keywords:
            for a in node.args:
                self._check(a, where)
            return
        raise ConfigError(f"{where}: tie {self.text!r} may only use numbers, parameter ids, + - * / // % ** and "
                          f"{', '.join(sorted(_FUNCS))}")

    def __call__(self, env: dict[str, Any]):
        def ev(node):
            if isinstance(node, ast.Constant):
                return node.value
            if isinstance(node, ast.Name):
                return env[node.id]
            if isinstance(node, ast.BinOp):
                return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
            if isinstance(node, ast.UnaryOp):
                v = ev(node.operand)
                return -v if isinstance(node.op, ast.USub) else v
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        return ev(self.tree)
