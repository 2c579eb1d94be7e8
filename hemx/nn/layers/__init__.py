"""The layer types of :mod:`hemx.nn`, one module each, and their one registry.

Each module holds a layer's frozen record, its output shape, its float64 reference and its lowering to packed
steps, and ends with ``RULE = LayerRule(...)`` (:class:`~hemx.nn.layers.base.LayerRule`). :data:`RULES` lists the
modules' rules in one place; :mod:`hemx.nn.graph` (shapes, arity, the reference) and the ``pack`` pass
(:mod:`hemx.nn.passes.pack`) read them through :func:`rule_for` instead of tables of their own.

A new layer is a module here (record, ``shape``, ``reference``, ``lower``, ``RULE``), its entries in this file
(the module import, :data:`RULES`, the record's re-export; :mod:`hemx.nn.graph` and :mod:`hemx.nn` re-export the
record by name), and a rule in a front end (:mod:`hemx.nn.trace`, :mod:`hemx.nn.keras`, :mod:`hemx.nn.onnx`) that produces it.
"""

from __future__ import annotations

from hemx.nn.layers import (
    activation, add, affine, avgpool, batchnorm, conv2d, dense, flatten, global_avgpool, input_layer, lstm, maxpool,
    multiply,
)
from hemx.nn.layers.activation import Activation
from hemx.nn.layers.add import Add
from hemx.nn.layers.affine import Affine
from hemx.nn.layers.avgpool import AvgPool2D
from hemx.nn.layers.base import LayerRule
from hemx.nn.layers.batchnorm import BatchNorm
from hemx.nn.layers.conv2d import Conv2D
from hemx.nn.layers.dense import Dense
from hemx.nn.layers.flatten import Flatten
from hemx.nn.layers.global_avgpool import GlobalAvgPool
from hemx.nn.layers.input_layer import Input
from hemx.nn.layers.lstm import LSTM
from hemx.nn.layers.maxpool import MaxPool2D
from hemx.nn.layers.multiply import Multiply

#: every layer type's rule, in the order the supported list names them
RULES: tuple[LayerRule, ...] = tuple(m.RULE for m in (
    input_layer, conv2d, batchnorm, avgpool, maxpool, global_avgpool, flatten, dense, affine, add, activation,
    multiply, lstm,
))

#: layer record class -> its rule
REGISTRY: dict[type, LayerRule] = {r.layer: r for r in RULES}

#: every layer record class
LAYER_TYPES: tuple[type, ...] = tuple(REGISTRY)

#: the layers supported encrypted, as error messages name them
SUPPORTED: tuple[str, ...] = tuple(name for r in RULES for name in r.supported)


def rule_for(layer) -> LayerRule | None:
    """The rule of ``layer``'s type (or of the nearest registered base class); None for an unknown type."""
    return next((REGISTRY[t] for t in type(layer).__mro__ if t in REGISTRY), None)


__all__ = ["LayerRule", "RULES", "REGISTRY", "LAYER_TYPES", "SUPPORTED", "rule_for", "Input", "Conv2D", "BatchNorm",
           "AvgPool2D", "MaxPool2D", "GlobalAvgPool", "Flatten", "Dense", "Affine", "Add", "Activation",
           "Multiply", "LSTM"]
