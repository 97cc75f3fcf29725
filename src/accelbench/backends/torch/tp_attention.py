"""``nn.MultiheadAttention`` with q, k and v in separate Linears, for tensor parallelism.

``torch.nn.TransformerEncoderLayer``/``TransformerDecoderLayer`` keep their attention's q, k
and v projections in one ``in_proj_weight`` parameter, and ``multi_head_attention_forward``
checks the full embedding width, so a column split of that attention cannot run.
:class:`SplitAttention` computes the same function from the same weights (``q``, ``k``,
``v`` made from ``in_proj_weight``/``in_proj_bias``, ``o`` the attention's own
``out_proj``) and reads its heads from the width of its local q (``head_dim`` is fixed), so
that once ``q``, ``k`` and ``v`` are split column-wise and ``o`` row-wise each rank runs its
share of the heads. :func:`split_attention` swaps it in at parallelize time only: the
one-device model, its parameters and their names are unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SplitAttention(nn.Module):
    """Batch-first multi-head attention over separate ``q``, ``k``, ``v``, ``o`` Linears.

    Called as the ``torch.nn.Transformer*Layer``s call their attention in training:
    ``(query, key, value, attn_mask=..., key_padding_mask=..., need_weights=False,
    is_causal=...)``, returning ``(out, None)``. Dropout on the attention weights
    (``dropout``, in training only) as ``nn.MultiheadAttention`` applies it.

    The layers' inference fast path reads ``batch_first``, ``in_proj_bias``,
    ``_qkv_same_embed_dim`` and ``num_heads`` of their attention: ``in_proj_bias`` is None
    and ``_qkv_same_embed_dim`` False, so evaluation takes the layers' ordinary path, which
    calls this module.
    """

    batch_first = True
    in_proj_weight = None
    in_proj_bias = None
    _qkv_same_embed_dim = False
    q: nn.Linear
    k: nn.Linear
    v: nn.Linear
    o: nn.Linear

    def __init__(self, mha: nn.MultiheadAttention) -> None:
        super().__init__()
        if not (mha.batch_first and mha._qkv_same_embed_dim and mha.bias_k is None
                and not mha.add_zero_attn):
            raise ValueError("SplitAttention takes a batch-first nn.MultiheadAttention with "
                             "one in_proj_weight, no bias_k/bias_v and no add_zero_attn")
        self.embed_dim = mha.embed_dim
        self.num_heads = mha.num_heads
        self.head_dim = mha.head_dim
        self.dropout = mha.dropout
        weight = mha.in_proj_weight
        bias = mha.in_proj_bias
        d = self.embed_dim
        for i, name in enumerate(("q", "k", "v")):
            linear = nn.Linear(d, d, bias=bias is not None, device=weight.device,
                               dtype=weight.dtype)
            with torch.no_grad():
                linear.weight.copy_(weight[i * d:(i + 1) * d])
                if bias is not None:
                    linear.bias.copy_(bias[i * d:(i + 1) * d])
            setattr(self, name, linear)
        self.o = mha.out_proj

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                attn_mask: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None, need_weights: bool = False,
                is_causal: bool = False) -> tuple[torch.Tensor, None]:
        """``(attention output, None)``, as ``nn.MultiheadAttention`` with
        ``need_weights=False``; masks follow its conventions (a boolean True masks out)."""
        if need_weights:
            raise ValueError("SplitAttention computes no attention weights (need_weights)")
        n, t, _ = query.shape
        q, k, v = (self._heads(proj(x)) for proj, x in
                   ((self.q, query), (self.k, key), (self.v, value)))
        mask = _merged_mask(attn_mask, key_padding_mask, query.dtype)
        if is_causal and key_padding_mask is None:
            mask = None  # nn.MultiheadAttention's rule: the hint replaces attn_mask
        else:
            is_causal = False
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal)
        return self.o(out.transpose(1, 2).reshape(n, t, -1)), None

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(N, T, local heads x head_dim) to (N, local heads, T, head_dim)."""
        n, t, width = x.shape
        return x.view(n, t, width // self.head_dim, self.head_dim).transpose(1, 2)


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A mask to add to the attention scores: a boolean True becomes -inf."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
            mask, float("-inf"))
    return mask.to(dtype)


def _merged_mask(attn_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None,
                 dtype: torch.dtype) -> torch.Tensor | None:
    """One additive mask broadcasting over (N, heads, T, S), from a 2-D (T, S) attention
    mask and an (N, S) key padding mask (per-head 3-D masks are not taken: their heads
    would have to be split by rank)."""
    if attn_mask is not None and attn_mask.dim() != 2:
        raise ValueError("SplitAttention takes a 2-D attn_mask (T, S)")
    mask = None if attn_mask is None else _additive(attn_mask, dtype)
    if key_padding_mask is not None:
        pad = _additive(key_padding_mask, dtype)[:, None, None, :]
        mask = pad if mask is None else mask + pad
    return mask


#: The attentions of ``torch.nn.Transformer*Layer`` that :func:`split_attention` replaces.
ATTENTIONS = ("self_attn", "multihead_attn")


def split_attention(layer: nn.Module) -> None:
    """Replace the layer's ``nn.MultiheadAttention``s (:data:`ATTENTIONS`) by
    :class:`SplitAttention`s holding the same weights."""
    for name in ATTENTIONS:
        mha = getattr(layer, name, None)
        if isinstance(mha, nn.MultiheadAttention):
            setattr(layer, name, SplitAttention(mha))
