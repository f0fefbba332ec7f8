"""Token-classification (NER) data: CoNLL-style BIO files and the People's Daily corpus.

CoNLL format (`read_conll`): one token per line, whitespace-separated columns with the token
first and the tag in the last column (CoNLL-2003: `word POS chunk NER`), a blank line between
sentences, `-DOCSTART-` lines (document boundaries) skipped. Tags are `O` or `B-TYPE` / `I-TYPE`
(`E-`/`S-` of IOBES are accepted too); anything else is an error naming the file and line.

People's Daily (`read_peoples_daily`): the January 1998 corpus, one paragraph per line,
`word/tag` tokens separated by two spaces, optionally preceded by an id token
(`19980101-01-001-001/m`). Words tagged `nr` (person), `ns` (place) and `nt` (organisation)
become `PER`, `LOC`, `ORG` entities, labelled per character (`B-` on the first character, `I-`
on the others); other words are `O`. Two conventions of the corpus are honoured:

* a bracketed compound `[中央/n 人民/n 广播/vn 电台/n]nt` is one word with the tag after `]`:
  an `nt`/`ns`/`nr` compound is one entity over all its characters; a compound with any other
  tag (`]nz`, `]l`, ...) keeps its inner words' own entities;
* a person's surname and given name are separate `nr` words (`江/nr 泽民/nr`): consecutive `nr`
  words form one `PER` entity, as in the usual People's Daily NER data.

Raw text (prediction, serving, transfer sets) is cut into the units a tagger tags by
`split_with_offsets`: whitespace-separated words or single characters (`TOKEN_UNITS`), with their
character spans.

The characters of a line are its tokens; `split_long_sentences` cuts long paragraphs after
sentence-final punctuation (and, failing that, before an entity) to fit a sequence length.

Encoding (`encode_sentences`): every word is split into sub-word pieces; its tag labels the
word's first piece and the other pieces (and `[CLS]`, `[SEP]`, padding) get the label
`IGNORE_LABEL` (-100), which weighs 0 in the loss and the token accuracy, the usual alignment of
BERT-style NER. The encoding remembers where each word's first piece is, so that predictions map
back to one tag per word.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.data.tables import DataFormatError, read_text

logger = logging.getLogger(__name__)

PEOPLES_DAILY_ENTITY_TAGS = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
_PD_ID_TOKEN = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")
_TAG = re.compile(r"^(O|[BIES]-\S+)$")
SENTENCE_END = frozenset("。！？!?；;")
IGNORE_LABEL = -100
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One sentence of token classification data.

    Attributes:
        tokens: The words (CoNLL) or characters (People's Daily).
        tags: One tag per token.
        source: The file it came from.
        line: The line of its first token.
        text: The raw text the tokens were split from (`split_with_offsets`); None for
            pre-tokenized data (a CoNLL or People's Daily file).
    """

    tokens: Tuple[str, ...]
    tags: Tuple[str, ...]
    source: str = ""
    line: int = 0
    text: Optional[str] = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


TOKEN_UNITS = ("word", "char")


def check_token_unit(token_unit: str) -> str:
    """`token_unit` if it is one of `TOKEN_UNITS`, else `ValueError`."""
    if token_unit not in TOKEN_UNITS:
        raise ValueError(f"token_unit must be one of {TOKEN_UNITS}, got {token_unit!r}")
    return token_unit


def split_with_offsets(text: str, token_unit: str = "word", *, strict: bool = True) -> List[Tuple[str, int, int]]:
    """The units a raw text is tagged by, with their code-point spans `[start, end)` in `text`.

    The one splitter of raw text for tagging (`albert_tf.tasks.tagging.predict_text_entities`,
    `AlbertTextTagger`, `albert-tf predict`, transfer sets; `albert_tf.tasks.tagging.serving` does
    the same in the graph). Whitespace is `str.isspace` (what `str.split()` and the regex `\\s`
    split on).

    Args:
        text: The text.
        token_unit: "word": runs of non-whitespace characters (the words of `text.split()`);
            "char": every character that is not whitespace (`TaskSpec.token_unit`).
        strict: Raise on a `token_unit` not in `TOKEN_UNITS` (`check_token_unit`); False splits
            any unit but "char" into words (`albert_tf.tasks.tagging.text_model.split_units`, whose
            callers have checked the unit already).

    Returns:
        `(unit, start, end)` triples with `text[start:end] == unit`.

    Raises:
        ValueError: An unknown `token_unit` (`strict`).
    """
    if strict:
        check_token_unit(token_unit)
    if token_unit == "char":
        return [(char, i, i + 1) for i, char in enumerate(text) if not char.isspace()]
    units: List[Tuple[str, int, int]] = []
    start = None
    for i, char in enumerate(text):
        if char.isspace():
            if start is not None:
                units.append((text[start:i], start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        units.append((text[start:], start, len(text)))
    return units


def check_tag(tag: str, path: str, line: int) -> str:
    """`tag` if it is `O` or `PREFIX-TYPE` (PREFIX in B, I, E, S), else `DataFormatError`."""
    if not _TAG.match(tag):
        raise DataFormatError(f"tag {tag!r} is not 'O' or B-/I-TYPE (BIO)", path, line)
    return tag


def read_conll(path: str, *, with_tags: bool = True) -> List[TaggedSentence]:
    """Sentences of a CoNLL-style file (see the module docstring).

    Args:
        path: The file (strict UTF-8).
        with_tags: The last column is the tag (at least two columns per token line). False reads
            only the tokens (first column) of text to tag; the tags are then all `O`.

    Raises:
        DataFormatError: Invalid UTF-8, a token line with too few columns, an invalid tag, or a
            file without sentences; the message names the file and line.
    """
    path = os.fspath(path)
    sentences: List[TaggedSentence] = []
    tokens: List[str] = []
    tags: List[str] = []
    first_line = 0

    def flush():
        if tokens:
            sentences.append(TaggedSentence(tuple(tokens), tuple(tags), path, first_line))
        tokens.clear()
        tags.clear()

    for number, line in enumerate(read_text(path).split("\n"), 1):
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        columns = stripped.split()
        if columns[0] == "-DOCSTART-":
            flush()
            continue
        if with_tags and len(columns) < 2:
            raise DataFormatError(f"expected a token and a tag, found 1 column: {stripped!r}", path, number)
        if not tokens:
            first_line = number
        tokens.append(columns[0])
        tags.append(check_tag(columns[-1], path, number) if with_tags else "O")
    flush()
    if not sentences:
        raise DataFormatError("no sentences", path)
    return sentences


def _pd_word(token: str, path: str, number: int) -> Tuple[str, str]:
    if "/" not in token:
        raise DataFormatError(f"token {token!r} is not word/tag", path, number)
    word, tag = token.rsplit("/", 1)
    if not word or not tag:
        raise DataFormatError(f"token {token!r} is not word/tag", path, number)
    return word, tag


def _word_entity(tag: str) -> Optional[str]:
    """The entity type of a single word's tag; a person's name parts are merged later."""
    return "PER_PART" if tag == "nr" else PEOPLES_DAILY_ENTITY_TAGS.get(tag)


def parse_peoples_daily_line(line: str, path: str = "", number: int = 0) -> Optional[TaggedSentence]:
    """The character-level `TaggedSentence` of one corpus line (None for an empty line).

    Raises:
        DataFormatError: A token that is not `word/tag`, or unbalanced `[ ... ]` brackets.
    """
    tokens = line.split()
    if tokens and _PD_ID_TOKEN.match(tokens[0]):
        tokens = tokens[1:]
    if not tokens:
        return None
    # (word, entity type or None): an entity word or compound is one span.
    spans: List[Tuple[str, Optional[str]]] = []
    compound: Optional[List[Tuple[str, str]]] = None
    for token in tokens:
        opens = token.startswith("[") and len(token) > 1
        if opens:
            if compound is not None:
                raise DataFormatError(f"nested '[' at {token!r}", path, number)
            compound = []
            token = token[1:]
        closing_tag = None
        word, tag = _pd_word(token, path, number)
        if "]" in tag:
            tag, closing_tag = tag.split("]", 1)
            if compound is None:
                raise DataFormatError(f"']' without '[' at {token!r}", path, number)
            if not tag or not closing_tag:
                raise DataFormatError(f"token {token!r} is not word/tag]compound_tag", path, number)
        if compound is not None:
            compound.append((word, tag))
            if closing_tag is not None:
                entity = PEOPLES_DAILY_ENTITY_TAGS.get(closing_tag)
                if entity is not None:
                    spans.append(("".join(w for w, _ in compound), entity))
                else:
                    spans.extend((w, _word_entity(t)) for w, t in compound)
                compound = None
            continue
        spans.append((word, _word_entity(tag)))
    if compound is not None:
        raise DataFormatError("'[' compound not closed by the end of the line", path, number)

    characters: List[str] = []
    tags: List[str] = []
    previous = None
    for word, entity in spans:
        chars = list(word)
        if entity is None:
            tags.extend("O" for _ in chars)
        elif entity == "PER_PART":
            # Surname and given name are separate `nr` words: continue the person entity.
            continuing = previous == "PER_PART"
            tags.extend(("I-PER" if (continuing or i) else "B-PER") for i in range(len(chars)))
        else:
            tags.extend((f"B-{entity}" if i == 0 else f"I-{entity}") for i in range(len(chars)))
        characters.extend(chars)
        previous = entity
    return TaggedSentence(tuple(characters), tuple(tags), path, number)


def read_peoples_daily(path: str, *, max_sentences: Optional[int] = None) -> List[TaggedSentence]:
    """Character-level NER sentences of the People's Daily corpus (see the module docstring).

    Args:
        path: The corpus file (strict UTF-8).
        max_sentences: Stop after this many non-empty lines (None: all).

    Raises:
        DataFormatError: Malformed tokens or brackets, naming the file and line.
    """
    path = os.fspath(path)
    sentences: List[TaggedSentence] = []
    for number, line in enumerate(read_text(path).split("\n"), 1):
        sentence = parse_peoples_daily_line(line, path, number)
        if sentence is not None:
            sentences.append(sentence)
            if max_sentences is not None and len(sentences) >= max_sentences:
                break
    if not sentences:
        raise DataFormatError("no sentences", path)
    return sentences


def _cut_points(sentence: TaggedSentence, max_tokens: int) -> List[int]:
    """Where to cut: after sentence-final punctuation when possible, never inside an entity
    unless an entity alone is longer than `max_tokens`."""
    n = len(sentence.tokens)
    cuts, start = [], 0
    while n - start > max_tokens:
        limit = start + max_tokens
        cut = None
        for i in range(limit, start, -1):
            if sentence.tokens[i - 1] in SENTENCE_END:
                cut = i
                break
        if cut is None:
            cut = limit
            while cut > start + 1 and sentence.tags[cut].startswith(("I-", "E-")):
                cut -= 1
            if cut == start + 1 and sentence.tags[cut].startswith(("I-", "E-")):
                cut = limit
        cuts.append(cut)
        start = cut
    return cuts


def split_long_sentences(sentences: Iterable[TaggedSentence], max_tokens: int) -> List[TaggedSentence]:
    """Sentences of at most `max_tokens` tokens, longer ones cut (see `_cut_points`)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    out: List[TaggedSentence] = []
    for sentence in sentences:
        start = 0
        for cut in _cut_points(sentence, max_tokens) + [len(sentence.tokens)]:
            tags = list(sentence.tags[start:cut])
            if tags and tags[0].startswith("I-"):
                # Only an over-long entity is cut inside; its continuation starts afresh.
                tags[0] = "B-" + tags[0][2:]
            out.append(dataclasses.replace(sentence, tokens=sentence.tokens[start:cut], tags=tuple(tags)))
            start = cut
    return out


class TagVocab:
    """The tag list of a tagging task: tag <-> id, `O` first.

    Args:
        tags: The tags in id order.
    """

    def __init__(self, tags: Sequence[str]):
        tags = [str(t) for t in tags]
        if not tags:
            raise ValueError("a tag list must not be empty")
        if len(set(tags)) != len(tags):
            raise ValueError(f"duplicate tags in {tags}")
        for tag in tags:
            if not _TAG.match(tag):
                raise ValueError(f"tag {tag!r} is not 'O' or B-/I-TYPE")
        self.tags: Tuple[str, ...] = tuple(tags)
        self._ids = {t: i for i, t in enumerate(tags)}

    @classmethod
    def from_sentences(cls, sentences: Iterable[TaggedSentence]) -> "TagVocab":
        """`O`, then the other tags found, sorted by entity type and then prefix (B before I)."""
        found = {tag for s in sentences for tag in s.tags}
        found.add("O")
        others = sorted(found - {"O"}, key=lambda t: (t[2:], "BIES".index(t[0])))
        return cls(["O"] + others)

    def __len__(self) -> int:
        return len(self.tags)

    def __eq__(self, other) -> bool:
        return isinstance(other, TagVocab) and other.tags == self.tags

    def __repr__(self) -> str:
        return f"TagVocab({list(self.tags)!r})"

    def id_of(self, tag: str, sentence: TaggedSentence) -> int:
        """The id of `tag` (of `sentence`).

        Raises:
            DataFormatError: An unknown tag, naming the sentence's file and line.
        """
        try:
            return self._ids[tag]
        except KeyError:
            raise DataFormatError(
                f"unknown tag {tag!r}; the task's tags are {', '.join(self.tags)}", sentence.source, sentence.line
            ) from None

    def tag_of(self, tag_id: int) -> str:
        return self.tags[int(tag_id)]


# --- features ------------------------------------------------------------------------------------


@dataclasses.dataclass
class EncodedSentences:
    """Model features of tagged sentences and the word -> piece alignment.

    Attributes:
        features: int32 `input_ids`, `input_mask`, `segment_ids`, `labels` [n, seq_length].
        word_positions: Per sentence, the position of each word's first piece (-1 when the word
            was cut off by the sequence length).
        truncated_words: Words that did not fit.
    """

    features: Dict[str, np.ndarray]
    word_positions: List[List[int]]
    truncated_words: int


def encode_sentences(
    sentences: Sequence[TaggedSentence], tokenizer, *, seq_length: int, tag_vocab: TagVocab, with_labels: bool = True
) -> EncodedSentences:
    """Tokenizes every word, packs `[CLS] pieces [SEP]`, labels the first piece of each word.

    A word the tokenizer turns into no piece at all (e.g. a lone control character) becomes
    the unknown token, so every word keeps a position and a prediction.

    Raises:
        DataFormatError: A tag outside `tag_vocab`, naming the sentence's file and line.
        ValueError: `seq_length < 3` or no sentences.
    """
    if seq_length < 3:
        raise ValueError(f"seq_length must be >= 3, got {seq_length}")
    if not sentences:
        raise ValueError("no sentences to encode")
    n = len(sentences)
    input_ids = np.full((n, seq_length), tokenizer.pad_id, dtype=np.int32)
    input_mask = np.zeros((n, seq_length), dtype=np.int32)
    labels = np.full((n, seq_length), IGNORE_LABEL, dtype=np.int32)
    positions: List[List[int]] = []
    truncated = 0
    budget = seq_length - 2
    for row, sentence in enumerate(sentences):
        pieces: List[int] = []
        word_positions: List[int] = []
        for word, tag in zip(sentence.tokens, sentence.tags):
            tag_id = tag_vocab.id_of(tag, sentence) if with_labels else None
            ids = tokenizer.encode(word) or [tokenizer.unk_id]
            if len(pieces) + 1 > budget:
                word_positions.append(-1)
                truncated += 1
                continue
            position = len(pieces) + 1  # after [CLS]
            word_positions.append(position)
            if with_labels:
                labels[row, position] = tag_id
            pieces.extend(ids[: budget - len(pieces)])
        sequence = [tokenizer.cls_id] + pieces + [tokenizer.sep_id]
        input_ids[row, : len(sequence)] = sequence
        input_mask[row, : len(sequence)] = 1
        positions.append(word_positions)
    if truncated:
        logger.warning("%d word(s) beyond seq_length=%d are predicted 'O'; split long sentences first", truncated, seq_length)
    features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": np.zeros_like(input_ids)}
    if with_labels:
        features["labels"] = labels
    return EncodedSentences(features, positions, truncated)
