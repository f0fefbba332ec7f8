"""Training a SentencePiece vocabulary from raw text with the original ALBERT recipe.

The released English ALBERT vocabulary (`30k-clean.model`) was trained with::

    spm_train --input all.txt --model_prefix=30k-clean --vocab_size=30000 --logtostderr
      --pad_id=0 --unk_id=1 --eos_id=-1 --bos_id=-1
      --control_symbols=[CLS],[SEP],[MASK]
      --user_defined_symbols="(,),\\",-,.,–,£,€"
      --shuffle_input_sentence=true --input_sentence_size=10000000
      --character_coverage=0.99995 --model_type=unigram

`train_sentencepiece` runs exactly that (every value overridable), on text that went through the
same `preprocess_text` the tokenizers apply, so the pieces are learned on what they will see. The
files are read as `albert-tf make-pretraining-data` reads them (`corpus_files.iter_corpus_lines`):
control characters cleaned out as BERT's `_clean_text` does, unreadable files fatal or skipped.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import re
import tempfile
import time
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from albert_tf.tokenization import corpus_files
from albert_tf.tokenization.text import preprocess_text

ORIGINAL_CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
ORIGINAL_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
MODEL_TYPES = ("unigram", "bpe", "char", "word")
DEFAULT_VOCAB_SIZE = 30000

# SentencePiece's own default: longer training sentences are skipped (with a log line).
DEFAULT_MAX_SENTENCE_LENGTH = 4192


@dataclasses.dataclass(frozen=True)
class SentencePieceVocab:
    """What `train_sentencepiece` wrote.

    Attributes:
      model_file: `<prefix>.model`, the serialized SentencePiece model.
      vocab_file: `<prefix>.vocab`, one `piece<TAB>score` line per id.
      vocab_size: number of pieces in the model (smaller than asked only with
        `hard_vocab_limit=False`).
      num_sentences: sentences read from the input (non-empty lines, cut to fit
        `max_sentence_length`).
      num_training_sentences: how many of them SentencePiece trained on (the sample).
      seconds: wall time of the whole training.
      cleaned_characters: control characters the text cleaning removed from the input.
      cleaned_files: the files it removed any from.
      skipped_files: `(file, problem)` of each unreadable file left out (`on_error="skip"`).
    """

    model_file: str
    vocab_file: str
    vocab_size: int
    num_sentences: int
    num_training_sentences: int
    seconds: float
    cleaned_characters: int = 0
    cleaned_files: Tuple[str, ...] = ()
    skipped_files: Tuple[Tuple[str, str], ...] = ()


def _split_long(text: str, max_bytes: int) -> Iterator[str]:
    """Cuts `text` at spaces into pieces of at most `max_bytes` UTF-8 bytes.

    A line longer than SentencePiece's `max_sentence_length` would be skipped entirely; corpora
    with one paragraph or even one document per line (such as the State of the Union addresses)
    would then train on nothing. A single word longer than the limit is cut between characters.
    """
    if len(text.encode("utf-8")) <= max_bytes:
        yield text
        return
    current: list = []
    size = 0
    for word in text.split(" "):
        word_bytes = len(word.encode("utf-8"))
        while word_bytes > max_bytes:
            if current:
                yield " ".join(current)
                current, size = [], 0
            cut = word.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
            yield cut
            word = word[len(cut):]
            word_bytes = len(word.encode("utf-8"))
        if current and size + 1 + word_bytes > max_bytes:
            yield " ".join(current)
            current, size = [], 0
        if word:
            size += word_bytes + (1 if current else 0)
            current.append(word)
    if current:
        yield " ".join(current)


def iter_training_sentences(
    input_files: Sequence[str],
    *,
    lower_case: bool = True,
    keep_accents: bool = False,
    normalize_quotes: bool = False,
    max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
    on_error: str = "raise",
    report: Optional[corpus_files.CorpusReport] = None,
) -> Iterator[str]:
    """Yields the cleaned, preprocessed, non-empty lines of `input_files`, split to fit SentencePiece.

    Args:
      input_files: UTF-8 text files, one sentence or paragraph per line.
      lower_case, keep_accents, normalize_quotes: the `preprocess_text` options.
      max_sentence_length: longest sentence in UTF-8 bytes; longer lines are cut at spaces.
      on_error, report: as `corpus_files.iter_corpus_lines`.

    Raises:
      ValueError: for a line that is not valid UTF-8 or holds binary data (naming file and line),
        unless `on_error="skip"`.
    """
    for _, _, line in corpus_files.iter_corpus_lines(input_files, on_error=on_error, report=report):
        text = preprocess_text(
            line, lower_case=lower_case, keep_accents=keep_accents, normalize_quotes=normalize_quotes
        )
        if text:
            yield from _split_long(text, max_sentence_length)


def train_sentencepiece(
    input_files: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
    output_prefix: Union[str, os.PathLike],
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    *,
    model_type: str = "unigram",
    lower_case: bool = True,
    keep_accents: bool = False,
    normalize_quotes: bool = False,
    input_sentence_size: int = 10_000_000,
    shuffle_input_sentence: bool = True,
    character_coverage: float = 0.99995,
    control_symbols: Sequence[str] = ORIGINAL_CONTROL_SYMBOLS,
    user_defined_symbols: Sequence[str] = ORIGINAL_USER_DEFINED_SYMBOLS,
    hard_vocab_limit: bool = True,
    max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
    num_threads: int = 16,
    seed: Optional[int] = None,
    verbose: bool = False,
    on_error: str = "raise",
) -> SentencePieceVocab:
    """Trains a SentencePiece model with the ALBERT recipe; writes `<prefix>.model` and `.vocab`.

    Ids 0-4 are `<pad>`, `<unk>`, `[CLS]`, `[SEP]`, `[MASK]`; then the user-defined symbols
    (always single pieces, even inside words); no BOS/EOS. Both files are written to a temporary
    directory first and renamed into place, so an interrupted run leaves no partial files.

    Args:
      input_files: text files (names or glob patterns), one sentence/paragraph per line, UTF-8.
      output_prefix: where to write; the directory is created if needed.
      vocab_size: number of pieces (30000 in the original).
      model_type: "unigram" (original), "bpe", "char" or "word".
      lower_case: lower-case the text (uncased models); must match the tokenizer's `lower_case`.
      keep_accents, normalize_quotes: the other `preprocess_text` options (off in the original).
      input_sentence_size: at most this many sentences are used, a uniform sample when
        `shuffle_input_sentence` (reservoir sampling, so a huge corpus is never held in memory
        beyond the sample). 0 means all.
      shuffle_input_sentence: sample randomly rather than taking the first sentences.
      character_coverage: share of characters the model covers; the rest map to `<unk>`.
      control_symbols: pieces with ids that never come out of tokenizing text.
      user_defined_symbols: pieces always split out of the text.
      hard_vocab_limit: when False, a corpus too small for `vocab_size` yields a smaller
        vocabulary instead of an error (unigram only).
      max_sentence_length: longest training sentence in UTF-8 bytes; longer lines are cut at
        spaces rather than dropped.
      num_threads: training threads (16, SentencePiece's default). The work is split per thread,
        so the scores (rarely the pieces) depend on this number, not on the machine.
      seed: seed of the sentence sample. The same corpus, options, seed and `num_threads` give
        the same vocabulary; None gives a different sample every run.
      verbose: let SentencePiece log its progress to stderr.
      on_error: an unreadable input file (invalid UTF-8, binary data): "raise" (default) fails
        naming file and line; "skip" leaves it out and lists it in the result's `skipped_files`.

    Returns:
      A `SentencePieceVocab` with the file names and figures.

    Raises:
      FileNotFoundError: an input name or pattern matches no file.
      ValueError: bad arguments, an empty corpus, invalid UTF-8 or binary data in the corpus
        (`on_error="raise"`), or a `vocab_size` the corpus cannot fill (with the largest size it
        can, and the `hard_vocab_limit` hint).
    """
    import sentencepiece as spm  # noqa: PLC0415 - keeps `import albert_tf.tokenization` light

    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    corpus_files.check_on_error(on_error)
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    if not isinstance(input_sentence_size, int) or input_sentence_size < 0:
        raise ValueError(f"input_sentence_size must be an int >= 0 (0: all sentences), got {input_sentence_size!r}")
    if not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
    if not 0.0 < character_coverage <= 1.0:
        raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}")
    num_reserved = 2 + len(control_symbols) + len(user_defined_symbols)
    if vocab_size <= num_reserved:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room for learned pieces after the "
            f"{num_reserved} reserved ones (<pad>, <unk>, control and user-defined symbols)"
        )

    for name, symbols in (("control_symbols", control_symbols), ("user_defined_symbols", user_defined_symbols)):
        # SentencePiece reads the list comma-separated: "" or "a,b" would silently shift every id.
        if any(not s or "," in s for s in symbols):
            raise ValueError(f"{name} must be non-empty strings without commas: {list(symbols)}")

    start = time.monotonic()
    files = corpus_files.expand_inputs(input_files)
    output_prefix = os.fspath(output_prefix)
    counter = {"read": 0, "used": 0}
    reader_errors: list = []
    report = corpus_files.CorpusReport()

    def read() -> Iterator[str]:
        for sentence in iter_training_sentences(
            files,
            lower_case=lower_case,
            keep_accents=keep_accents,
            normalize_quotes=normalize_quotes,
            max_sentence_length=max_sentence_length,
            on_error=on_error,
            report=report,
        ):
            counter["read"] += 1
            yield sentence

    def guarded(sentences: Iterable[str]) -> Iterator[str]:
        # An exception must not cross SentencePiece's C++ iterator loop: keep it, stop the
        # iteration, and raise it after training returns.
        try:
            for sentence in sentences:
                counter["used"] += 1
                yield sentence
        except Exception as e:  # noqa: BLE001 - re-raised below, unchanged
            reader_errors.append(e)

    if input_sentence_size and shuffle_input_sentence:
        # The sample is drawn here, not by SentencePiece: its sampler's seed is per thread and
        # process, so a seed would not make the vocabulary reproducible.
        training: Iterable[str] = _drain(_reservoir_sample(read(), input_sentence_size, random.Random(seed)))
    elif input_sentence_size:
        training = itertools.islice(read(), input_sentence_size)
    else:
        training = read()

    with tempfile.TemporaryDirectory(prefix="spm-train-") as tmp:
        tmp_prefix = os.path.join(tmp, "model")
        options = dict(
            sentence_iterator=guarded(training),
            model_prefix=tmp_prefix,
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(control_symbols),
            user_defined_symbols=list(user_defined_symbols),
            # Sampled above: SentencePiece trains on every sentence it is given.
            input_sentence_size=0,
            character_coverage=character_coverage,
            hard_vocab_limit=hard_vocab_limit,
            max_sentence_length=max_sentence_length,
            num_threads=num_threads,
            minloglevel=0 if verbose else 2,
        )
        for name in ("control_symbols", "user_defined_symbols"):
            if not options[name]:
                del options[name]
        try:
            spm.SentencePieceTrainer.train(**options)
        except RuntimeError as e:
            if reader_errors:
                raise reader_errors[0] from None
            if counter["used"] == 0:
                raise _no_text(files, report) from None
            raise _training_error(e, vocab_size, counter["used"], files) from None
        if reader_errors:
            raise reader_errors[0]
        if counter["used"] == 0:
            raise _no_text(files, report)
        model_bytes = corpus_files.read_bytes(tmp_prefix + ".model")
        vocab_bytes = corpus_files.read_bytes(tmp_prefix + ".vocab")
    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    # The vocabulary first: a reader that finds the `.model` finds its `.vocab` beside it.
    corpus_files.atomic_write_bytes(output_prefix + ".vocab", vocab_bytes)
    corpus_files.atomic_write_bytes(output_prefix + ".model", model_bytes)
    return SentencePieceVocab(
        model_file=output_prefix + ".model",
        vocab_file=output_prefix + ".vocab",
        vocab_size=processor.get_piece_size(),
        num_sentences=counter["read"],
        num_training_sentences=counter["used"],
        seconds=time.monotonic() - start,
        cleaned_characters=report.cleaned_characters,
        cleaned_files=tuple(report.cleaned_files),
        skipped_files=tuple(report.skipped_files),
    )


def _no_text(files, report: corpus_files.CorpusReport) -> ValueError:
    if report.skipped_files:
        return ValueError(f"no text to train on; {corpus_files.describe_skipped(report.skipped_files)}")
    return ValueError(f"no text to train on: every line of {files} is empty")


def _reservoir_sample(sentences: Iterable[str], size: int, rng: random.Random) -> List[str]:
    """A uniform random sample of at most `size` items in one pass (Algorithm R), shuffled."""
    sample: List[str] = []
    for i, sentence in enumerate(sentences):
        if i < size:
            sample.append(sentence)
        else:
            j = rng.randrange(i + 1)
            if j < size:
                sample[j] = sentence
    rng.shuffle(sample)
    return sample


def _drain(sample: List[str]) -> Iterator[str]:
    # Popping lets each sentence go once SentencePiece has copied it: the sample is not held twice.
    while sample:
        yield sample.pop()


def _training_error(error: RuntimeError, vocab_size: int, sentences: int, files) -> ValueError:
    message = str(error)
    if sentences == 0:
        return ValueError(f"no text to train on: every line of {files} is empty")
    too_high = re.search(r"Vocabulary size (?:is )?too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
    too_small = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", message)
    if too_small:
        return ValueError(
            f"vocab_size={vocab_size} is too small: the corpus's characters and the reserved pieces "
            f"alone need {too_small.group(2)}. Use a larger vocab_size or a lower character_coverage."
        )
    if too_high:
        return ValueError(
            f"vocab_size={vocab_size} is too large for this corpus ({sentences} sentences): "
            f"SentencePiece can make at most {too_high.group(2)} pieces from it. Use a smaller "
            "vocab_size, more text, or hard_vocab_limit=False to accept a smaller vocabulary."
        )
    return ValueError(f"SentencePiece training failed: {message}")
