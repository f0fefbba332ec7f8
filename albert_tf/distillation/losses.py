"""The distillation losses, as plain `keras.ops` functions of batched tensors.

* `soft_target_kl`: KL(teacher || student) of the temperature-`T` softmaxes, times `T**2` (Hinton
  et al. 2015: keeps the soft term's gradients on the hard term's scale whatever `T`);
* `weighted_cross_entropy`: the hard-label cross-entropy over the examples (or tokens) whose
  weight is 1, so unlabelled transfer examples add nothing to it;
* `weighted_mse`: regression, to the teacher's prediction or to a label;
* `hidden_state_mse`: TinyBERT's MSE of hidden states over the real tokens (the student's
  already projected to the teacher's width);
* `attention_kl` / `value_relation_kl`: MiniLM's KL of the last layer's attention distributions
  and of its value relations softmax(V V^T / sqrt(d)), averaged over heads and real queries.

Every loss is a float32 scalar; a weight vector of zeros gives 0, never NaN.
"""

from __future__ import annotations

import math

from keras import ops

# Added to padded keys' scores before a softmax (the encoder's own -10000, `modeling.MASK_ADDER`).
_MASK_ADDER = -10000.0


def _f32(x):
    return ops.cast(x, "float32")


def _weighted_mean(values, weights):
    weights = _f32(weights)
    return ops.sum(_f32(values) * weights) / ops.maximum(ops.sum(weights), 1.0)


def kl_divergence_logits(teacher_logits, student_logits, temperature: float = 1.0):
    """KL(softmax(t / T) || softmax(s / T)) along the last axis, one value per row."""
    t = _f32(teacher_logits) / temperature
    s = _f32(student_logits) / temperature
    teacher_log_p = ops.log_softmax(t, axis=-1)
    student_log_p = ops.log_softmax(s, axis=-1)
    return ops.sum(ops.exp(teacher_log_p) * (teacher_log_p - student_log_p), axis=-1)


def soft_target_kl(teacher_logits, student_logits, temperature: float, weights=None):
    """`T**2 *` the mean KL of the softened distributions over the rows (or the rows whose
    `weights` are 1: a tagger's real tokens)."""
    kl = kl_divergence_logits(teacher_logits, student_logits, temperature)
    if weights is None:
        weights = ops.ones_like(kl)
    return (temperature ** 2) * _weighted_mean(kl, weights)


def weighted_cross_entropy(labels, logits, weights):
    """The mean sparse cross-entropy over the rows whose `weights` are 1 (0 when there are none).
    Labels under 0 (a tagger's ignored positions) must carry weight 0."""
    labels = ops.cast(labels, "int32")
    safe = ops.where(labels >= 0, labels, ops.zeros_like(labels))
    log_p = ops.log_softmax(_f32(logits), axis=-1)
    picked = ops.take_along_axis(log_p, ops.expand_dims(safe, -1), axis=-1)
    return _weighted_mean(-ops.squeeze(picked, -1), weights)


def weighted_mse(targets, predictions, weights=None):
    """The mean squared error over the rows whose `weights` are 1 (all rows without weights)."""
    error = ops.square(_f32(predictions) - _f32(targets))
    if weights is None:
        weights = ops.ones_like(error)
    return _weighted_mean(error, weights)


def hidden_state_mse(student_states, teacher_states, input_mask):
    """TinyBERT's hidden-state loss: the mean over the layer pairs of the MSE over the real
    tokens (mean over the hidden units). `student_states` are already in the teacher's width."""
    mask = _f32(input_mask)
    total = 0.0
    for s, t in zip(student_states, teacher_states):
        per_token = ops.mean(ops.square(_f32(s) - _f32(t)), axis=-1)
        total = total + _weighted_mean(per_token, mask)
    return total / max(len(student_states), 1)


def split_heads(x, num_heads: int):
    """[batch, seq, width] -> [batch, heads, seq, width / heads]."""
    shape = ops.shape(x)
    x = ops.reshape(x, (shape[0], shape[1], num_heads, -1))
    return ops.transpose(x, (0, 2, 1, 3))


def relation_log_probs(a, b, input_mask, num_heads: int):
    """log softmax(a_h b_h^T / sqrt(d_h)) per head over the real keys: [batch, heads, seq, seq]."""
    a = split_heads(_f32(a), num_heads)
    b = split_heads(_f32(b), num_heads)
    head_size = ops.shape(a)[-1]
    scores = ops.matmul(a, ops.transpose(b, (0, 1, 3, 2))) / ops.sqrt(ops.cast(head_size, "float32"))
    bias = (1.0 - _f32(input_mask)[:, None, None, :]) * _MASK_ADDER
    return ops.log_softmax(scores + bias, axis=-1)


def relation_kl(teacher_log_p, student_log_p, input_mask):
    """KL(teacher || student) of [batch, heads, seq, seq] relation distributions, averaged over
    heads and the real query positions."""
    kl = ops.sum(ops.exp(teacher_log_p) * (teacher_log_p - student_log_p), axis=-1)  # [batch, heads, seq]
    mask = ops.broadcast_to(_f32(input_mask)[:, None, :], ops.shape(kl))
    return _weighted_mean(kl, mask)


def attention_kl(teacher_qk, student_qk, input_mask, num_heads: int):
    """MiniLM's attention transfer: `teacher_qk` / `student_qk` are (queries, keys) of the last
    layer [batch, seq, width]; their per-head attention distributions are compared by KL. The
    widths may differ: both are cut into `num_heads` relation heads (MiniLMv2)."""
    t = relation_log_probs(teacher_qk[0], teacher_qk[1], input_mask, num_heads)
    s = relation_log_probs(student_qk[0], student_qk[1], input_mask, num_heads)
    return relation_kl(t, s, input_mask)


def value_relation_kl(teacher_values, student_values, input_mask, num_heads: int):
    """MiniLM's value-relation transfer: KL of softmax(V V^T / sqrt(d)) per relation head."""
    t = relation_log_probs(teacher_values, teacher_values, input_mask, num_heads)
    s = relation_log_probs(student_values, student_values, input_mask, num_heads)
    return relation_kl(t, s, input_mask)


def uniform_layer_map(student_layers: int, teacher_layers: int):
    """TinyBERT's uniform mapping: student layer m (1-based; 0 the embeddings) learns from teacher
    layer m * Lt / Ls, so the last layers meet."""
    return [0] + [int(math.floor(m * teacher_layers / student_layers)) for m in range(1, student_layers + 1)]
