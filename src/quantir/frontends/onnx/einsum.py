"""Einsum at import: the matmul-like equations exporters write become ``nn.matmul``.

Attention written with ``torch.einsum`` exports as ``Einsum("bhid,bhjd->bhij")`` (QKᵀ) and
``Einsum("bhij,bhjd->bhid")`` (P·V). The quantizer knows ``nn.matmul`` (BATCH_MATMUL), not
einsum, so a two-operand equation whose labels split into

- batch labels (in both inputs and the output), the ellipsis counting as batch,
- one ``m`` label (first input and output), one ``n`` label (second input and output),
- one contracted ``k`` label (both inputs, not the output),

is written as ``transpose(A) @ transpose(B)`` (A to ``[batch..., m, k]``, B to
``[batch..., k, n]``) and a transpose of the result into the output's order; identity
transposes are left out. Every other equation stays ``nn.einsum`` (computed in float).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.dialects.nn_encoder import ELLIPSIS, Einsum


@dataclass(frozen=True)
class MatmulPlan:
    """Permutations (``None``: identity) that put the operands in matmul order and the result
    in the equation's output order."""

    perm_a: tuple[int, ...] | None
    perm_b: tuple[int, ...] | None
    perm_out: tuple[int, ...] | None


def _axes(term: str, rank: int) -> dict[str, list[int]]:
    """Label -> the operand's axes (the ellipsis maps to its several axes)."""
    n_ell = rank - (len(term) - (ELLIPSIS in term))
    out: dict[str, list[int]] = {}
    axis = 0
    for c in term:
        width = n_ell if c == ELLIPSIS else 1
        out[c] = list(range(axis, axis + width))
        axis += width
    return out


def _perm_or_none(perm: list[int]) -> tuple[int, ...] | None:
    return None if perm == sorted(perm) else tuple(perm)


def matmul_plan(spec: Einsum, rank_a: int, rank_b: int) -> MatmulPlan | None:
    """How to compute ``spec`` as one matmul, or ``None`` when it is not matmul-like."""
    if len(spec.inputs) != 2:
        return None
    a, b = spec.inputs
    out = spec.output
    if any(len(set(t)) != len(t) for t in (a, b)):   # a repeated label is a diagonal
        return None
    sa, sb, so = set(a), set(b), set(out)
    batch = [c for c in out if c in sa and c in sb]
    m = [c for c in out if c in sa and c not in sb]
    n = [c for c in out if c in sb and c not in sa]
    k = [c for c in a if c in sb and c not in so]
    if len(m) != 1 or len(n) != 1 or len(k) != 1 or ELLIPSIS in k:
        return None
    if sa | sb != set(batch) | {m[0], n[0], k[0]} or (ELLIPSIS in (sa | sb) and ELLIPSIS not in batch):
        return None   # a label summed away in one operand only, or an ellipsis not kept
    ax_a, ax_b = _axes(a, rank_a), _axes(b, rank_b)
    if ELLIPSIS in batch and len(ax_a[ELLIPSIS]) != len(ax_b[ELLIPSIS]) and batch[0] != ELLIPSIS:
        return None   # ellipses of different ranks broadcast right-aligned only when they lead
    perm_a = [i for c in batch for i in ax_a[c]] + ax_a[m[0]] + ax_a[k[0]]
    perm_b = [i for c in batch for i in ax_b[c]] + ax_b[k[0]] + ax_b[n[0]]
    # the matmul result is [batch..., m, n]; the ellipsis there has the wider operand's rank
    n_ell = max(len(ax_a.get(ELLIPSIS, ())), len(ax_b.get(ELLIPSIS, ())))
    res_term = "".join(batch) + m[0] + n[0]
    res_axes = _axes(res_term, len(res_term) - (ELLIPSIS in res_term) + (n_ell if ELLIPSIS in res_term else 0))
    perm_out = [i for c in out for i in res_axes[c]]
    return MatmulPlan(_perm_or_none(perm_a), _perm_or_none(perm_b), _perm_or_none(perm_out))
