"""Tiny pipeline inputs written by the pipeline step tests: a task table and a corpus."""


def write_task(directory, train_rows, dev_rows, header="label\ttext"):
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train_rows), ("dev", dev_rows)):
        (directory / f"{name}.tsv").write_text(header + "\n" + "".join(f"{l}\t{t}\n" for l, t in rows), encoding="utf-8")
    return directory


def write_corpus(directory, count=5):
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"doc{i}.txt").write_text(f"First paragraph of document {i}. It has two sentences.\nA second paragraph.\n", encoding="utf-8")
    return str(directory / "*.txt")
