"""tf.Example records read and written without TensorFlow, so ExampleGen, VocabGen and the
validation steps skip its import (seconds).

The message classes are built from `tensorflow/core/example/{feature,example}.proto`'s
definitions in a private descriptor pool (a pool of its own: TensorFlow's generated classes may be
loaded in the same process), and parse any record TensorFlow writes.
"""

from __future__ import annotations

import functools
from typing import Dict, List

_PACKAGE = "albert_tf.data_validation.example"


@functools.lru_cache(maxsize=None)
def example_class():
    """The `tf.train.Example` message class (same wire format as TensorFlow's)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="albert_tf_example.proto", package=_PACKAGE, syntax="proto3")

    def message(name, *fields, nested=()):
        m = proto.message_type.add(name=name)
        for number, field_name, kind, label, type_name, oneof in fields:
            f = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = type_name
            if oneof is not None:
                f.oneof_index = oneof
        for sub in nested:
            m.nested_type.add().CopyFrom(sub)
        return m

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    message("BytesList", (1, "value", F.TYPE_BYTES, rep, "", None))
    message("FloatList", (1, "value", F.TYPE_FLOAT, rep, "", None))
    message("Int64List", (1, "value", F.TYPE_INT64, rep, "", None))
    feature = message(
        "Feature",
        (1, "bytes_list", F.TYPE_MESSAGE, opt, f".{_PACKAGE}.BytesList", 0),
        (2, "float_list", F.TYPE_MESSAGE, opt, f".{_PACKAGE}.FloatList", 0),
        (3, "int64_list", F.TYPE_MESSAGE, opt, f".{_PACKAGE}.Int64List", 0),
    )
    feature.oneof_decl.add(name="kind")
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt, type_name=f".{_PACKAGE}.Feature")
    message("Features", (1, "feature", F.TYPE_MESSAGE, rep, f".{_PACKAGE}.Features.FeatureEntry", None), nested=[entry])
    message("Example", (1, "features", F.TYPE_MESSAGE, opt, f".{_PACKAGE}.Features", None))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Example"))


def bytes_features(record: bytes) -> Dict[str, List[bytes]]:
    """`{name: values}` of a serialized tf.Example's bytes features (other kinds are left out)."""
    example = example_class().FromString(record)
    return {
        name: list(feature.bytes_list.value)
        for name, feature in example.features.feature.items()
        if feature.WhichOneof("kind") == "bytes_list"
    }


def serialize_bytes_example(features: Dict[str, List[bytes]]) -> bytes:
    """A serialized tf.Example of bytes features (ExampleGen's records, request logs), the same
    bytes in every process."""
    example = example_class()()
    for name, values in features.items():
        example.features.feature[name].bytes_list.value.extend(values)
    # Map entries in key order: protobuf's own order can differ from one process to the next.
    return example.SerializeToString(deterministic=True)
