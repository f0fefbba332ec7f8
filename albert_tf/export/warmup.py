"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests`.

TF Serving replays this TFRecord file of `PredictionLog` protos when it loads a version, before
the version serves, so the first real request does not pay for graph optimization and kernel
initialization. `warmup_inputs` gives one small batch per signature (also the inputs of the
compatibility check's reload comparison), `prediction_logs` the protos, `write_warmup_file`
the file, and `read_warmup_file` reads it back (the local server replays it the same way).
A length-aware export also gets `bucket_warmup_inputs`: for every text signature one request
whose packed length falls in each step of the widths the model runs at (`N`, `2N`, ...,
`sequence_length`; N the length bucket, or the finer width of length-sorted chunks), so that no
first request of a new length pays for what the warmup would have done.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

WARMUP_DIR = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
WARMUP_TEXTS = ("ALBERT reads this sentence.", "A second, longer sentence: 1,000 words in 2024!")
WARMUP_QUESTIONS = ("Who reads this sentence?", "How many words?")
WARMUP_CONTEXTS = (
    "ALBERT reads this sentence.",
    "A second,  longer context: 1,000 words in 2024! Its café has   spaces. " * 3,
)
# Multiple choice: a cloze question ("_" filled by each choice) and a plain one.
WARMUP_CHOICE_QUESTIONS = ("ALBERT reads _ sentence.", "How many words?")
WARMUP_CHOICES = (("this", "that", "no", "every"), ("1,000", "ten", "none", "2024"))
# The words that the per-bucket requests repeat until a text packs to the bucket's length.
WARMUP_WORDS = ("ALBERT", "reads", "this", "sentence", "about", "1,000", "naïve", "words", "in", "2024!")


def _example(text: str, text_b=None) -> "tf.train.Example":
    import tensorflow as tf

    feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))}
    if text_b is not None:
        feature["text_b"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text_b.encode("utf-8")]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def warmup_inputs(signature_defs, pair: bool, sequence_length: int, texts: Sequence[str] = WARMUP_TEXTS) -> Dict[str, Dict[str, np.ndarray]]:
    """One batch of inputs per signature key: `{signature: {input_name: array}}`.

    Text inputs get `texts` (`text_b` the same texts reversed); QA inputs (`question`, `context`)
    two questions, the second with a context of several windows at a short sequence length;
    multiple-choice inputs (`text`, `question`, `choices`) two texts with a cloze and a plain
    question of four choices each; token inputs a `[CLS] ... [SEP]` batch of small ids (and a
    `p_mask` for SQuAD v2; rows of four choices when the signature's ids are
    `[batch, choices, seq]`); `classify`/`regress` the serialized `tf.Example`s of the texts.
    """
    texts = list(texts)
    texts_b = texts[::-1]
    batch = len(texts)
    result: Dict[str, Dict[str, np.ndarray]] = {}
    for key, signature in signature_defs.items():
        if key.startswith("__"):  # `__saved_model_init_op` is no signature to call
            continue
        names = set(signature.inputs.keys())
        if names == {"inputs"}:
            examples = [_example(a, b if pair else None).SerializeToString(deterministic=True) for a, b in zip(texts, texts_b)]
            result[key] = {"inputs": np.array(examples, dtype=object)}
        elif "choices" in names:
            rows = range(len(WARMUP_CHOICE_QUESTIONS))
            result[key] = {
                "text": np.array([WARMUP_CONTEXTS[i % len(WARMUP_CONTEXTS)].encode("utf-8") for i in rows], dtype=object),
                "question": np.array([q.encode("utf-8") for q in WARMUP_CHOICE_QUESTIONS], dtype=object),
                "choices": np.array([[c.encode("utf-8") for c in row] for row in WARMUP_CHOICES], dtype=object),
            }
        elif "question" in names:
            result[key] = {
                "question": np.array([t.encode("utf-8") for t in WARMUP_QUESTIONS], dtype=object),
                "context": np.array([t.encode("utf-8") for t in WARMUP_CONTEXTS], dtype=object),
            }
        elif "text" in names:
            inputs = {"text": np.array([t.encode("utf-8") for t in texts], dtype=object)}
            if "text_b" in names:
                inputs["text_b"] = np.array([t.encode("utf-8") for t in texts_b], dtype=object)
            result[key] = inputs
        else:
            ids = np.zeros((batch, sequence_length), np.int32)
            mask = np.zeros((batch, sequence_length), np.int32)
            for row in range(batch):
                used = min(sequence_length, 4 + row)
                ids[row, :used] = 5 + np.arange(used) % 3
                ids[row, 0], ids[row, used - 1] = 2, 3  # [CLS], [SEP] in both vocabularies
                mask[row, :used] = 1
            inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
            if "p_mask" in names:  # SQuAD v2: answers may be at [CLS] and in the (here: whole) text
                inputs["p_mask"] = 1 - mask
                inputs["p_mask"][:, 0] = 0
            if "mlm_positions" in names:
                inputs["mlm_positions"] = np.tile(np.array([[1, 2]], np.int32), (batch, 1))
            if len(signature.inputs["input_ids"].tensor_shape.dim) == 3:  # multiple choice: [batch, choices, seq]
                choices = len(WARMUP_CHOICES[0])
                inputs = {k: np.repeat(v[:, None, :], choices, axis=1) for k, v in inputs.items()}
                inputs["input_ids"][:, :, 1] += np.arange(choices, dtype=np.int32)  # choices that differ
                inputs["segment_ids"][:, :, 2:] = inputs["input_mask"][:, :, 2:]  # a second segment after 2 tokens
            result[key] = inputs
    return result


def bucket_bounds(sequence_length: int, length_bucket: int) -> List[int]:
    """The upper ends of the length buckets: `N, 2N, ...` below `sequence_length`, then it."""
    bounds = list(range(length_bucket, sequence_length, length_bucket))
    return bounds + [sequence_length]


def _bucket_text_inputs(names, text: str, pair: bool) -> Dict[str, np.ndarray]:
    """One request of the text signature with input `names` whose varying text is `text`."""
    encode = lambda values: np.array([v.encode("utf-8") for v in values], dtype=object)  # noqa: E731
    if "choices" in names:
        # No question: the shortest rows, so that the first bucket is reached too.
        return {"text": encode([text]), "question": encode([""]),
                "choices": np.array([[c.encode("utf-8") for c in WARMUP_CHOICES[0]]], dtype=object)}
    if "question" in names:
        return {"question": encode([WARMUP_QUESTIONS[0]]), "context": encode([text])}
    inputs = {"text": encode([text])}
    if pair:
        inputs["text_b"] = encode([WARMUP_TEXTS[0]])
    return inputs


def bucket_warmup_inputs(signature_defs, module, pair: bool) -> List[Tuple[str, Dict[str, np.ndarray]]]:
    """`(signature, inputs)` single-row requests, one per width step (`module.width_step`: the
    length bucket, or the chunks' finer rounding) of every text signature.

    The texts repeat `WARMUP_WORDS`: for each bucket the shortest such text whose packed length
    (`module.text_input_mask`: the longest window / choice row for SQuAD / multiple choice) falls
    in it; a bucket no text reaches (below the fixed question's length) gets none. `classify` /
    `regress` get the same texts as `tf.Example`s. Empty for a fixed-length `module`.
    """
    import tensorflow as tf

    bucket: Optional[int] = module.width_step
    if bucket is None:
        return []
    seq = module.sequence_length
    candidates = [" ".join(WARMUP_WORDS[i % len(WARMUP_WORDS)] for i in range(k)) for k in range(1, seq + 1)]
    text_names = set(signature_defs["serving_default"].inputs.keys())
    batch = {}
    for text in candidates:
        for name, value in _bucket_text_inputs(text_names, text, pair).items():
            batch.setdefault(name, []).append(value)
    mask, rows = module.text_input_mask(**{k: tf.constant(np.concatenate(v, axis=0)) for k, v in batch.items()})
    lengths = tf.math.unsorted_segment_max(tf.reduce_sum(mask, axis=-1), rows, len(candidates)).numpy()
    chosen, low = [], 0
    for high in bucket_bounds(seq, bucket):
        fits = [i for i, length in enumerate(lengths) if low < length <= high]
        if fits:
            chosen.append(candidates[fits[0]])
        low = high
    result = []
    for key in sorted(signature_defs):
        names = set(signature_defs[key].inputs.keys())
        for text in chosen:
            if key == "serving_default":
                result.append((key, _bucket_text_inputs(names, text, pair)))
            elif names == {"inputs"}:
                example = _example(text, WARMUP_TEXTS[0] if pair else None).SerializeToString(deterministic=True)
                result.append((key, {"inputs": np.array([example], dtype=object)}))
    return result


def _log(model_name: str, signature_defs, key: str, values: Dict[str, np.ndarray]):
    import tensorflow as tf
    from tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_log_pb2, regression_pb2

    from albert_tf.export.signatures import CLASSIFY_METHOD, REGRESS_METHOD

    method = signature_defs[key].method_name
    if method in (CLASSIFY_METHOD, REGRESS_METHOD):
        request = (classification_pb2.ClassificationRequest() if method == CLASSIFY_METHOD else regression_pb2.RegressionRequest())
        request.model_spec.name = model_name
        request.model_spec.signature_name = key
        for serialized in values["inputs"]:
            request.input.example_list.examples.add().ParseFromString(serialized)
        if method == CLASSIFY_METHOD:
            return prediction_log_pb2.PredictionLog(classify_log=prediction_log_pb2.ClassifyLog(request=request))
        return prediction_log_pb2.PredictionLog(regress_log=prediction_log_pb2.RegressLog(request=request))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = key
    for name, value in values.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))


def prediction_logs(model_name: str, signature_defs, inputs: Dict[str, Dict[str, np.ndarray]],
                    extra: Sequence[Tuple[str, Dict[str, np.ndarray]]] = ()) -> List:
    """The `PredictionLog`s for `inputs` (then the `(signature, inputs)` requests of `extra`):
    Classify/Regress requests for those method names, else Predict."""
    logs = [_log(model_name, signature_defs, key, inputs[key]) for key in sorted(inputs)]
    return logs + [_log(model_name, signature_defs, key, values) for key, values in extra]


def write_warmup_file(saved_model_dir: str, logs: Sequence) -> str:
    """Writes the logs as `assets.extra/tf_serving_warmup_requests` of `saved_model_dir`."""
    import tensorflow as tf

    directory = os.path.join(saved_model_dir, WARMUP_DIR)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString(deterministic=True))
    return path


def read_warmup_file(saved_model_dir: str) -> List:
    """The `PredictionLog`s of a SavedModel's warmup file ([] when it has none).

    Raises:
      ValueError: a record that is not a `PredictionLog`.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(saved_model_dir, WARMUP_DIR, WARMUP_FILE)
    if not os.path.exists(path):
        return []
    logs = []
    try:
        records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    except tf.errors.OpError as e:
        raise ValueError(f"{path} is not a TFRecord file: {e.message}") from None
    for index, record in enumerate(records):
        log = prediction_log_pb2.PredictionLog()
        try:
            log.ParseFromString(record)
        except DecodeError as e:
            raise ValueError(f"{path}: record {index} is not a PredictionLog: {e}") from None
        logs.append(log)
    return logs
