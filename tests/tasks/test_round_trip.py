"""The round-trip matrix, from the user's side: every producer of a fine-tuned model writes the one
model layout (`albert_tf.tasks.model_dir`), and every loader reads it whole.

Producers: `model.finetune`, `model.save` and `model.export` (every family of the task battery:
classification, regression on pairs, tagging, multiple choice, SQuAD v1 and v2), `albert-tf
finetune` (classification, tagging); the Distiller's student in tests/distillation/test_distillation.py. The pipeline's pushed
version is checked on the shared run in tests/pipeline_steps/test_pipeline_e2e.py, the README's
quickstart on it in tests/test_first_hour.py.

Loaders: `from_pretrained` (twice: the two loads answer bit for bit alike), `keras.saving.load_model`
in a fresh process after `import albert_tf` alone, `albert-tf predict` / `evaluate`, and the served
signature. Every loader answers what the producer's model answers, within `TOLERANCE`.
"""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _task_battery as battery  # noqa: E402
from _cli_helpers import cli_runner, write_sentiment_tables, write_tiny_model_files  # noqa: E402
from _task_cases import CASES  # noqa: E402

from albert_tf.tasks.model_dir import model_record  # noqa: E402
from albert_tf import AlbertTextClassifier, AlbertTextTagger  # noqa: E402

TOLERANCE = 1e-5
PRODUCERS = ("model.finetune", "model.save", "export")
REPO = Path(__file__).resolve().parents[2]
# What the `albert-tf finetune` classifier and tagger answer, through every loader.
CLI_TEXTS = ["great good fine", "dull bad awful", "a very good film", "the plot"]
TAGGER_TEXTS = ["i live in london", "paris is big"]


def _same(got, want, where, tolerance=TOLERANCE):
    battery.assert_same_answers(got, want, tolerance, where)


def _fresh_process_answers(requests, tmp_path):
    """`keras.saving.load_model(path).predict(probe)` for each `(path, probe)` of `requests`, in one
    new interpreter that imports `keras` and `albert_tf` and nothing else of the package."""
    request, answers = tmp_path / "request.pkl", tmp_path / "answers.pkl"
    request.write_bytes(pickle.dumps([(str(path), probe) for path, probe in requests]))
    script = (
        "import pickle, sys, keras, albert_tf\n"
        "requests = pickle.load(open(sys.argv[1], 'rb'))\n"
        "answers = [keras.saving.load_model(path).predict(probe, verbose=0) for path, probe in requests]\n"
        "pickle.dump(answers, open(sys.argv[2], 'wb'))\n"
    )
    subprocess.run([sys.executable, "-c", script, str(request), str(answers)], check=True, cwd=tmp_path,
                   capture_output=True, timeout=300)
    return pickle.loads(answers.read_bytes())


# --- the battery's families: model.finetune, model.save, export ------------------------------------------


@pytest.fixture(scope="module")
def every_family(task_family):
    """{family: `_task_battery.ProducedTask`}: each family's model (conftest.py's `task_family`,
    shared with the task battery) fit, then fine-tuned a few more updates by `model.finetune` (what
    is checked here is that every loader answers as the trained model, not how well it learned),
    saved with `model.save` and exported with `model.export`; `answers` are the finished model's."""
    return {name: task_family(name) for name in sorted(CASES)}


@pytest.fixture(params=sorted(CASES))
def produced(request, every_family):
    return every_family[request.param]


@pytest.mark.slow
@pytest.mark.parametrize("producer", PRODUCERS)
def test_from_pretrained_restores_the_whole_model(produced, producer):
    cls = type(produced.model)
    first = cls.from_pretrained(produced.paths[producer])
    where = f"{produced.case.name} from {producer}"
    assert type(first) is cls and first.compiled
    # The head, its labels and settings, and the sequence length come back as they were trained.
    restored, trained = model_record(first)["config"], model_record(produced.model)["config"]
    assert {k: v for k, v in restored.items() if k != "labels"} == {k: v for k, v in trained.items() if k != "labels"}
    assert first.preprocessor.sequence_length == produced.model.preprocessor.sequence_length
    if producer != "model.save":  # a .keras file is Keras' alone; the directory and the export record the run
        assert first.training_config.optimization.learning_rate == battery.LEARNING_RATE, first.training_config
    answers = first.predict(produced.case.probe, verbose=0)
    _same(answers, produced.answers, where)
    if producer == "model.finetune":  # the loads of a directory are alike, bit for bit
        second = cls.from_pretrained(produced.paths[producer])
        _same(second.predict(produced.case.probe, verbose=0), answers, where + ", a second load", tolerance=0.0)


@pytest.fixture(scope="module")
def fresh_process(every_family, cli_models, tmp_path_factory):
    """{path: answers} of `_fresh_process_answers` for every `.keras` file the module loads in a new
    interpreter: each family's `model.finetune` directory and `model.save` file (on its probe), and
    the `albert-tf finetune` classifier and tagger (on `CLI_TEXTS`, `TAGGER_TEXTS`); one process for
    all (each pays TensorFlow's import)."""
    requests = [(path, produced.case.probe) for produced in every_family.values()
                for path in (produced.paths["model.finetune"] / "model.keras", produced.paths["model.save"])]
    requests += [(cli_models / "classifier" / "model.keras", CLI_TEXTS),
                 (cli_models / "tagger" / "model.keras", TAGGER_TEXTS)]
    answers = _fresh_process_answers(requests, tmp_path_factory.mktemp("fresh_process"))
    return {path: answer for (path, _), answer in zip(requests, answers)}


@pytest.mark.slow
def test_keras_load_model_in_a_fresh_process_after_import_albert_tf(every_family, fresh_process):
    """Every family's `model.finetune` directory and `model.save` file, in one new interpreter."""
    for name, produced in sorted(every_family.items()):
        for path in (produced.paths["model.finetune"] / "model.keras", produced.paths["model.save"]):
            _same(fresh_process[path], produced.answers, f"{name}: load_model({path.name})")


@pytest.mark.slow
def test_served_signature_answers_as_the_model(produced, tmp_path):
    """An export of the model `from_pretrained` read from the model directory serves what the trained
    model answers (the producer's own export: the battery's `check_served_answers_equal_predict`)."""
    case = produced.case
    reloaded = type(produced.model).from_pretrained(produced.paths["model.finetune"])
    again = reloaded.export(tmp_path, model_name=case.name, check=False, **case.export_kwargs)
    serving_default = tf.saved_model.load(again.path).signatures["serving_default"]
    outputs = serving_default(**case.serving_inputs(case.probe))
    served = case.served_answers({key: value.numpy() for key, value in outputs.items()})
    _same(served, case.predicted_answers(produced.answers), f"{case.name}: served")


@pytest.mark.slow
@pytest.mark.parametrize("produced", ["classifier", "regressor", "tagger"], indirect=True)
def test_albert_tf_predict_and_evaluate_read_the_model_finetune_directory(produced, tmp_path):
    """`albert-tf predict` and `evaluate` (their library calls) on the directory `model.finetune`
    wrote answer what the model does, in the answer shape of `predict` (tagging: character spans)."""
    from albert_tf.tasks.inference import evaluate_model_dir, predict_model_dir

    case, model_dir = produced.case, produced.paths["model.finetune"]
    if case.name == "regressor":
        records = predict_model_dir(str(model_dir), texts=case.probe[0], text_b=case.probe[1]).records
        _same([r["prediction"] for r in records], produced.answers.tolist(), "predict")
    elif case.name == "tagger":
        records = predict_model_dir(str(model_dir), texts=case.probe).records
        _same([r["entities"] for r in records], produced.answers, "predict")
    else:
        records = predict_model_dir(str(model_dir), texts=case.probe).records
        probabilities = tf.nn.softmax(produced.answers).numpy().tolist()
        _same([[r["probabilities"][name] for name in ("0", "1")] for r in records], probabilities, "predict")
        # evaluate reads a table with the columns task.json names.
        (tmp_path / "dev.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{x}\n" for x, y in zip(case.x, case.y)))
        accuracy = evaluate_model_dir(str(model_dir), str(tmp_path), splits=["dev"])["dev"]["accuracy"]
        predicted = produced.model.predict(case.x, verbose=0).argmax(-1)
        assert accuracy == pytest.approx(float(np.mean(predicted == np.asarray(case.y))))


@pytest.mark.slow
@pytest.mark.parametrize("produced", ["classifier", "squad_v2"], indirect=True)
def test_a_new_head_only_when_asked_seeded_and_said(produced, capsys):
    cls, path = type(produced.model), produced.paths["model.finetune"]
    capsys.readouterr()
    cls.from_pretrained(path)
    assert "new head" not in capsys.readouterr().err
    first = cls.from_pretrained(path, new_head=True, seed=3)
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "new head (seed 3; new_head=True)" in said[0], said
    second = cls.from_pretrained(path, new_head=True, seed=3)
    # The encoder is the stored one, the head new and the same for the same seed.
    _same(second.predict(produced.case.probe, verbose=0), first.predict(produced.case.probe, verbose=0),
          "two seeded new heads", tolerance=0.0)


# --- albert-tf finetune, predict and evaluate; the Distiller --------------------------------------------

cli = cli_runner(("albert_tf.cli.finetune", "albert_tf.cli.evaluate", "albert_tf.cli.predict", "albert_tf.cli.export"))


@pytest.fixture(scope="module")
def cli_models(tmp_path_factory):
    """A classifier and a CoNLL tagger written by `albert-tf finetune`."""
    root = tmp_path_factory.mktemp("cli_round_trip")
    write_tiny_model_files(root)
    write_sentiment_tables(root / "sentiment", {"train": 64, "dev": 16, "test": 8})
    common = ["--config", root / "config.json", "--vocab-file", root / "vocab.txt", "--batch-size", 16,
              "--learning-rate", 3e-3, "--quiet"]
    status, error = cli(["finetune", "--task", "classification", "--data", root / "sentiment", "--text-column", "text",
                         "--label-column", "label", "--model-dir", root / "classifier", "--max-seq-length", 12,
                         "--num-train-steps", 30, *common])
    assert (status, error) == (0, "")
    conll = root / "conll"
    conll.mkdir()
    sentences = [f"i O\nlive O\nin O\n{['paris', 'london'][i % 2]} B-LOC\n" for i in range(24)]
    (conll / "train.txt").write_text("\n".join(sentences), encoding="utf-8")
    (conll / "dev.txt").write_text("\n".join(sentences[:6]), encoding="utf-8")
    status, error = cli(["finetune", "--task", "conll", "--data", conll, "--model-dir", root / "tagger",
                         "--max-seq-length", 10, "--num-train-steps", 30, *common])
    assert (status, error) == (0, "")
    return root


def _cli_json_lines(capsys, argv):
    capsys.readouterr()
    status, error = cli(argv)
    assert (status, error) == (0, "")
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.slow
def test_the_cli_classifier_round_trips_through_every_loader(cli_models, fresh_process, tmp_path, capsys):
    texts = CLI_TEXTS
    model_dir = cli_models / "classifier"
    first = AlbertTextClassifier.from_pretrained(model_dir)
    second = AlbertTextClassifier.from_pretrained(model_dir)
    assert first.labels == ["neg", "pos"] and first.num_classes == 2 and first.preprocessor.sequence_length == 12
    logits = first.predict(texts, verbose=0)
    _same(second.predict(texts, verbose=0), logits, "a second load", tolerance=0.0)
    probabilities = tf.nn.softmax(logits).numpy()
    # albert-tf predict and evaluate read the same directory.
    records = _cli_json_lines(capsys, ["predict", "--model-dir", model_dir, *texts])
    _same([[r["probabilities"][name] for name in first.labels] for r in records], probabilities.tolist(), "predict")
    assert [r["label"] for r in records] == [first.labels[i] for i in logits.argmax(-1)]
    capsys.readouterr()
    assert cli(["evaluate", "--model-dir", model_dir, "--data", cli_models / "sentiment", "--split", "dev"])[0] == 0
    evaluated = json.loads(capsys.readouterr().out)["dev"]["accuracy"]
    dev = [line.split("\t") for line in (cli_models / "sentiment" / "dev.tsv").read_text().splitlines()[1:]]
    predicted = first.predict([text for _, text in dev], verbose=0).argmax(-1)
    assert evaluated == pytest.approx(np.mean([first.labels[i] == label for i, (label, _) in zip(predicted, dev)]))
    # keras.saving.load_model in a fresh process: the whole raw-text model, strings in (the tagger's: below).
    _same(fresh_process[model_dir / "model.keras"], logits, "load_model")
    # albert-tf export, then from_pretrained on the export and its served signature.
    assert cli(["export", "--model-dir", model_dir, "--export-base", tmp_path / "serving", "--model-name", "clf",
                "--skip-check"])[0] == 0
    version = tmp_path / "serving" / "clf" / "1"
    _same(AlbertTextClassifier.from_pretrained(version).predict(texts, verbose=0), logits, "from the export")
    served = tf.saved_model.load(str(version)).signatures["serving_default"](text=tf.constant(texts))
    _same(served["probabilities"].numpy(), probabilities, "served")


@pytest.mark.slow
def test_the_cli_tagger_round_trips_with_one_answer_shape(cli_models, fresh_process, capsys, tmp_path):
    texts = TAGGER_TEXTS
    model_dir = cli_models / "tagger"
    first = AlbertTextTagger.from_pretrained(model_dir)
    answers = first.predict(texts, verbose=0)
    _same(AlbertTextTagger.from_pretrained(model_dir).predict(texts, verbose=0), answers, "a second load", 0.0)
    _same(fresh_process[model_dir / "model.keras"], answers, "load_model in a fresh process")
    assert answers[0] and answers[0][0]["label"] == "LOC" and answers[0][0]["text"] == "london"
    records = _cli_json_lines(capsys, ["predict", "--model-dir", model_dir, *texts])
    # albert-tf predict gives predict's records (character offsets), plus the word tags.
    _same([r["entities"] for r in records], answers, "albert-tf predict")


def test_a_directory_without_a_model_record_still_loads(produced_old_layout):
    model, old_dir, probe, answers = produced_old_layout
    restored = type(model).from_pretrained(old_dir)
    _same(restored.predict(probe, verbose=0), answers, "a directory that keeps the head")


@pytest.fixture
def produced_old_layout(every_family, tmp_path):
    """A classifier directory as albert_tf wrote it before it kept the whole model: `model.keras`
    holds the head, `task.json` has no model record (made from the matrix's `model.finetune` one)."""
    import shutil

    produced = every_family["classifier"]
    run = tmp_path / "run"
    shutil.copytree(produced.paths["model.finetune"], run)
    (run / "model.keras").unlink()
    produced.model.task_model.save(run / "model.keras")
    spec = json.loads((run / "task.json").read_text())
    del spec["model"], spec["training"]
    (run / "task.json").write_text(json.dumps(spec))
    return produced.model, run, produced.case.probe, produced.answers
