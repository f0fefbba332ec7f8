"""Tests of `albert_tf.model_server.length_batching` (batches by length bucket), its
`batching_parameters.txt` switch, and the piece-count order of bulk scoring.

Most run on a fake servable whose `run` the test holds and releases, so the order in which the
batches form is known; one exports a tiny length-aware classifier and serves it over REST."""

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.export import serving_config  # noqa: E402
from albert_tf.model_server.batching import Batcher  # noqa: E402
from albert_tf.model_server.length_batching import LengthGroupingBatcher, make_batcher  # noqa: E402
from albert_tf.model_server.request_length import RequestLengths  # noqa: E402
from albert_tf.model_server.servable import UNAVAILABLE, ServingError  # noqa: E402

TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _tokens_signature():
    from tensorflow.core.protobuf import meta_graph_pb2

    definition = meta_graph_pb2.SignatureDef()
    for name in TOKEN_INPUTS:
        info = definition.inputs[name]
        info.dtype = 3  # DT_INT32
        info.tensor_shape.dim.add(size=-1)
        info.tensor_shape.dim.add(size=-1)
    out = definition.outputs["id_sum"]
    out.dtype = 3
    out.tensor_shape.dim.add(size=-1)
    return definition


class FakeServable:
    """A `tokens` signature whose answer is each row's id sum (padding adds 0); `run` records the
    batch (each row's first id names its request) and waits for `gate` when it is cleared."""

    path = "/nonexistent"
    slow_above = 1_000_000  # batches wider than this take half a second

    def __init__(self):
        self.definition = _tokens_signature()
        self.batches = []
        self.gate = threading.Event()
        self.gate.set()
        self.running = threading.Event()

    def signature(self, name):
        return self.definition

    def validate_inputs(self, signature, inputs):
        pass

    def run(self, signature, inputs, output_filter=()):
        self.running.set()
        self.gate.wait(10)
        ids = inputs["input_ids"]
        if ids.shape[1] > self.slow_above:
            time.sleep(0.5)
        self.batches.append((ids[:, 0].tolist(), ids.shape[1]))
        return {"id_sum": ids.sum(axis=1)}


def request(name: int, length: int, rows: int = 1):
    ids = np.ones((rows, length), np.int32)
    ids[:, 0] = name
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def config(**kwargs):
    settings = dict(max_batch_size=4, batch_timeout_micros=50_000, num_batch_threads=1)
    settings.update(kwargs)
    return serving_config.BatchingConfig(**settings)


class Client:
    """Requests sent from threads, queued in the order given (each waits until it is queued)."""

    def __init__(self, batcher):
        self.batcher, self.replies, self.threads = batcher, {}, []

    def queued(self):
        if isinstance(self.batcher, LengthGroupingBatcher):
            return self.batcher._queued
        return self.batcher._queue.qsize()

    def send(self, name, length, wait_queued=True):
        before = self.queued()

        def call():
            try:
                self.replies[name] = self.batcher.run("tokens", request(name, length))
            except ServingError as e:
                self.replies[name] = e

        thread = threading.Thread(target=call)
        thread.start()
        self.threads.append(thread)
        deadline = time.monotonic() + 5
        while wait_queued and self.queued() <= before and time.monotonic() < deadline:
            time.sleep(0.001)

    def join(self):
        for thread in self.threads:
            thread.join(10)


def hold_worker(servable, client):
    """Occupies the one batch thread with request 99 until `servable.gate` is set."""
    servable.gate.clear()
    servable.running.clear()
    client.send(99, 5, wait_queued=False)
    assert servable.running.wait(5)


def grouping(servable, **kwargs):
    return LengthGroupingBatcher(servable, config(**kwargs), RequestLengths(16, 64))


def test_a_batch_holds_one_bucket_oldest_bucket_first():
    servable = FakeServable()
    batcher = grouping(servable)
    client = Client(batcher)
    hold_worker(servable, client)
    for name, length in ((1, 20), (2, 3), (3, 10), (4, 30), (5, 40)):  # buckets 32, 16, 16, 32, 48
        client.send(name, length)
    time.sleep(0.1)  # every head has waited its batch timeout
    servable.gate.set()
    client.join()
    batcher.stop()
    # Bucket 32's head is the oldest: its batch goes first; the lone 48 has no longer bucket to join.
    assert servable.batches == [([99], 5), ([1, 4], 30), ([2, 3], 10), ([5], 40)]
    for name, length in ((1, 20), (2, 3), (3, 10), (4, 30), (5, 40)):
        assert client.replies[name]["id_sum"].tolist() == [name + length - 1]  # the answer of the request alone
        assert client.replies[name]["id_sum"].shape == (1,)


def test_switch_off_batches_in_arrival_order():
    servable = FakeServable()
    batcher = make_batcher(servable, config(length_grouping=False))
    assert type(batcher) is Batcher
    client = Client(batcher)
    hold_worker(servable, client)
    for name, length in ((1, 20), (2, 3), (3, 10), (4, 30)):
        client.send(name, length)
    servable.gate.set()
    client.join()
    batcher.stop()
    assert servable.batches == [([99], 5), ([1, 2, 3, 4], 30)]
    assert [client.replies[n]["id_sum"].tolist() for n in (1, 2, 3, 4)] == [[20], [4], [12], [33]]


def test_a_lone_request_joins_the_next_longer_bucket_never_a_shorter_one():
    servable = FakeServable()
    batcher = grouping(servable)
    client = Client(batcher)
    hold_worker(servable, client)
    for name, length in ((1, 5), (2, 20), (3, 25), (4, 40), (5, 2)):  # buckets 16, 32, 32, 48, 16
        client.send(name, length)
    time.sleep(0.1)
    servable.gate.set()
    client.join()
    # 1 has company in its bucket (5): no joining; then bucket 32, then the lone 48 runs alone
    # rather than pad the shorter ones up.
    assert servable.batches == [([99], 5), ([1, 5], 5), ([2, 3], 25), ([4], 40)]
    servable.batches.clear()
    servable.gate.clear()
    hold_worker(servable, client)
    for name, length in ((11, 5), (12, 20), (13, 30), (14, 50)):  # buckets 16, 32, 32, 64
        client.send(name, length)
    time.sleep(0.1)
    servable.gate.set()
    client.join()
    batcher.stop()
    # The lone 16 takes the next longer bucket's (32) queued requests; the lone 64 runs alone.
    assert servable.batches == [([99], 5), ([11, 12, 13], 30), ([14], 50)]
    assert client.replies[11]["id_sum"].tolist() == [15]


def test_batch_timeout_and_lone_bound():
    servable = FakeServable()
    batcher = grouping(servable, batch_timeout_micros=200_000, max_batch_size=2)
    client = Client(batcher)
    start = time.monotonic()
    client.send(1, 5)
    client.join()
    lone = time.monotonic() - start
    assert 0.2 <= lone < 2.0  # waited for company for the timeout, then ran alone
    start = time.monotonic()
    client.send(2, 5)
    client.send(3, 7, wait_queued=False)  # fills the batch, which runs at once
    client.join()
    full = time.monotonic() - start
    batcher.stop()
    assert full < 0.2  # a full batch does not wait
    assert servable.batches == [([1], 5), ([2, 3], 7)]


def test_queue_bound_is_unavailable_and_stop_answers_the_queued():
    servable = FakeServable()
    batcher = grouping(servable, max_batch_size=2, max_enqueued_batches=1)
    client = Client(batcher)
    hold_worker(servable, client)
    client.send(1, 5)
    client.send(2, 40)
    client.send(3, 5, wait_queued=False)  # 2 queued = 1 batch of 2: full
    deadline = time.monotonic() + 5
    while 3 not in client.replies and time.monotonic() < deadline:
        time.sleep(0.001)
    assert isinstance(client.replies[3], ServingError) and client.replies[3].code == UNAVAILABLE
    assert "queue" in client.replies[3].message
    stopping = threading.Thread(target=batcher.stop)
    stopping.start()
    while not batcher._stopped.is_set():
        time.sleep(0.001)
    servable.gate.set()  # the batch thread finishes request 99 and sees the stop
    stopping.join(10)
    client.join()
    assert all(isinstance(client.replies[n], ServingError) and client.replies[n].code == UNAVAILABLE for n in (1, 2))


def test_oldest_bucket_is_not_starved_by_full_batches():
    servable = FakeServable()
    batcher = grouping(servable, max_batch_size=2, batch_timeout_micros=30_000)
    client = Client(batcher)
    hold_worker(servable, client)
    client.send(1, 40)  # lone, bucket 48
    for name in range(2, 10):
        client.send(name, 5)  # four full batches of bucket 16
    time.sleep(0.06)
    servable.gate.set()
    client.join()
    batcher.stop()
    # Its head timed out before the full batches were taken: it goes first.
    assert servable.batches[1] == ([1], 40)


def test_a_slow_batch_does_not_hold_another_bucket_past_its_timeout():
    servable = FakeServable()
    servable.slow_above = 32
    batcher = grouping(servable, num_batch_threads=2, batch_timeout_micros=20_000)
    client = Client(batcher)
    client.send(1, 40)
    start = time.monotonic()
    client.send(2, 5)
    client.threads[1].join(10)
    short = time.monotonic() - start
    client.join()
    batcher.stop()
    assert short < 0.4  # the other thread ran it at its timeout, while the long batch ran
    assert sorted(servable.batches) == [([1], 40), ([2], 5)]


# --- batching_parameters.txt ---------------------------------------------------------------------


def _tf_serving_batching_parameters():
    """TF Serving 2.20's `BatchingParameters` message (session_bundle_config.proto; its Python
    module is not in tensorflow-serving-api), built from the same field list."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    file = descriptor_pb2.FileDescriptorProto(
        name="session_bundle_config.proto", package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = file.message_type.add(name="BatchingParameters")
    F = descriptor_pb2.FieldDescriptorProto
    fields = [("max_batch_size", 1, ".google.protobuf.Int64Value"), ("batch_timeout_micros", 2, ".google.protobuf.Int64Value"),
              ("max_enqueued_batches", 3, ".google.protobuf.Int64Value"), ("num_batch_threads", 4, ".google.protobuf.Int64Value"),
              ("thread_pool_name", 5, ".google.protobuf.StringValue"), ("enable_large_batch_splitting", 8, ".google.protobuf.BoolValue"),
              ("max_execution_batch_size", 9, ".google.protobuf.Int64Value")]
    for name, number, type_name in fields:
        message.field.add(name=name, number=number, type=F.TYPE_MESSAGE, type_name=type_name, label=F.LABEL_OPTIONAL)
    message.field.add(name="allowed_batch_sizes", number=6, type=F.TYPE_INT64, label=F.LABEL_REPEATED)
    message.field.add(name="pad_variable_length_inputs", number=7, type=F.TYPE_BOOL, label=F.LABEL_OPTIONAL)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))


def test_batching_parameters_round_trip_and_stay_valid_for_tf_serving(tmp_path):
    from google.protobuf import text_format

    path = tmp_path / "batching_parameters.txt"
    parameters = _tf_serving_batching_parameters()
    for batching in (serving_config.BatchingConfig(), serving_config.BatchingConfig(length_grouping=False, max_batch_size=8)):
        text = batching.to_text_proto()
        path.write_text(text)
        assert serving_config.read_batching_parameters(str(path)) == batching
        parsed = text_format.Parse(text, parameters())  # TF Serving's parser: an unknown field fails
        assert parsed.max_batch_size.value == batching.max_batch_size
        assert parsed.pad_variable_length_inputs is True
        assert f"# albert_tf length_grouping: {str(batching.length_grouping).lower()}" in text
    with pytest.raises(text_format.ParseError):
        text_format.Parse("length_grouping: false\n", parameters())  # why the switch is a comment
    path.write_text("max_batch_size { value: 4 }\n")  # files written before the switch: on
    assert serving_config.read_batching_parameters(str(path)).length_grouping is True
    path.write_text("# albert_tf length_grouping: off\n")
    with pytest.raises(ValueError, match="length_grouping must be true or false"):
        serving_config.read_batching_parameters(str(path))
    path.write_text("# albert_tf length_groupin: false\n")
    with pytest.raises(ValueError, match="unknown albert_tf setting 'length_groupin'"):
        serving_config.read_batching_parameters(str(path))
    path.write_text("length_grouping { value: false }\n")
    with pytest.raises(ValueError, match="write it as the comment `# albert_tf length_grouping: false`"):
        serving_config.read_batching_parameters(str(path))
    path.write_text("# any other comment: false\n")
    assert serving_config.read_batching_parameters(str(path)) == serving_config.BatchingConfig()


def test_export_cli_passes_the_switch(monkeypatch, capsys):
    import argparse

    from albert_tf.cli import export as export_cli
    from albert_tf.export import saved_model

    seen = []

    def fake_export(*args, batching=None, **kwargs):
        seen.append(batching)
        raise saved_model.ExportError("stop here")

    monkeypatch.setattr(saved_model, "export_saved_model", fake_export)
    monkeypatch.setattr(export_cli, "_from_init", lambda args: (None, None, {}, []))
    parser = argparse.ArgumentParser()
    export_cli.add_arguments(parser)
    for flags, grouping in (([], True), (["--no-length-grouping"], False)):
        args = parser.parse_args(["--export-base", "x", "--model-name", "m", "--init", "x", *flags])
        with pytest.raises(Exception, match="stop here"):
            export_cli.run(args)
        assert seen[-1].length_grouping is grouping


# --- a real export over REST -----------------------------------------------------------------------

SEQ = 64
WORDS = helpers.WORDS


@pytest.fixture(scope="module")
def export(tmp_path_factory, tiny_spm_model):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForClassification
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ))
    model = AlbertForClassification(encoder, num_labels=2)
    model({k: np.zeros((1, SEQ), "int32") for k in TOKEN_INPUTS})
    spm = tiny_spm_model
    base = tmp_path_factory.mktemp("length_batching") / "base"
    batching = serving_config.BatchingConfig(max_batch_size=8, batch_timeout_micros=20_000, num_batch_threads=2)
    layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=SEQ)
    result = export_saved_model(model, layer, str(base), "cls", labels=helpers.LABELS, batching=batching, check=False)
    return base, result.path, layer


def _concurrently(calls, timeout: float) -> None:
    """Starts every call on its own thread at once, then waits for all (`timeout` each)."""
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def _texts():
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=n)) for n in (1, 20, 2, 9, 1, 16, 4, 28, 1, 12, 3, 22)]


@pytest.mark.slow
def test_piece_count_is_the_graphs_packed_length(export):
    import tensorflow as tf

    _, path, layer = export
    lengths = RequestLengths.of_version(path)
    assert (lengths.length_bucket, lengths.sequence_length) == (16, SEQ)
    from albert_tf.model_server.servable import SessionServable

    servable = SessionServable(path)
    try:
        definition = servable.signature("serving_default")
        texts = _texts()
        packed = layer(tf.constant(texts))["input_mask"].numpy().sum(axis=1)
        for text, want in zip(texts, packed):
            assert lengths.length(definition, {"text": np.array([text.encode()], object)}) == want
        assert len({-(-int(n) // 16) for n in packed}) >= 3  # the texts span several buckets
        assert lengths.bucket(definition, {"text": np.array([t.encode() for t in texts[:3]], object)}) == min(
            SEQ, -(-int(max(packed[:3])) // 16) * 16)
        assert lengths.length(servable.signature("classify"), {"inputs": np.array([b""], object)}) is None
        assert type(make_batcher(servable, serving_config.BatchingConfig())) is LengthGroupingBatcher
        assert type(make_batcher(servable, serving_config.BatchingConfig(length_grouping=False))) is Batcher
    finally:
        servable.close()


@pytest.mark.slow
def test_concurrent_mixed_lengths_answer_as_alone_over_rest(export):
    from albert_tf.model_server.servable import SessionServable
    from albert_tf.model_server.server import LocalModelServer

    base, path, _ = export
    texts = _texts()
    alone = SessionServable(path)
    want = [alone.run("serving_default", {"text": np.array([t.encode()], object)})["probabilities"][0] for t in texts]
    alone.close()
    server = LocalModelServer(str(base), poll_interval_s=0, rest_port=0, grpc_port=0).start()
    try:
        _, state = server.manager.resolve("cls")
        assert isinstance(state.batcher, LengthGroupingBatcher)
        definition = state.servable.signature("serving_default")
        batches, original = [], state.servable.run
        state.servable.run = lambda sig, inputs, *a: batches.append(list(inputs["text"])) or original(sig, inputs, *a)
        got = [None] * len(texts)

        def send(i):
            body = json.dumps({"instances": [texts[i]]}).encode()
            url = f"http://127.0.0.1:{server.rest_port}/v1/models/cls:predict"
            with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=30) as response:
                got[i] = json.loads(response.read())["predictions"][0]["probabilities"]

        _concurrently([lambda i=i: send(i) for i in range(len(texts))], timeout=30)
    finally:
        server.stop()
    for i, probabilities in enumerate(got):
        np.testing.assert_allclose(probabilities, want[i], rtol=1e-5, atol=1e-6)
    lengths = RequestLengths.of_version(path)
    bucket_of = {t.encode(): lengths.bucket(definition, {"text": np.array([t.encode()], object)}) for t in texts}
    assert sorted(t for b in batches for t in b) == sorted(bucket_of)
    for batch in batches:  # one bucket, or a lone request with the next longer bucket
        buckets = sorted(bucket_of[t] for t in batch)
        assert len(set(buckets)) == 1 or (buckets.count(buckets[0]) == 1 and set(buckets[1:]) == {buckets[1]}), buckets


# --- batch scoring: predict and bulk inference -----------------------------------------------------

PREDICT_TEXTS = ["the film was good fun and a long film was good", "bad", "a dull and long film", "good fun",
                 "the film", "dull dull dull film that was long and dull and bad", "fun", "a good and fun film"]


@pytest.fixture(scope="module")
def text_classifier(tiny_encoder, tiny_spm_model):
    from albert_tf.tasks.classification.text_model import AlbertTextClassifier
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=32)
    return AlbertTextClassifier(tiny_encoder, layer, num_classes=2, compile=False)


@pytest.mark.slow
def test_predict_and_bulk_score_by_piece_count_in_input_order(text_classifier, monkeypatch):
    import tensorflow as tf

    from albert_tf.inference import bulk

    model = text_classifier
    order = model.length_order(tf.constant(PREDICT_TEXTS))
    lengths = model.preprocessor.tokenize(tf.constant(PREDICT_TEXTS)).row_lengths().numpy()
    assert sorted(order.tolist()) == list(range(len(PREDICT_TEXTS))) and list(lengths[order]) == sorted(lengths)
    assert order.tolist() != list(range(len(PREDICT_TEXTS)))  # the input is not already in that order
    # A dataset is scored in its own order: the answers of the old, input-order batching.
    alone = model.predict(tf.data.Dataset.from_tensor_slices(PREDICT_TEXTS), batch_size=2, verbose=0)
    seen = []
    original = model.make_dataset
    monkeypatch.setattr(model, "make_dataset", lambda x, **k: seen.append(x) or original(x, **k))
    grouped = model.predict(PREDICT_TEXTS, batch_size=2, verbose=0)
    np.testing.assert_allclose(grouped, alone, rtol=1e-5, atol=1e-6)  # input order, answers of each alone
    assert [t.decode() for t in seen[-1].numpy()] == [PREDICT_TEXTS[i] for i in order]  # scored by piece count
    np.testing.assert_allclose(bulk.score_texts(model, PREDICT_TEXTS, 3), alone, rtol=1e-5, atol=1e-6)
    pairs = model.length_order((tf.constant(PREDICT_TEXTS), tf.constant(PREDICT_TEXTS[::-1])))
    both = lengths + lengths[::-1]
    assert list(both[pairs]) == sorted(both)


def test_serve_cli_switch_overrides_the_file(tmp_path, monkeypatch):
    import argparse

    from albert_tf.cli import CommandError
    from albert_tf.cli import serve as serve_cli
    from albert_tf.model_server import server as server_module

    started = []

    class FakeServer:
        def __init__(self, **kwargs):
            self.manager = type("Manager", (), {"batching": serving_config.BatchingConfig(),
                                                "tensorflow_version_dirs": lambda self: []})()

        def start(self):
            started.append(self.manager.batching)
            raise OSError("stop here")

    monkeypatch.setattr(server_module, "LocalModelServer", FakeServer)
    parser = argparse.ArgumentParser()
    serve_cli.add_arguments(parser)
    for flags, grouping in (([], True), (["--no-length-grouping"], False)):
        with pytest.raises(CommandError, match="stop here"):
            serve_cli.run(parser.parse_args(["--export-base", str(tmp_path), *flags]))
        assert started[-1].length_grouping is grouping


# --- gRPC handler threads: a batch can fill up, and beyond them a request is refused --------------


def test_default_grpc_max_threads_holds_what_the_batcher_holds():
    from albert_tf.model_server.server import MAX_DEFAULT_GRPC_THREADS, MIN_GRPC_THREADS, default_grpc_max_threads

    assert default_grpc_max_threads(None, cpus=2) == MIN_GRPC_THREADS == 16
    assert default_grpc_max_threads(None, cpus=16) == 64  # TF Serving's 4 per CPU
    # The export default (100 queued batches of 32, 4 batch threads): 3,328 requests.
    assert default_grpc_max_threads(serving_config.BatchingConfig(), cpus=2) == (100 + 4) * 32
    small = serving_config.BatchingConfig(max_batch_size=2, max_enqueued_batches=1, num_batch_threads=1)
    assert default_grpc_max_threads(small, cpus=2) == 16
    huge = serving_config.BatchingConfig(max_batch_size=512, max_enqueued_batches=1000)
    assert default_grpc_max_threads(huge, cpus=2) == MAX_DEFAULT_GRPC_THREADS


def _grpc_server(base, batching, **kwargs):
    from albert_tf.model_server.server import LocalModelServer

    return LocalModelServer(str(base), poll_interval_s=0, rest_port=None, grpc_port=0, batching=batching, **kwargs).start()


@pytest.mark.slow
def test_a_batch_holds_more_concurrent_grpc_requests_than_16(export):
    """24 concurrent single-text gRPC requests make one batch of 24 (a fixed pool of 16 handler
    threads held at most 16 of them: the 17th waited for a handler, not in the batch)."""
    from albert_tf.model_server import client

    base, _, _ = export
    batching = serving_config.BatchingConfig(max_batch_size=32, batch_timeout_micros=2_000_000, num_batch_threads=1,
                                             length_grouping=False)
    server = _grpc_server(base, batching)
    try:
        assert server.grpc_max_threads >= 24
        _, state = server.manager.resolve("cls")
        sizes, original = [], state.servable.run
        state.servable.run = lambda sig, inputs, *a: sizes.append(len(inputs["text"])) or original(sig, inputs, *a)
        errors = []

        def send():
            try:
                client.predict_text(f"127.0.0.1:{server.grpc_port}", "cls", ["a good film"], timeout=60)
            except Exception as e:  # noqa: BLE001 - asserted below
                errors.append(e)

        _concurrently([send] * 24, timeout=60)
    finally:
        server.stop()
    assert not errors
    assert sizes == [24]


@pytest.mark.slow
def test_requests_beyond_the_grpc_threads_are_resource_exhausted(export):
    from albert_tf.model_server import client

    base, _, _ = export
    batching = serving_config.BatchingConfig(max_batch_size=8, batch_timeout_micros=3_000_000, num_batch_threads=1,
                                             length_grouping=False)
    server = _grpc_server(base, batching, grpc_max_threads=2)
    address = f"127.0.0.1:{server.grpc_port}"
    try:
        waiting = [threading.Thread(target=client.predict_text, args=(address, "cls", ["a good film"]),
                                    kwargs={"timeout": 60}) for _ in range(2)]
        for thread in waiting:
            thread.start()
        time.sleep(1.0)  # both handlers now wait in the batch (3 s timeout)
        began = time.monotonic()
        with pytest.raises(client.ServingClientError) as refused:
            client.predict_text(address, "cls", ["a third"], timeout=60)
        assert refused.value.code == "RESOURCE_EXHAUSTED"
        assert time.monotonic() - began < 1.5  # refused at once, not queued behind the batch
        for thread in waiting:
            thread.join(60)
        assert client.predict_text(address, "cls", ["served again"], timeout=60)["label"].shape == (1,)
    finally:
        server.stop()
    with pytest.raises(ValueError, match="grpc_max_threads"):
        _grpc_server(base, batching, grpc_max_threads=0)
