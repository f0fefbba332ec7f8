"""StatisticsGen's computation: a split's tf.Examples -> a TFDV `DatasetFeatureStatistics`, with Beam.

Every bytes feature gets TFDV's string statistics (presence, values, average length, unique).
Beyond that, by role:

* text features (`text`, `text_b`): empty values, texts that are not valid UTF-8 (or hold U+FFFD),
  control characters, the unknown-piece rate under the run's tokenizer and the top pieces, in
  custom statistics and in TFDV's `nl_statistics` (`NaturalLanguageStatistics`); and three derived
  features, as TFDV's derived-feature statistics (`validation_derived_source`), so that drift and
  bounds are measured the same way as for any feature:
  `<name>_char_length` and `<name>_piece_length` (INT: histograms and quantiles), and
  `<name>_script` (the Unicode script most of the text's letters are in: Latin, Han, ...);
* categorical features (`label`): every value's count (`top_values`, `rank_histogram`).

With `StatsOptions.max_seq_length`, the first text feature also gets `too_long_count` and
`too_long_fraction`: the examples whose pieces (the text's, and for a pair both texts', with
`[CLS]` and the `[SEP]`s) do not fit in `max_seq_length`, which the Transform truncates.

ExampleGen's bad rows (rows it could not use, not among the records) are added by
`account_bad_rows`, TFDV-style: each is an example (`num_examples`) in which the feature it lacks
is missing (`num_missing`, so the presence fraction counts it) and the others present, and the
feature carries `bad_rows:<reason>` (count) and `bad_rows:<reason>:first` (`file:line`) custom
statistics (an unparsable row lacks every feature and is recorded on the first text feature).

On Beam each bundle folds its records into one accumulator (`SplitAccumulator`), which
`CombineGlobally` merges: memory is the per-length and per-piece counts, not the data. The same
accumulator also runs without Beam (`statistics_from_records`) for small inputs and tests.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import math
import os
import re
import unicodedata
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from tensorflow_metadata.proto.v0 import statistics_pb2

from albert_tf.data_validation.records import bytes_features

STATS_FILE = "FeatureStats.pb"
STATS_TEXT_FILE = "FeatureStats.pbtxt"
CHAR_LENGTH, PIECE_LENGTH, SCRIPT = "char_length", "piece_length", "script"
DERIVER = "albert_tf.data_validation"
NL_STATISTICS = "nl_statistics"
# Characters of Unicode category Cc other than tab, newline and carriage return.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ASCII_LETTER = re.compile("[A-Za-z]")
_NON_ASCII = re.compile("[^\x00-\x7f]")
_SCRIPT_NAMES = {"CJK": "Han", "HANGUL": "Hangul", "HIRAGANA": "Hiragana", "KATAKANA": "Katakana"}


@dataclasses.dataclass(frozen=True)
class StatsOptions:
    """Which features play which role, and the histograms' sizes (TFDV's defaults: 10 and 10)."""

    text_features: Sequence[str] = ("text", "text_b")
    categorical_features: Sequence[str] = ("label",)
    num_histogram_buckets: int = 10
    num_quantiles_histogram_buckets: int = 10
    top_k: int = 20
    max_categorical_values: int = 1000
    max_seq_length: Optional[int] = None  # counts the examples longer than this many pieces


def derived_name(feature: str, kind: str) -> str:
    return f"{feature}_{kind}"


@functools.lru_cache(maxsize=1 << 16)
def _char_script(ch: str) -> str:
    first = unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]
    return _SCRIPT_NAMES.get(first, first.title())


def dominant_script(text: str) -> str:
    """The script most of the letters of `text` are in ("Latin", "Han", ...), "Common" without letters."""
    letters = [ch for ch in _NON_ASCII.findall(text) if ch.isalpha()]
    if not letters:
        # The common case (English): no need to count the ASCII letters, only to see one.
        return "Latin" if _ASCII_LETTER.search(text) else "Common"
    counts = collections.Counter(map(_char_script, letters))
    ascii_letters = len(_ASCII_LETTER.findall(text))
    if ascii_letters:
        counts["Latin"] += ascii_letters
    return max(sorted(counts), key=counts.__getitem__)


class FeatureAccumulator:
    """The mergeable counts of one feature in one split."""

    def __init__(self, role: str):
        self.role = role
        self.present = 0
        self.values = 0
        self.min_values: Optional[int] = None
        self.max_values = 0
        self.total_chars = 0
        self.invalid = 0
        self.hashes = set()
        self.counts = collections.Counter()  # categorical values
        self.empty = 0
        self.control_chars = 0
        self.control_texts = 0
        self.char_lengths = collections.Counter()
        self.piece_lengths = collections.Counter()
        self.pieces = 0
        self.unknown = 0
        self.piece_chars = 0
        self.tokens = collections.Counter()
        self.scripts = collections.Counter()
        self.too_long: Optional[int] = None  # counted on the first text feature with max_seq_length

    def add(self, values: List[bytes], tokenizer, unknown_piece: Optional[str], max_categorical: int) -> int:
        """Counts one example's values; returns the pieces of its text (0 for other roles)."""
        self.present += 1
        num_pieces = 0
        self.values += len(values)
        self.min_values = len(values) if self.min_values is None else min(self.min_values, len(values))
        self.max_values = max(self.max_values, len(values))
        for raw in values:
            try:
                text = raw.decode("utf-8")
                bad = "\ufffd" in text
            except UnicodeDecodeError:
                text, bad = raw.decode("utf-8", errors="replace"), True
            self.invalid += bad
            self.total_chars += len(text)
            if self.role == "categorical":
                if text in self.counts or len(self.counts) < max_categorical:
                    self.counts[text] += 1
                continue
            self.hashes.add(hashlib.blake2b(raw, digest_size=8).digest())
            if self.role != "text":
                continue
            self.empty += not text.strip()
            controls = len(_CONTROL.findall(text))
            self.control_chars += controls
            self.control_texts += controls > 0
            self.char_lengths[len(text)] += 1
            pieces = tokenizer.tokenize(text) if tokenizer is not None else text.split()
            num_pieces += len(pieces)
            self.piece_lengths[len(pieces)] += 1
            self.pieces += len(pieces)
            self.piece_chars += sum(map(len, pieces))
            if unknown_piece is not None:
                self.unknown += pieces.count(unknown_piece)
            self.tokens.update(pieces)
            if text.strip():  # an empty text has no script; presence counts it
                self.scripts[dominant_script(text)] += 1
        return num_pieces

    def merge(self, other: "FeatureAccumulator") -> None:
        for name in ("present", "values", "max_values", "total_chars", "invalid", "empty", "control_chars",
                     "control_texts", "pieces", "unknown", "piece_chars"):
            value = getattr(other, name)
            setattr(self, name, max(getattr(self, name), value) if name == "max_values" else getattr(self, name) + value)
        if other.min_values is not None:
            self.min_values = other.min_values if self.min_values is None else min(self.min_values, other.min_values)
        self.hashes |= other.hashes
        for name in ("counts", "char_lengths", "piece_lengths", "tokens", "scripts"):
            getattr(self, name).update(getattr(other, name))
        if other.too_long is not None:
            self.too_long = (self.too_long or 0) + other.too_long


class SplitAccumulator:
    """The mergeable counts of one split: examples, and one `FeatureAccumulator` per feature."""

    def __init__(self):
        self.num_examples = 0
        self.features: Dict[str, FeatureAccumulator] = {}

    def add_record(self, record: bytes, options: StatsOptions, tokenizer=None) -> None:
        self.num_examples += 1
        unknown = getattr(tokenizer, "unk_token", None)
        pieces = {}
        for name, values in bytes_features(record).items():
            acc = self.features.get(name)
            if acc is None:
                role = ("text" if name in options.text_features
                        else "categorical" if name in options.categorical_features else "string")
                acc = self.features[name] = FeatureAccumulator(role)
            counted = acc.add(values, tokenizer, unknown, options.max_categorical_values)
            if acc.role == "text":
                pieces[name] = counted
        if options.max_seq_length and pieces:
            texts = [pieces[n] for n in options.text_features if n in pieces]
            # As the packing does: [CLS] a [SEP], and b [SEP] when b has pieces.
            needed = 2 + texts[0] + sum(n + 1 for n in texts[1:] if n)
            first = self.features[next(n for n in options.text_features if n in pieces)]
            first.too_long = (first.too_long or 0) + (needed > options.max_seq_length)

    def merge(self, other: "SplitAccumulator") -> "SplitAccumulator":
        self.num_examples += other.num_examples
        for name, acc in other.features.items():
            if name in self.features:
                self.features[name].merge(acc)
            else:
                self.features[name] = acc
        return self


def _path(name: str):
    from tensorflow_metadata.proto.v0 import path_pb2

    return path_pb2.Path(step=[name])


def _quantile(sorted_items: List[tuple], total: int, q: float) -> float:
    """The `q` quantile of a histogram given as sorted (value, count) pairs."""
    rank, seen = q * (total - 1), 0
    for value, count in sorted_items:
        seen += count
        if seen > rank:
            return float(value)
    return float(sorted_items[-1][0])


def numeric_histograms(counts: collections.Counter, num_buckets: int, num_quantiles: int):
    """TFDV's STANDARD (equal-width over [min, max]) and QUANTILES histograms of integer counts."""
    items = sorted(counts.items())
    total = sum(counts.values())
    standard = statistics_pb2.Histogram(type=statistics_pb2.Histogram.STANDARD)
    quantiles = statistics_pb2.Histogram(type=statistics_pb2.Histogram.QUANTILES)
    if not total:
        return standard, quantiles
    low, high = float(items[0][0]), float(items[-1][0])
    if high == low:
        standard.buckets.add(low_value=low, high_value=high, sample_count=float(total))
    else:
        width = (high - low) / num_buckets
        sums = [0.0] * num_buckets
        for value, count in items:
            sums[min(int((value - low) / width), num_buckets - 1)] += count
        for i, count in enumerate(sums):
            standard.buckets.add(low_value=low + i * width, high_value=low + (i + 1) * width if i < num_buckets - 1 else high,
                                 sample_count=count)
    edges = [_quantile(items, total, i / num_quantiles) for i in range(num_quantiles + 1)]
    for i in range(num_quantiles):
        quantiles.buckets.add(low_value=edges[i], high_value=edges[i + 1], sample_count=total / num_quantiles)
    return standard, quantiles


def _common(num_examples: int, present: int, values: int, min_values: Optional[int], max_values: int):
    return statistics_pb2.CommonStatistics(
        num_non_missing=present, num_missing=num_examples - present, min_num_values=min_values or 0,
        max_num_values=max_values, avg_num_values=values / present if present else 0.0, tot_num_values=values,
    )


def _rank_histogram(counter: collections.Counter, k: Optional[int] = None):
    histogram = statistics_pb2.RankHistogram()
    for rank, (label, count) in enumerate(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:k]):
        histogram.buckets.add(low_rank=rank, high_rank=rank, label=label, sample_count=float(count))
    return histogram


def _custom(feature, name: str, value) -> None:
    custom = feature.custom_stats.add(name=name)
    if isinstance(value, statistics_pb2.RankHistogram):
        custom.rank_histogram.CopyFrom(value)
    elif isinstance(value, statistics_pb2.Histogram):
        custom.histogram.CopyFrom(value)
    else:
        custom.num = float(value)


def _numeric_feature(dataset, name: str, source: str, counts: collections.Counter, num_examples: int, options: StatsOptions):
    feature = dataset.features.add(path=_path(name), type=statistics_pb2.FeatureNameStatistics.INT)
    feature.validation_derived_source.deriver_name = f"{DERIVER}.{name[len(source) + 1:]}"
    feature.validation_derived_source.source_path.add().CopyFrom(_path(source))
    total = sum(counts.values())
    stats = feature.num_stats
    stats.common_stats.CopyFrom(_common(num_examples, total, total, 1 if total else 0, 1 if total else 0))
    if total:
        mean = sum(v * c for v, c in counts.items()) / total
        stats.mean = mean
        stats.std_dev = math.sqrt(max(0.0, sum(c * (v - mean) ** 2 for v, c in counts.items()) / total))
        stats.num_zeros = counts.get(0, 0)
        stats.min, stats.max = float(min(counts)), float(max(counts))
        stats.median = _quantile(sorted(counts.items()), total, 0.5)
    for histogram in numeric_histograms(counts, options.num_histogram_buckets, options.num_quantiles_histogram_buckets):
        stats.histograms.add().CopyFrom(histogram)
    return feature


def _categorical_values(feature, counter: collections.Counter, num_examples: int, present: int, values: int,
                        min_values, max_values, total_chars: int, top_k: Optional[int]):
    stats = feature.string_stats
    stats.common_stats.CopyFrom(_common(num_examples, present, values, min_values, max_values))
    stats.unique = len(counter)
    stats.avg_length = total_chars / values if values else 0.0
    ranked = _rank_histogram(counter, top_k)
    stats.rank_histogram.CopyFrom(ranked)
    for bucket in ranked.buckets:
        stats.top_values.add(value=bucket.label, frequency=bucket.sample_count)


def to_proto(name: str, acc: SplitAccumulator, options: StatsOptions = StatsOptions()):
    """The `DatasetFeatureStatistics` of an accumulated split, named `name` (TFDV names them by split)."""
    dataset = statistics_pb2.DatasetFeatureStatistics(name=name, num_examples=acc.num_examples)
    for feature_name in sorted(acc.features):
        f = acc.features[feature_name]
        feature = dataset.features.add(path=_path(feature_name), type=statistics_pb2.FeatureNameStatistics.STRING)
        if f.role == "categorical":
            _categorical_values(feature, f.counts, acc.num_examples, f.present, f.values, f.min_values, f.max_values,
                                f.total_chars, None)
            continue
        stats = feature.string_stats
        stats.common_stats.CopyFrom(_common(acc.num_examples, f.present, f.values, f.min_values, f.max_values))
        stats.unique = len(f.hashes)
        stats.avg_length = f.total_chars / f.values if f.values else 0.0
        stats.invalid_utf8_count = f.invalid
        _custom(feature, "invalid_text_count", f.invalid)
        if f.role != "text":
            continue
        nl = statistics_pb2.NaturalLanguageStatistics(
            feature_coverage=1.0 - f.unknown / f.pieces if f.pieces else 0.0,
            avg_token_length=f.piece_chars / f.pieces if f.pieces else 0.0,
            min_sequence_length=min(f.piece_lengths) if f.piece_lengths else 0,
            max_sequence_length=max(f.piece_lengths) if f.piece_lengths else 0,
        )
        nl.sequence_length_histogram.CopyFrom(numeric_histograms(
            f.piece_lengths, options.num_histogram_buckets, options.num_quantiles_histogram_buckets)[1])
        nl.rank_histogram.CopyFrom(_rank_histogram(f.tokens, options.top_k))
        feature.custom_stats.add(name=NL_STATISTICS).any.Pack(nl)
        for custom_name, value in (("empty_count", f.empty), ("control_char_count", f.control_chars),
                                   ("control_char_texts", f.control_texts), ("piece_count", f.pieces),
                                   ("unknown_piece_count", f.unknown),
                                   ("unknown_piece_rate", f.unknown / f.pieces if f.pieces else 0.0),
                                   ("top_pieces", _rank_histogram(f.tokens, options.top_k))):
            _custom(feature, custom_name, value)
        if f.too_long is not None:
            _custom(feature, "max_seq_length", options.max_seq_length)
            _custom(feature, "too_long_count", f.too_long)
            _custom(feature, "too_long_fraction", f.too_long / f.present if f.present else 0.0)
        for kind, counts in ((CHAR_LENGTH, f.char_lengths), (PIECE_LENGTH, f.piece_lengths)):
            _numeric_feature(dataset, derived_name(feature_name, kind), feature_name, counts, acc.num_examples, options)
        script = dataset.features.add(path=_path(derived_name(feature_name, SCRIPT)), type=statistics_pb2.FeatureNameStatistics.STRING)
        script.validation_derived_source.deriver_name = f"{DERIVER}.{SCRIPT}"
        script.validation_derived_source.source_path.add().CopyFrom(_path(feature_name))
        total = sum(f.scripts.values())
        _categorical_values(script, f.scripts, acc.num_examples, total, total, 1 if total else 0, 1 if total else 0,
                            sum(len(k) * v for k, v in f.scripts.items()), None)
    return dataset


def statistics_from_records(name: str, records: Iterable[bytes], options: StatsOptions = StatsOptions(), tokenizer=None,
                            bad_rows: Optional[Dict] = None):
    """The statistics of serialized tf.Examples, without Beam (small inputs, tests); `bad_rows`:
    as for `account_bad_rows`."""
    acc = SplitAccumulator()
    for record in records:
        acc.add_record(record, options, tokenizer)
    return account_bad_rows(to_proto(name, acc, options), bad_rows, options)


BAD_ROWS = "bad_rows"


def account_bad_rows(dataset, bad_rows: Optional[Dict], options: StatsOptions = StatsOptions()):
    """Adds ExampleGen's bad rows of one split (its summary's `bad_rows[split]`: `{"bad": n,
    "reasons": [{"reason", "feature", "count", "first"}]}`) to `dataset`, in place; returns it.

    Each bad row becomes an example in which the feature it lacks (`feature`; None: every
    feature) is missing and the others present, so the presence fraction counts it; the feature
    gets `bad_rows:<reason>` (count) and `bad_rows:<reason>:first` (`file:line`) custom stats.
    """
    bad = int((bad_rows or {}).get("bad", 0))
    if not bad:
        return dataset
    reasons = bad_rows["reasons"]
    dataset.num_examples += bad
    names = [_feature_name(f) for f in dataset.features]
    holder = next((n for n in options.text_features if n in names), names[0] if names else None)
    for feature in dataset.features:
        name = _feature_name(feature)
        common = (feature.num_stats if feature.HasField("num_stats") else feature.string_stats).common_stats
        if not feature.HasField("validation_derived_source"):
            lacking = sum(int(r["count"]) for r in reasons if r["feature"] in (name, None))
            common.num_non_missing += bad - lacking
            common.tot_num_values += bad - lacking
        common.num_missing = dataset.num_examples - common.num_non_missing
        for r in reasons:
            if r["feature"] == name or (r["feature"] is None and name == holder):
                _custom(feature, f"{BAD_ROWS}:{r['reason']}", int(r["count"]))
                feature.custom_stats.add(name=f"{BAD_ROWS}:{r['reason']}:first", str=str(r["first"]))
    return dataset


def bad_row_counts(feature) -> List[tuple]:
    """(reason, count, first `file:line`) of the bad rows recorded on a feature's statistics."""
    first = {c.name: c.str for c in feature.custom_stats if c.name.startswith(BAD_ROWS + ":") and c.name.endswith(":first")}
    return [(c.name.split(":")[1], int(c.num), first.get(c.name + ":first", ""))
            for c in feature.custom_stats
            if c.name.startswith(BAD_ROWS + ":") and not c.name.endswith(":first")]


def _feature_name(feature) -> str:
    return feature.path.step[0] if feature.path.step else feature.name


# --- Beam --------------------------------------------------------------------------------------


def _beam():
    from albert_tf.data import beam_pipeline  # imports Beam with its log filter in place

    return beam_pipeline


def _accumulate_fn(tokenizer_factory, options):
    """A DoFn folding each bundle into one accumulator (defined here: Beam is imported only to run)."""
    import apache_beam as beam
    from apache_beam.transforms.window import GlobalWindows

    class AccumulateBundle(beam.DoFn):
        def setup(self):
            self._tokenizer = tokenizer_factory() if tokenizer_factory is not None else None

        def start_bundle(self):
            self._acc = SplitAccumulator()

        def process(self, record):
            self._acc.add_record(record, options, self._tokenizer)

        def finish_bundle(self):
            yield GlobalWindows.windowed_value(self._acc)

    return AccumulateBundle()


def _merge_fn():
    import apache_beam as beam

    class Merge(beam.CombineFn):
        def create_accumulator(self):
            return SplitAccumulator()

        def add_input(self, acc, element):
            return acc.merge(element)

        def merge_accumulators(self, accs):
            accs = iter(accs)
            first = next(accs)
            for acc in accs:
                first.merge(acc)
            return first

        def extract_output(self, acc):
            return acc

    return Merge()


def _write_split(acc: SplitAccumulator, name: str, directory: str, options: StatsOptions, bad_rows=None) -> str:
    from apache_beam.io.filesystems import FileSystems

    dataset = account_bad_rows(to_proto(name, acc, options), bad_rows, options)
    stats_list = statistics_pb2.DatasetFeatureStatisticsList(datasets=[dataset])
    if not FileSystems.exists(directory):
        FileSystems.mkdirs(directory)
    for file_name, data in ((STATS_FILE, stats_list.SerializeToString()), (STATS_TEXT_FILE, str(stats_list).encode("utf-8"))):
        with FileSystems.create(os.path.join(directory, file_name)) as f:
            f.write(data)
    return directory


def generate_statistics(
    splits: Dict[str, str],
    output_dirs: Dict[str, str],
    *,
    tokenizer_factory: Optional[Callable[[], object]] = None,
    options: StatsOptions = StatsOptions(),
    runner: str = "DirectRunner",
    pipeline_args: Sequence[str] = (),
    bad_rows: Optional[Dict[str, Dict]] = None,
    split_options: Optional[Dict[str, StatsOptions]] = None,
) -> None:
    """Writes `FeatureStats.pb` (+ `.pbtxt`) for every split, in one Beam pipeline.

    Args:
        splits: `{name: TFRecord file pattern}` of serialized tf.Examples.
        output_dirs: `{name: directory}` to write each split's statistics into (TFX's `Split-<name>`).
        tokenizer_factory: Builds the run's tokenizer (once per worker); None counts whitespace words.
        runner, pipeline_args: As for the pretraining-data step (`beam_pipeline.make_pretraining_data`).
        bad_rows: `{name: ExampleGen's bad_rows entry}` of splits with rows it could not use
            (`account_bad_rows`).
        split_options: `{name: StatsOptions}` for splits measured otherwise than `options`.
    """
    beam_pipeline = _beam()
    import apache_beam as beam

    pipeline = beam.Pipeline(runner=beam_pipeline.make_runner(runner),
                             options=beam_pipeline.PipelineOptions(list(pipeline_args)))
    for name, pattern in sorted(splits.items()):
        split = (split_options or {}).get(name, options)
        (pipeline
         | f"Read[{name}]" >> beam.io.ReadFromTFRecord(pattern)
         | f"Accumulate[{name}]" >> beam.ParDo(_accumulate_fn(tokenizer_factory, split))
         | f"Merge[{name}]" >> beam.CombineGlobally(_merge_fn())
         | f"Write[{name}]" >> beam.Map(_write_split, name, output_dirs[name], split, (bad_rows or {}).get(name)))
    pipeline.run().wait_until_finish()


def load_statistics(path: str):
    """A `DatasetFeatureStatisticsList` from `FeatureStats.pb` (binary) or a `.pbtxt`/a directory holding one."""
    from google.protobuf import text_format

    if os.path.isdir(path):
        path = os.path.join(path, STATS_FILE)
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".pbtxt"):
        text_format.Parse(data.decode("utf-8"), stats)
    else:
        stats.ParseFromString(data)
    return stats


def feature_stats(dataset, name: str):
    """The `FeatureNameStatistics` of `name` in a `DatasetFeatureStatistics`, or None."""
    for feature in dataset.features:
        if (feature.path.step and feature.path.step[0] == name and len(feature.path.step) == 1) or feature.name == name:
            return feature
    return None


def custom_stat(feature, name: str):
    for custom in feature.custom_stats:
        if custom.name == name:
            return custom
    return None
