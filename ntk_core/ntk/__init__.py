"""The empirical Neural Tangent Kernel: Gram matrices of ``k(x, x') = <∇θ f(θ, x), ∇θ f(θ, x')>`` for any model.

Layers, from the bottom: :mod:`~ntk_core.ntk.problem` (inputs, the problem of one Gram matrix, the forward cost,
per-example Jacobians), ``cost`` (cost models) and ``tiles`` (tiles and their
checkpoints); the methods ``engines`` (``"jacobian"``, ``"ntvp"``) and
:mod:`~ntk_core.ntk.structured` (``"structured"``, with ``flops``); on top,
``gram`` (:func:`empirical_ntk`, :func:`select_method`; ``choices``: the methods ``auto`` keeps per model,
:func:`~ntk_core.ntk.choices.forget_choices`), ``kernel_fn`` (:func:`empirical_ntk_fn`: a
model's kernel as a function that chooses its method once) and
:mod:`~ntk_core.ntk.distributed` (the same tiles on many processes).
"""

from .choices import forget_choices
from .cost import CostEstimate, MethodChoice
from .distributed import BACKENDS, GramResult, distributed_ntk, init_from_env
from .gram import empirical_ntk, select_method, structured_ntk
from .kernel_fn import KernelFn, empirical_ntk_fn
from .problem import (
    DEFAULT_MEMORY_BUDGET,
    METHODS,
    OUTPUTS,
    Inputs,
    InputsLike,
    NTKMethod,
    SelectedOutput,
    jacobian_features,
    output_sensitivity,
    select_output,
)
from .structured import ROUTES, ParameterRoute, StructuredPlan, plan_structured

__all__ = [
    "METHODS",
    "OUTPUTS",
    "DEFAULT_MEMORY_BUDGET",
    "Inputs",
    "InputsLike",
    "NTKMethod",
    "CostEstimate",
    "MethodChoice",
    "empirical_ntk",
    "empirical_ntk_fn",
    "KernelFn",
    "select_method",
    "forget_choices",
    "jacobian_features",
    "output_sensitivity",
    "select_output",
    "SelectedOutput",
    "structured_ntk",
    "ROUTES",
    "ParameterRoute",
    "StructuredPlan",
    "plan_structured",
    "BACKENDS",
    "GramResult",
    "distributed_ntk",
    "init_from_env",
]
