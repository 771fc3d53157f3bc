"""The quantization domain: observers, calibration methods, patterns, the spec, the solver, lowering.

``quantir.quantize`` is also callable: ``quantir.quantize(model, calibration, config)`` runs
the whole flow (``quantir.api.quantize``). Python binds a subpackage to its parent's attribute
when it is imported, so a function of the same name could not live beside this package; the
package itself therefore answers the call.
"""
from __future__ import annotations

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, model, calibration=None, config=None):
        from ..api import quantize
        return quantize(model, calibration, config)


sys.modules[__name__].__class__ = _CallablePackage
