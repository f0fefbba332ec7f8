"""Trains the small SentencePiece models committed next to this script (run it from anywhere:
`python tests/data/make_test_models.py`); the tests read the committed files and train nothing.

* `squad_spm.model`: the sentences of `squad_spm_corpus.txt` (Normans, Einstein, Paris, a café in
  Zürich: the SQuAD / RACE test texts) three times, ALBERT recipe, soft limit of 200 pieces, seed 0
  (114 pieces), so that the answers of those tests tokenize into whole words and digits.
  Used by the SQuAD, RACE and question-answering export / CLI tests.
* `numbers_spm.model`: exactly 90 pieces, seed 0, on 300 lines of 12 words drawn (seed 0) from a few
  State of the Union words, years followed by a comma ("1971,") and dollar sums ("$5,000,000,"): the
  model learns pieces ending in a digit and a comma, which the tokenizers' digit-comma rule splits.
  Used by the tokenizer parity tests (Python, official, in-graph).

The trainer is not bit-for-bit reproducible across SentencePiece versions (and a model records the
path of its training file), so the tests assert properties of the committed files, not their bytes.
`tiny_spm.model` (64 pieces, see conftest.py) is not made here.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent
SQUAD_CORPUS = DATA / "squad_spm_corpus.txt"
NUMBER_WORDS = "the nation of and to congress people states year law-making (a) it's in".split()


def number_lines(seed: int = 0, count: int = 300) -> list:
    """The `numbers_spm.model` corpus: 12 tokens a line, 70 % words, else "1971," or "$5,000,000,"."""
    rng = random.Random(seed)
    numbers = [lambda: f"{rng.randrange(1900, 2000)},", lambda: f"${rng.randrange(1, 99)},000,000,"]
    return [
        " ".join(rng.choice(NUMBER_WORDS) if rng.random() < 0.7 else rng.choice(numbers)() for _ in range(12))
        for _ in range(count)
    ]


def main() -> int:
    sys.path.insert(0, str(DATA.parents[1]))
    from albert_tf.tokenization import train_sentencepiece

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        (work / "squad.txt").write_text(SQUAD_CORPUS.read_text(encoding="utf-8") * 3, encoding="utf-8")
        squad = train_sentencepiece(str(work / "squad.txt"), str(work / "squad_spm"), vocab_size=200,
                                    hard_vocab_limit=False, num_threads=1, seed=0)
        (work / "numbers.txt").write_text("\n".join(number_lines()), encoding="utf-8")
        numbers = train_sentencepiece([str(work / "numbers.txt")], str(work / "numbers_spm"), vocab_size=90,
                                      num_threads=1, seed=0)
        for result in (squad, numbers):
            target = DATA / Path(result.model_file).name
            shutil.copyfile(result.model_file, target)
            print(f"{target}: {result.vocab_size} pieces, {target.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
