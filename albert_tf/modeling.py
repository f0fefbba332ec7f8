"""The ALBERT architecture, top to bottom: embeddings, attention, feed-forward, encoder, heads.

Everything mirrors google-research/albert's `modeling.py` so that weights map one to one:

* factorized embedding: word [V, E] + position [P, E] + token type [T, E], LayerNorm, dropout,
  then `embedding_hidden_mapping_in` (E -> H) only when E != H;
* post-LN transformer blocks: `attention_1` (query/key/value/output dense, additive -10000 mask on
  padded keys, dropout, `LayerNorm`) then `ffn_1` (H -> I with the activation, I -> H, dropout,
  `LayerNorm_1`);
* layer `l` uses group `int(l / L * G)`, and every group holds `inner_group_num` blocks;
* pooler: tanh dense on the first token; MLM head: dense H -> E with the activation, LayerNorm,
  logits tied to the word-embedding table plus a bias; SOP head: 2-way dense on the pooled output.

Beyond the original, `sharing` selects which parts follow the group scheme ("all"), only the
attention ("attention"), only the feed-forward ("ffn"), or nothing ("none", every layer its own).
Layer names follow the original checkpoint scopes (see `albert_tf.checkpoints`).
"""

from __future__ import annotations

import math
import weakref
from typing import Optional

import keras
import tensorflow as tf
from keras import ops

from albert_tf import fused_ops
from albert_tf.quantization import RefuseKerasQuantize
from albert_tf.config import AlbertConfig, SHARING_MODES

LAYER_NORM_EPSILON = 1e-12
# The original adds -10000 (not -inf) to the scores of padded keys; kept for exact parity.
MASK_ADDER = -10000.0
ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


def get_activation(name: str):
    """The activation function called `name` in an ALBERT config."""
    if name in ("gelu", "gelu_new"):
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "gelu_exact":
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name in ("swish", "silu"):
        return keras.activations.silu
    if name in ("relu", "tanh", "linear"):
        return keras.activations.get(name)
    raise ValueError(f"unknown activation {name!r}")


def _initializer(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


def _fused_ops_apply() -> bool:
    """Whether `albert_tf.fused_ops` may replace Keras's ops in the graph being built."""
    return fused_ops.enabled() and keras.backend.backend() == "tensorflow" and not fused_ops.in_xla_context()


def _use_fused_ops(training) -> bool:
    return bool(training) and _fused_ops_apply()


def apply_activation(name: str, x, training=None):
    """The activation `name` on `x`; a GELU in training runs as one fused kernel (`albert_tf.fused_ops`)."""
    if name in ("gelu", "gelu_new", "gelu_exact") and _use_fused_ops(training):
        return fused_ops.gelu(x, approximate=name != "gelu_exact")
    return get_activation(name)(x)


def dense_rows(layer: keras.layers.Dense, rows, training=None):
    """A built `Dense` (no activation) applied to 2-D `rows` [batch * seq, in] as MatMul + BiasAdd
    (or to 3-D hidden states under `fused_ops.openvino_form`, `_dense_input`).

    The blocks run their dense layers this way rather than through `Dense.__call__` on 3-D inputs,
    which puts a Reshape between the MatMul and the bias and adds the bias with AddV2: that blocks
    Grappler's oneDNN remapper, which turns MatMul + BiasAdd (+ a following GELU) into one fused
    matmul. Measured in inference, ALBERT-base batch 32 x 128: 1.10 -> 0.80 s in mixed bf16 (the
    [4096, 768] x [768, 3072] matmul with its bias and GELU: 75 -> 23 ms), 2.26 -> 2.00 s in fp32.
    `training=False` lets the weights' casts be shared between layers (`_weight_as`).

    A quantized `Dense` (Keras `quantize`, layer by layer: the models refuse it whole,
    `albert_tf.quantization`) runs its own call: its `kernel` holds the quantized values.
    """
    if getattr(layer, "quantization_mode", None) is not None:
        return layer(rows, training=training)
    # A layer of its own compute dtype (`AlbertEncoder(matmul_dtype=...)`) takes its rows in it and
    # answers in it; the caller casts back where it needs its own dtype.
    rows = ops.cast(rows, layer.compute_dtype)
    kernel = _weight_as(layer.kernel, rows.dtype, training)
    return tf.nn.bias_add(tf.matmul(rows, kernel), _weight_as(layer.bias, rows.dtype, training))


def _dense_input(hidden_states, hidden_size: int, training=None):
    """The blocks' dense layers' input from 3-D `hidden_states`, and the function that makes it:
    2-D rows (`dense_rows`), or in inference under `fused_ops.openvino_form` the 3-D tensor as it
    is (the reshapes around every dense layer would keep OpenVINO's int8 quantizers unfused)."""
    if not training and fused_ops.in_openvino_form():
        return hidden_states, lambda x: x
    as_rows = lambda x: ops.reshape(x, (-1, hidden_size))  # noqa: E731
    return as_rows(hidden_states), as_rows


def _weight_as(variable, dtype, training=None):
    """`variable` in `dtype`. In a traced inference graph the cast is made once and reused by every
    layer that shares the weight: with ALBERT's sharing, ALBERT-base in mixed bfloat16 would
    otherwise cast the same 7M shared weights twelve times per forward pass.

    Only for `training=False` in a `tf.function` graph and outside any distribution strategy (whose
    replicas each read their own copy of a variable); everywhere else a plain cast.
    """
    return _once_per_graph((variable,), tf.as_dtype(dtype).name, lambda: ops.cast(variable, dtype), training)


def _weights_concat(variables, training=None):
    """`variables` (same dtype, same leading shape) concatenated along their last axis: one matmul
    for several dense layers of the same input. Made once per traced inference graph, as `_weight_as`."""
    return _once_per_graph(tuple(variables), "concat", lambda: tf.concat([ops.convert_to_tensor(v) for v in variables],
                                                                         axis=-1), training)


def _once_per_graph(variables, what: str, make, training):
    """`make()`, in a traced inference graph made once for `variables` and `what` and then reused;
    everywhere else (training, eager, under a distribution strategy) made at each call."""
    if training is not False or tf.executing_eagerly() or tf.distribute.has_strategy():
        return make()
    graph = tf.compat.v1.get_default_graph()
    made = _weight_casts.setdefault(graph, {})
    key = (tuple(id(v) for v in variables), what)
    if key in made and all(ref() is v for ref, v in zip(made[key][0], variables)):
        return graph.get_tensor_by_name(made[key][1])
    tensor = make()
    made[key] = (tuple(weakref.ref(v) for v in variables), tensor.name)
    return tensor


# {graph: {(variable ids, what): (weak references to the variables, name of the tensor made)}}. Names
# and weak references only: a tensor in the values would keep its graph, the key, alive forever.
_weight_casts = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertLayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis, with the residual add folded in.

    `call(inputs, residual=None)` normalizes `inputs + residual`. When training, it runs as one fused
    kernel with a hand-written gradient (`albert_tf.fused_ops.layer_norm`); in inference (and in
    exported graphs) as `albert_tf.fused_ops.inference_layer_norm`, core ops that Grappler fuses into
    one oneDNN kernel; under whole-model XLA or with `fused_ops.set_enabled(False)`, as Keras's own
    layer. Weights (`gamma`, `beta`) and their names are Keras's.
    """

    def call(self, inputs, residual=None, training=None):
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        last_axis_only = axes in ([-1], [len(inputs.shape) - 1])
        plain = last_axis_only and self.center and self.scale and not self.rms_scaling
        if plain and _use_fused_ops(training):
            return fused_ops.layer_norm(inputs, self.gamma, self.beta, self.epsilon, residual=residual)
        if residual is not None:
            inputs = inputs + ops.cast(residual, inputs.dtype)
        if plain and not training and fused_ops.in_openvino_form():
            return fused_ops.mvn_layer_norm(inputs, self.gamma, self.beta, self.epsilon)
        if plain and not training and inputs.shape[-1] is not None and _fused_ops_apply():
            return fused_ops.inference_layer_norm(inputs, self.gamma, self.beta, self.epsilon)
        return super().call(inputs)


def attention_layer_name(group: int, inner: int, shared: bool, layer: int) -> str:
    """Keras name of a block part; shared parts are named by group, unshared by layer."""
    return f"group_{group}_inner_group_{inner}" if shared else f"layer_{layer}_inner_group_{inner}"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbeddings(keras.layers.Layer):
    """Word + position + token-type embeddings of size E, LayerNorm and dropout.

    Original scope: `bert/embeddings/{word_embeddings,token_type_embeddings,position_embeddings,LayerNorm}`.
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        dropout=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.layer_norm = AlbertLayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        init = _initializer(self.initializer_range)
        # autocast=False: under mixed precision Keras would cast each whole table to the compute dtype
        # on every read (the [V, E] word table: 3.8M values per forward pass for ALBERT-base) before
        # the gather; `call` gathers in float32 and casts only the rows. Same values either way.
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.embedding_size), initializer=init, name="word_embeddings", autocast=False
        )
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.embedding_size), initializer=init, name="token_type_embeddings",
            autocast=False,
        )
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.embedding_size), initializer=init, name="position_embeddings",
            autocast=False,
        )
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        seq_length = ops.shape(input_ids)[1]
        word = ops.take(self.word_embeddings, input_ids, axis=0)
        token_type = ops.take(self.token_type_embeddings, segment_ids, axis=0)
        position = ops.expand_dims(self.position_embeddings[:seq_length], 0)
        x = ops.cast(word, self.compute_dtype) + ops.cast(token_type, self.compute_dtype)
        x = x + ops.cast(position, self.compute_dtype)
        x = self.layer_norm(x, training=training)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertAttention(keras.layers.Layer):
    """Multi-head self-attention, output dense, dropout and the post-LN residual (`attention_1`)."""

    def __init__(self, hidden_size, num_heads, dropout=0.0, attention_dropout=0.0, initializer_range=0.02,
                 matmul_dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.matmul_dtype = matmul_dtype
        self.head_size = hidden_size // num_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_size, kernel_initializer=_initializer(initializer_range), dtype=matmul_dtype or self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense")
        self.attention_dropout_layer = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="output_dropout")
        self.layer_norm = AlbertLayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm"
        )

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build(input_shape)
        self.layer_norm.build(input_shape)
        self.built = True

    def _split_heads(self, x, batch, seq):
        x = ops.reshape(x, (batch, seq, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def _heads(self, layers, rows, batch, seq, training):
        """`layers` (of query / key / value) on `rows`, each split into heads [batch, heads, seq, size].

        In the bf16 export graph (`matmul_dtype`, inference) they run as one matmul of their
        concatenated weights and one transpose: at batch 1 the per-op cost of three small matmuls and
        three transposes per layer, not their arithmetic, is what the attention's projections take."""
        plain = [layer for layer in layers if getattr(layer, "quantization_mode", None) is None]
        if len(layers) == 1 or self.matmul_dtype is None or training is not False or len(plain) != len(layers):
            return [self._split_heads(dense_rows(layer, rows, training), batch, seq) for layer in layers]
        kernel = _weights_concat([layer.kernel for layer in layers], training)
        bias = _weights_concat([layer.bias for layer in layers], training)
        x = tf.nn.bias_add(tf.matmul(ops.cast(rows, kernel.dtype), kernel), bias)
        x = ops.reshape(x, (batch, seq, len(layers), self.num_heads, self.head_size))
        return tf.unstack(ops.transpose(x, (2, 0, 3, 1, 4)))

    def call(self, hidden_states, attention_bias, training=None, first_token_only=False):
        """`first_token_only`: queries (and the output) for position 0 only, [batch, 1, hidden]."""
        shape = ops.shape(hidden_states)
        batch, seq = shape[0], shape[1]
        rows, as_rows = _dense_input(hidden_states, self.hidden_size, training)
        query_rows = as_rows(hidden_states[:, :1, :]) if first_token_only else rows
        queries = 1 if first_token_only else seq
        # The rows in the dense layers' dtype, cast once for all three (no-op unless `matmul_dtype`).
        dense_in = ops.cast(rows, self.query.compute_dtype)
        query_in = ops.cast(query_rows, self.query.compute_dtype) if first_token_only else dense_in
        if first_token_only:
            (q,) = self._heads([self.query], query_in, batch, queries, training)
            k, v = self._heads([self.key, self.value], dense_in, batch, seq, training)
        else:
            q, k, v = self._heads([self.query, self.key, self.value], dense_in, batch, seq, training)
        scale = 1.0 / math.sqrt(self.head_size)
        if training:
            # Scale q rather than the [B, N, S, S] scores: same result, fewer multiplies.
            scores = ops.matmul(q * ops.cast(scale, q.dtype), ops.transpose(k, (0, 1, 3, 2)))
        elif q.dtype != self.compute_dtype:
            # bf16 matmuls in a float32 block (the bf16 export graph): scale, mask and softmax in
            # float32, as PyTorch's autocast does; the probabilities go back to bf16 for the matmul.
            scores = ops.cast(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), self.compute_dtype)
            scores = scores * ops.cast(scale, self.compute_dtype)
        else:
            # BatchMatMul -> Mul -> AddV2 is one fused oneDNN kernel in inference (Grappler's remapper).
            scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * ops.cast(scale, q.dtype)
        scores = scores + ops.cast(attention_bias, scores.dtype)
        probs = ops.softmax(scores, axis=-1)
        probs = self.attention_dropout_layer(probs, training=training)
        context = ops.matmul(ops.cast(probs, v.dtype), v)
        context_shape = (batch, queries, self.hidden_size) if rows is hidden_states else (-1, self.hidden_size)
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), context_shape)
        output = self.output_dropout(dense_rows(self.output_dense, context, training), training=training)
        output = self.layer_norm(output, residual=query_rows, training=training)
        return output if rows is hidden_states else ops.reshape(output, (batch, queries, self.hidden_size))

    def compute_output_shape(self, input_shape, *args):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            initializer_range=self.initializer_range,
        )
        return _with_matmul_dtype(config, self.matmul_dtype)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertFeedForward(keras.layers.Layer):
    """Dense H -> I with the activation, dense I -> H, dropout and the post-LN residual (`ffn_1`)."""

    def __init__(self, hidden_size, intermediate_size, activation="gelu", dropout=0.0, initializer_range=0.02,
                 matmul_dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.matmul_dtype = matmul_dtype
        init = _initializer(initializer_range)
        get_activation(activation)  # fails early on an unknown name
        # The activation is applied in `call`, where it can use the fused training kernel.
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            kernel_initializer=init,
            dtype=matmul_dtype or self.dtype_policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=matmul_dtype or self.dtype_policy, name="output_dense"
        )
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="output_dropout")
        # Named after the original scope `inner_group_K/LayerNorm_1`.
        self.layer_norm = AlbertLayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm_1"
        )

    def build(self, input_shape):
        self.intermediate.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
        self.layer_norm.build(input_shape)
        self.built = True

    def call(self, hidden_states, training=None):
        shape = ops.shape(hidden_states)
        rows, _ = _dense_input(hidden_states, self.hidden_size, training)
        x = apply_activation(self.activation, dense_rows(self.intermediate, rows, training), training=training)
        x = self.output_dropout(dense_rows(self.output_dense, x, training), training=training)
        x = self.layer_norm(x, residual=rows, training=training)
        return x if rows is hidden_states else ops.reshape(x, (shape[0], shape[1], self.hidden_size))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            activation=self.activation,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return _with_matmul_dtype(config, self.matmul_dtype)


def _with_matmul_dtype(config: dict, matmul_dtype: Optional[str]) -> dict:
    """`config` with `matmul_dtype` when one is set: a config of the usual models stays as it was."""
    return config if matmul_dtype is None else {**config, "matmul_dtype": matmul_dtype}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(RefuseKerasQuantize, keras.Model):
    """The ALBERT encoder (embeddings, shared transformer stack, pooler) as a functional Keras model.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 of shape [batch, seq].
    Outputs: a dict with `sequence_output` [batch, seq, H] and `pooled_output` [batch, H], always
    float32 (also under `mixed_bfloat16`), plus `encoder_outputs` (the output of every layer) when
    `output_all_layers=True`.

    Args:
        vocab_size, embedding_size, hidden_size, num_layers, num_groups, inner_group_num, num_heads,
        intermediate_size, hidden_act, hidden_dropout, attention_dropout, max_position_embeddings,
        type_vocab_size, initializer_range: as the `albert_config.json` fields of the same meaning.
        sharing: "all" (the original groups x inner groups), "attention", "ffn" or "none".
        output_all_layers: also return every layer's output.
        matmul_dtype: the dtype policy of the blocks' dense layers and `embedding_hidden_mapping_in`
            (their weights stored and multiplied in it) where the rest computes in `dtype`: the bf16
            export graph (`albert_tf.export.precision`) is `dtype="float32", matmul_dtype="bfloat16"`,
            bf16 weights read once with LayerNorm, softmax, embeddings and heads in float32.
            Default None: `dtype` everywhere.

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> encoder = AlbertEncoder.from_albert_config(config)
    >>> out = encoder({"input_ids": np.array([[2, 5, 3, 0]], "int32"),
    ...                "input_mask": np.array([[1, 1, 1, 0]], "int32"),
    ...                "segment_ids": np.zeros((1, 4), "int32")})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((1, 4, 16), (1, 16))
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        hidden_size,
        num_layers,
        num_heads,
        intermediate_size,
        num_groups=1,
        inner_group_num=1,
        hidden_act="gelu",
        hidden_dropout=0.0,
        attention_dropout=0.0,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        sharing="all",
        output_all_layers=False,
        dtype=None,
        matmul_dtype=None,
        **kwargs,
    ):
        if sharing not in SHARING_MODES:
            raise ValueError(f"unknown sharing {sharing!r}; expected one of {SHARING_MODES}")
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) is not a multiple of num_heads ({num_heads})")
        if num_groups > num_layers or num_layers % num_groups:
            raise ValueError(f"num_groups ({num_groups}) must divide num_layers ({num_layers})")

        # === Layers ===
        embeddings = AlbertEmbeddings(
            vocab_size,
            embedding_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            dropout=hidden_dropout,
            initializer_range=initializer_range,
            dtype=dtype,
            name="embeddings",
        )
        projection = None
        if embedding_size != hidden_size:
            projection = keras.layers.Dense(
                hidden_size,
                kernel_initializer=_initializer(initializer_range),
                dtype=matmul_dtype or dtype,
                name="embedding_hidden_mapping_in",
            )
        share_attention = sharing in ("all", "attention")
        share_ffn = sharing in ("all", "ffn")
        attention_blocks, ffn_blocks = {}, {}
        # Which (attention, ffn) block each of the L x K positions uses, in execution order.
        schedule = []
        for layer in range(num_layers):
            # The original's `int(layer / num_layers * num_groups)`, in exact integer arithmetic.
            group = layer * num_groups // num_layers
            for inner in range(inner_group_num):
                a_name = attention_layer_name(group, inner, share_attention, layer) + "_attention_1"
                f_name = attention_layer_name(group, inner, share_ffn, layer) + "_ffn_1"
                if a_name not in attention_blocks:
                    attention_blocks[a_name] = AlbertAttention(
                        hidden_size,
                        num_heads,
                        dropout=hidden_dropout,
                        attention_dropout=attention_dropout,
                        initializer_range=initializer_range,
                        matmul_dtype=matmul_dtype,
                        dtype=dtype,
                        name=a_name,
                    )
                if f_name not in ffn_blocks:
                    ffn_blocks[f_name] = AlbertFeedForward(
                        hidden_size,
                        intermediate_size,
                        activation=hidden_act,
                        dropout=hidden_dropout,
                        initializer_range=initializer_range,
                        matmul_dtype=matmul_dtype,
                        dtype=dtype,
                        name=f_name,
                    )
                schedule.append((a_name, f_name))
        pooler = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=_initializer(initializer_range),
            dtype=dtype,
            name="pooler",
        )

        # === Functional Model ===
        input_ids = keras.Input(shape=(None,), dtype="int32", name="input_ids")
        input_mask = keras.Input(shape=(None,), dtype="int32", name="input_mask")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        layer_outputs = _run_encoder(
            embeddings, projection, attention_blocks, ffn_blocks, schedule, input_ids, input_mask, segment_ids
        )
        x = layer_outputs[-1]
        # The original exposes one output per layer (after its last inner block).
        per_layer = layer_outputs[inner_group_num - 1 :: inner_group_num]
        sequence_output = ops.cast(x, "float32")
        pooled_output = ops.cast(pooler(x[:, 0, :]), "float32")
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled_output}
        if output_all_layers:
            outputs["encoder_outputs"] = [ops.cast(t, "float32") for t in per_layer]
        super().__init__(
            inputs={"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )
        self.embeddings = embeddings
        self.embedding_hidden_mapping_in = projection
        self.attention_blocks = attention_blocks
        self.ffn_blocks = ffn_blocks
        self.schedule = schedule
        self.pooler = pooler

        # === Config ===
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.num_groups = num_groups
        self.inner_group_num = inner_group_num
        self.hidden_act = hidden_act
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.sharing = sharing
        self.output_all_layers = output_all_layers
        self.matmul_dtype = matmul_dtype

    def pooled_output(self, inputs, training=None):
        """The `pooled_output` alone (float32 [batch, hidden]), with less work than `self(inputs)`.

        The pooler reads only the first token, so after the last attention block nothing else needs
        computing: that block takes queries for position 0 only, and the feed-forward blocks after it
        run on one row per sequence. Same values as `self(inputs)["pooled_output"]` (and the same
        gradients); for ALBERT-base that skips 7% of the encoder's matmul work. Task heads that read
        only the pooled output (classification, regression, multiple choice) call this.
        """
        ids, mask, segments = (ops.cast(inputs[k], "int32") for k in ENCODER_INPUTS)
        layer_outputs = _run_encoder(
            self.embeddings, self.embedding_hidden_mapping_in, self.attention_blocks, self.ffn_blocks,
            self.schedule, ids, mask, segments, training=training, first_token_only=True,
        )
        return ops.cast(self.pooler(layer_outputs[-1][:, 0, :]), "float32")

    def block_outputs(self, inputs, training=None):
        """The embedding output (after `embedding_hidden_mapping_in`) and the output of every
        block in execution order, in the compute dtype: `num_layers * inner_group_num + 1`
        tensors [batch, seq, hidden]. Distillation reads the layers in between, which the
        functional outputs do not carry unless the encoder was built with `output_all_layers`."""
        ids, mask, segments = (ops.cast(inputs[k], "int32") for k in ENCODER_INPUTS)
        return _run_encoder(
            self.embeddings, self.embedding_hidden_mapping_in, self.attention_blocks, self.ffn_blocks,
            self.schedule, ids, mask, segments, training=training, with_embeddings=True,
        )

    @classmethod
    def from_albert_config(cls, config: AlbertConfig, **kwargs) -> "AlbertEncoder":
        """Builds the encoder an `AlbertConfig` describes (kwargs: `dtype`, `output_all_layers`, `name`)."""
        return cls(**encoder_kwargs(config), **kwargs)

    def to_albert_config(self) -> AlbertConfig:
        return AlbertConfig(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_hidden_groups=self.num_groups,
            inner_group_num=self.inner_group_num,
            num_attention_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout,
            attention_probs_dropout_prob=self.attention_dropout,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            initializer_range=self.initializer_range,
            sharing=self.sharing,
        )

    def get_config(self):
        config = {
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "hidden_size": self.hidden_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "num_groups": self.num_groups,
            "inner_group_num": self.inner_group_num,
            "hidden_act": self.hidden_act,
            "hidden_dropout": self.hidden_dropout,
            "attention_dropout": self.attention_dropout,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "sharing": self.sharing,
            "output_all_layers": self.output_all_layers,
            "name": self.name,
            "trainable": self.trainable,
            # The functional Model does not keep a dtype policy of its own; its layers carry it.
            "dtype": keras.saving.serialize_keras_object(self.embeddings.dtype_policy),
        }
        return _with_matmul_dtype(config, self.matmul_dtype)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)


def _run_encoder(embeddings, projection, attention_blocks, ffn_blocks, schedule, input_ids, input_mask, segment_ids,
                 training=None, first_token_only=False, with_embeddings=False):
    """Embeddings, projection and the scheduled blocks; the output of every block, in order
    (preceded by the projected embedding output when `with_embeddings`).

    `first_token_only`: the last attention block computes position 0 only (see
    `AlbertEncoder.pooled_output`), so the last outputs are [batch, 1, hidden].
    """
    x = embeddings(input_ids, segment_ids, training=training)
    if projection is not None:
        x = projection(x)
    # [batch, 1, 1, seq]: broadcast over heads and query positions. ExpandDims, not a `[:, None]`
    # slice: TFLite's builtin StridedSlice has no new-axis mask (`albert_tf.export.tflite`).
    attention_bias = (1.0 - ops.cast(ops.expand_dims(input_mask, (1, 2)), "float32")) * MASK_ADDER
    outputs = [x] if with_embeddings else []
    for index, (a_name, f_name) in enumerate(schedule):
        last = first_token_only and index == len(schedule) - 1
        x = attention_blocks[a_name](x, attention_bias, training=training, first_token_only=last)
        x = ffn_blocks[f_name](x, training=training)
        outputs.append(x)
    return outputs


def encoder_kwargs(config: AlbertConfig) -> dict:
    """`AlbertEncoder` constructor arguments for an `AlbertConfig`."""
    return dict(
        vocab_size=config.vocab_size,
        embedding_size=config.embedding_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        num_groups=config.num_hidden_groups,
        inner_group_num=config.inner_group_num,
        hidden_act=config.hidden_act,
        hidden_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        initializer_range=config.initializer_range,
        sharing=config.sharing,
    )


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMLMHead(keras.layers.Layer):
    """Masked-LM head (`cls/predictions`): dense H -> E with the activation, LayerNorm, tied logits.

    `call(sequence_output, word_embeddings, masked_positions=None)`: `word_embeddings` is the
    encoder's [V, E] table (tied, as the original); with `masked_positions` [batch, P] only those
    positions are scored, giving logits [batch, P, V], else [batch, seq, V]. Logits are float32.
    """

    def __init__(self, vocab_size, embedding_size, activation="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.activation = activation
        self.initializer_range = initializer_range
        get_activation(activation)  # fails early on an unknown name
        self.dense = keras.layers.Dense(
            embedding_size,
            kernel_initializer=_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = AlbertLayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="transform_LayerNorm"
        )

    def build(self, sequence_output_shape, word_embeddings_shape=None, masked_positions_shape=None):
        self.dense.build(sequence_output_shape)
        self.layer_norm.build(tuple(sequence_output_shape[:-1]) + (self.embedding_size,))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, word_embeddings, masked_positions=None, training=None):
        if masked_positions is not None:
            sequence_output = ops.take_along_axis(
                sequence_output, ops.cast(masked_positions, "int32")[:, :, None], axis=1
            )
        x = apply_activation(self.activation, self.dense(sequence_output), training=training)
        x = self.layer_norm(x, training=training)
        table = ops.cast(word_embeddings, x.dtype)
        # One [rows, E] x [E, V] matmul: a batched einsum would broadcast the table over the batch,
        # and its gradient would build a [batch, P, V] tensor per example before summing it.
        rows = ops.reshape(x, (-1, self.embedding_size))
        logits = ops.matmul(rows, ops.transpose(table))
        logits = ops.reshape(logits, (-1, ops.shape(x)[1], self.vocab_size))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            activation=self.activation,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSOPHead(keras.layers.Layer):
    """Sentence-order head (`cls/seq_relationship`): 2-way logits from the pooled output.

    Stored as the original does: `output_weights` [2, H] (transposed w.r.t. a Dense kernel) and `output_bias` [2].
    """

    def __init__(self, hidden_size, num_classes=2, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_classes = num_classes
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            shape=(self.num_classes, self.hidden_size),
            initializer=_initializer(self.initializer_range),
            name="output_weights",
        )
        self.output_bias = self.add_weight(shape=(self.num_classes,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, pooled_output):
        logits = ops.matmul(pooled_output, ops.transpose(ops.cast(self.output_weights, pooled_output.dtype)))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_classes=self.num_classes, initializer_range=self.initializer_range)
        return config
