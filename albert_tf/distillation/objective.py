"""`DistillationModel`: the student trained on the distillation objective.

The wrapper is what `run_finetuning` fits; only its `student` is saved (`saved_model`). Each batch
carries the teacher's outputs computed once before training (`teacher_outputs`: logits, or
predictions for regression) and `label_weight` (1 for labelled examples, 0 for the transfer set's
unlabelled text). The loss is

    alpha * soft + (1 - alpha) * hard + transfer_weight * transfer

with `soft` the T^2-scaled KL to the teacher's softened logits (regression: the MSE to its
prediction; tagging: per real token), `hard` the task loss on the labelled examples only, and
`transfer` (optional) TinyBERT's hidden-state MSE or MiniLM's attention and value-relation KL.
Those need the teacher's inner states, so for them the frozen teacher runs inside the step.
Inference (`training=False`) is the student's own call, so the run's dev evaluation scores it.
"""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.distillation import losses
from albert_tf.tasks.classification import REGRESSION
from albert_tf.tasks.tagging import TAGGING
from albert_tf.losses import scale_loss_for_replicas
from albert_tf.modeling import ENCODER_INPUTS
from albert_tf.train_step_trace import BuildsOptimizerBeforeFit

TEACHER_OUTPUTS = "teacher_outputs"
LABEL_WEIGHT = "label_weight"


def _per_layer(states, inner_group_num: int):
    """The embedding output and each layer's output (after its last inner block)."""
    return [states[0]] + list(states[inner_group_num::inner_group_num])


def _last_attention_inputs(encoder, states):
    """(queries, keys, values) of the encoder's last attention block, [batch, seq, hidden]."""
    block = encoder.attention_blocks[encoder.schedule[-1][0]]
    x = states[-2]
    return block.query(x), block.key(x), block.value(x)


class DistillationModel(BuildsOptimizerBeforeFit, keras.Model):
    """The student with the distillation loss (not saved itself: `student` is).

    Args:
        student: The student task model (`AlbertForClassification`, `AlbertForRegression`,
            `AlbertForTagging`).
        kind: The teacher's `TaskSpec.kind`: "classification", "regression" or "tagging".
        temperature, alpha, transfer, transfer_weight: As `DistillSettings`.
        teacher: The teacher task model, needed (and frozen) only for a transfer.
    """

    def __init__(self, student, kind: str, *, temperature: float, alpha: float, transfer: str = "none",
                 transfer_weight: float = 1.0, teacher=None, **kwargs):
        super().__init__(**kwargs)
        self.student = student
        self.kind = kind
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.transfer = transfer
        self.transfer_weight = float(transfer_weight)
        self.teacher = teacher
        self.projection = None
        if transfer != "none":
            if teacher is None:
                raise ValueError(f"transfer {transfer!r} needs the teacher")
            teacher.trainable = False
            s_enc, t_enc = student.encoder, teacher.encoder
            if transfer == "hidden" and s_enc.hidden_size != t_enc.hidden_size:
                # TinyBERT's W_h: the student's states mapped to the teacher's width, learned with it.
                self.projection = keras.layers.Dense(t_enc.hidden_size, name="hidden_projection")
            if transfer == "attention" and t_enc.hidden_size % s_enc.num_heads:
                raise ValueError(
                    f"attention transfer cuts both models into the student's {s_enc.num_heads} relation heads; "
                    f"the teacher's width {t_enc.hidden_size} is not a multiple of it"
                )
            self.layer_map = losses.uniform_layer_map(s_enc.num_layers, t_enc.num_layers)
        self.soft_loss = keras.metrics.Mean(name="soft_loss")
        self.hard_loss = keras.metrics.Mean(name="hard_loss")
        self.transfer_loss = keras.metrics.Mean(name="transfer_loss")

    def call(self, inputs, training=None):
        if not training or self.transfer == "none":
            return self.student(inputs, training=training)
        student = self.student
        encoder_inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        states = student.encoder.block_outputs(encoder_inputs, training=training)
        x = states[-1]
        encoder_outputs = {
            "sequence_output": ops.cast(x, "float32"),
            "pooled_output": ops.cast(student.encoder.pooler(x[:, 0, :]), "float32"),
        }
        outputs = student.call_head(encoder_outputs, inputs, training=training)
        outputs = {k: ops.cast(v, "float32") for k, v in outputs.items()}
        teacher_states = [ops.stop_gradient(t) for t in self.teacher.encoder.block_outputs(encoder_inputs, training=False)]
        mask = inputs["input_mask"]
        if self.transfer == "hidden":
            s_layers = _per_layer(states, student.encoder.inner_group_num)
            t_layers = _per_layer(teacher_states, self.teacher.encoder.inner_group_num)
            if self.projection is not None:
                s_layers = [self.projection(ops.cast(s, "float32")) for s in s_layers]
            transfer = losses.hidden_state_mse(s_layers, [t_layers[m] for m in self.layer_map], mask)
        else:
            heads = student.encoder.num_heads
            sq, sk, sv = _last_attention_inputs(student.encoder, states)
            tq, tk, tv = (ops.stop_gradient(t) for t in _last_attention_inputs(self.teacher.encoder, teacher_states))
            transfer = (losses.attention_kl((tq, tk), (sq, sk), mask, heads)
                        + losses.value_relation_kl(tv, sv, mask, heads))
        outputs["transfer_loss"] = transfer
        return outputs

    def distillation_losses(self, inputs, outputs):
        """(soft, hard) losses of a batch."""
        weight = ops.cast(inputs[LABEL_WEIGHT], "float32")
        teacher = inputs[TEACHER_OUTPUTS]
        if self.kind == REGRESSION:
            predictions = outputs["predictions"]
            return losses.weighted_mse(teacher, predictions), losses.weighted_mse(inputs["labels"], predictions, weight)
        logits = outputs["logits"]
        if self.kind == TAGGING:
            labels = ops.cast(inputs["labels"], "int32")
            token_weight = ops.cast(labels >= 0, "float32") * weight[:, None]
            soft = losses.soft_target_kl(teacher, logits, self.temperature, weights=inputs["input_mask"])
            return soft, losses.weighted_cross_entropy(labels, logits, token_weight)
        labels = ops.reshape(inputs["labels"], (-1,))
        return losses.soft_target_kl(teacher, logits, self.temperature), losses.weighted_cross_entropy(labels, logits, weight)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        soft, hard = self.distillation_losses(x, y_pred)
        loss = self.alpha * soft + (1.0 - self.alpha) * hard
        self.soft_loss.update_state(soft)
        self.hard_loss.update_state(hard)
        if "transfer_loss" in y_pred:
            loss = loss + self.transfer_weight * y_pred["transfer_loss"]
            self.transfer_loss.update_state(y_pred["transfer_loss"])
        if self.student.losses:
            loss = loss + ops.sum(ops.stack([ops.cast(l, "float32") for l in self.student.losses]))
        return scale_loss_for_replicas(loss)
