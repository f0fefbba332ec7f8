"""ALBERT tokenization: vocabulary training, Python tokenizers and the in-graph Keras layer.

Modules:
  text                  the original preprocessing (`preprocess_text`, BERT basic tokenization).
  sentencepiece_vocab   `train_sentencepiece`: the original ALBERT SentencePiece recipe.
  wordpiece_vocab       `build_wordpiece_vocab`: a BERT `vocab.txt` for the Chinese models.
  tokenizers            `SentencePieceTokenizer`, `WordPieceTokenizer` (Python, original ids).
  packing               `truncate_seq_pair`, `pack_inputs`: `[CLS] a [SEP] b [SEP]` in Python.
  in_graph              `AlbertTokenizerLayer`: tokenization and packing as TF ops (Keras layer).
  resolve               `find_tokenizer`: the tokenizer stored with a checkpoint, in every layout;
                        `python_tokenizer` / `tokenizer_layer`: the tokenizer of a kind and file.
  corpus_files          reading corpora as the tokenizer trainers and the data tools do: input
                        globs, UTF-8 lines, the original cleaning, counted; atomic writes.
  unicode_classes       the original tokenizers' character classes, for Python and for RE2.

`AlbertTokenizerLayer` is imported on first use: it loads tensorflow-text, which the Python
tokenizers and the vocabulary builders do not need.
"""

from albert_tf.tokenization.packing import pack_inputs, truncate_seq_pair
from albert_tf.tokenization.resolve import StoredTokenizer, find_tokenizer, python_tokenizer, tokenizer_layer
from albert_tf.tokenization.sentencepiece_vocab import SentencePieceVocab, train_sentencepiece
from albert_tf.tokenization.text import bert_basic_tokenize, preprocess_text
from albert_tf.tokenization.tokenizers import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    create_tokenizer,
    load_vocab,
)
from albert_tf.tokenization.wordpiece_vocab import WordPieceVocab, build_wordpiece_vocab

__all__ = [
    "AlbertTokenizerLayer",
    "SentencePieceTokenizer",
    "SentencePieceVocab",
    "StoredTokenizer",
    "WordPieceTokenizer",
    "WordPieceVocab",
    "bert_basic_tokenize",
    "build_wordpiece_vocab",
    "create_tokenizer",
    "find_tokenizer",
    "load_vocab",
    "pack_inputs",
    "preprocess_text",
    "python_tokenizer",
    "tokenizer_layer",
    "train_sentencepiece",
    "truncate_seq_pair",
]


def __getattr__(name):
    if name == "AlbertTokenizerLayer":
        from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

        return AlbertTokenizerLayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
