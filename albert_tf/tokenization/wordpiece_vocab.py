"""Building a BERT WordPiece `vocab.txt` from raw text, for the Chinese ALBERT models.

Words are counted with the original BERT basic tokenization (`text.bert_basic_tokenize`: CJK
ideographs one per word, lower-cased, accents stripped, punctuation split), the same split the
tokenizers apply, and the vocabulary is learned from the counts by tensorflow-text's WordPiece
learner (`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`, the
algorithm behind `bert_vocab_from_dataset`). Only the word split differs from calling
`bert_vocab_from_dataset` directly: its `BasicTokenizer` case-folds with NFKC (turning full-width
Chinese punctuation such as "，" into ",") where the original, and our tokenizers, do not. The files
are read as `albert-tf make-pretraining-data` reads them (`corpus_files.iter_corpus_lines`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Optional, Sequence, Tuple, Union

from albert_tf.tokenization import corpus_files
from albert_tf.tokenization.text import bert_basic_tokenize

# Id 0 is padding, as in every BERT vocabulary; the others are the tokens packing and masking use.
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# The size of Google's Chinese BERT vocabulary, used by the Chinese ALBERT models.
DEFAULT_VOCAB_SIZE = 21128


@dataclasses.dataclass(frozen=True)
class WordPieceVocab:
    """What `build_wordpiece_vocab` wrote.

    Attributes:
      vocab_file: the `vocab.txt` (one token per line; the id is the line number from 0).
      vocab_size: number of tokens; at most the requested size, fewer for a small corpus.
      num_words: distinct words counted in the corpus.
      num_lines: lines read.
      seconds: wall time.
      cleaned_characters: control characters the text cleaning removed from the input.
      cleaned_files: the files it removed any from.
      skipped_files: `(file, problem)` of each unreadable file left out (`on_error="skip"`).
    """

    vocab_file: str
    vocab_size: int
    num_words: int
    num_lines: int
    seconds: float
    cleaned_characters: int = 0
    cleaned_files: Tuple[str, ...] = ()
    skipped_files: Tuple[Tuple[str, str], ...] = ()


def build_wordpiece_vocab(
    input_files: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
    output_file: Union[str, os.PathLike],
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    *,
    lower_case: bool = True,
    reserved_tokens: Sequence[str] = RESERVED_TOKENS,
    max_unique_chars: Optional[int] = None,
    lower_thresh: int = 10,
    num_iterations: int = 4,
    max_token_length: int = 50,
    slack_ratio: float = 0.05,
    on_error: str = "raise",
) -> WordPieceVocab:
    """Learns a WordPiece vocabulary and writes it atomically to `output_file`.

    The file starts with `reserved_tokens` (`[PAD]`=0, `[UNK]`=1, `[CLS]`=2, `[SEP]`=3,
    `[MASK]`=4 by default), then every kept character alone and as a `##` continuation, then the
    learned pieces by decreasing frequency.

    Args:
      input_files: text files (names or glob patterns), UTF-8, one sentence/paragraph per line.
      output_file: the `vocab.txt` to write (its directory is created if needed).
      vocab_size: the largest vocabulary wanted; the learner aims at
        `[vocab_size * (1 - slack_ratio), vocab_size]` and a small corpus gives fewer tokens.
      lower_case: lower-case and strip accents (must match the tokenizer's `lower_case`).
      reserved_tokens: the first tokens; must include `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`.
      max_unique_chars: alphabet size; rarer characters become `[UNK]`. Default
        `vocab_size // 4`, so characters and their `##` forms fill at most half the vocabulary
        (for Chinese every ideograph is a word, so this is the number of ideographs kept).
      lower_thresh: the smallest count a learned piece may have.
      num_iterations, max_token_length, slack_ratio: the learner's parameters.
      on_error: an unreadable input file (invalid UTF-8, binary data): "raise" (default) fails
        naming file and line; "skip" leaves it out and lists it in the result's `skipped_files`.

    Returns:
      A `WordPieceVocab` with the file name and figures.

    Raises:
      FileNotFoundError: an input name or pattern matches no file.
      ValueError: bad arguments, an empty corpus, invalid UTF-8 or binary data (`on_error="raise"`),
        or characters alone needing more than `vocab_size` tokens.
    """
    from tensorflow_text.tools.wordpiece_vocab import (  # noqa: PLC0415 - heavy import
        wordpiece_tokenizer_learner_lib as learner,
    )

    reserved = list(reserved_tokens)
    missing = [t for t in RESERVED_TOKENS if t not in reserved]
    if missing:
        raise ValueError(f"reserved_tokens must include {list(RESERVED_TOKENS)}; missing {missing}")
    if len(set(reserved)) != len(reserved) or any(not t or any(c.isspace() for c in t) for t in reserved):
        raise ValueError(f"reserved_tokens must be distinct non-empty tokens without whitespace: {reserved}")
    if not isinstance(vocab_size, int) or vocab_size <= len(reserved):
        raise ValueError(
            f"vocab_size must be an int larger than the {len(reserved)} reserved tokens, got {vocab_size!r}"
        )
    # Only a limit the caller set can be suggested smaller: a caller may have no such setting.
    hint = "." if max_unique_chars is None else " or a smaller max_unique_chars."
    if max_unique_chars is None:
        max_unique_chars = max(1, vocab_size // 4)
    if max_unique_chars < 1:
        raise ValueError(f"max_unique_chars must be >= 1, got {max_unique_chars}")
    corpus_files.check_on_error(on_error)

    start = time.monotonic()
    files = corpus_files.expand_inputs(input_files)
    counts: "collections.Counter[str]" = collections.Counter()
    num_lines = 0
    report = corpus_files.CorpusReport()
    for _, _, line in corpus_files.iter_corpus_lines(files, on_error=on_error, report=report):
        num_lines += 1
        counts.update(bert_basic_tokenize(line, lower_case=lower_case))
    if not counts:
        if report.skipped_files:
            raise ValueError(f"no words to learn from; {corpus_files.describe_skipped(report.skipped_files)}")
        raise ValueError(f"no words to learn from: {files} contain no text")

    vocab = learner.learn(
        dict(counts),
        vocab_size,
        reserved,
        lower_thresh=lower_thresh,
        num_iterations=num_iterations,
        max_unique_chars=max_unique_chars,
        max_token_length=max_token_length,
        slack_ratio=slack_ratio,
    )
    if len(vocab) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the reserved tokens and the "
            f"{min(max_unique_chars, len({c for w in counts for c in w}))} characters kept (each alone and "
            f"as a ## continuation) already make {len(vocab)} tokens. Use a larger vocab_size{hint}"
        )
    corpus_files.atomic_write_bytes(output_file, ("\n".join(vocab) + "\n").encode("utf-8"))
    return WordPieceVocab(
        vocab_file=os.fspath(output_file),
        vocab_size=len(vocab),
        num_words=len(counts),
        num_lines=num_lines,
        seconds=time.monotonic() - start,
        cleaned_characters=report.cleaned_characters,
        cleaned_files=tuple(report.cleaned_files),
        skipped_files=tuple(report.skipped_files),
    )
