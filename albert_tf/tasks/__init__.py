"""Fine-tuning task models, all built from one template (`albert_tf.tasks.base.AlbertTaskModel`).

* `classification` -- sentence(-pair) classifier and regressor (GLUE-style);
* `tagging` -- token classifier (NER, BIO tags);
* `squad`, `squad_postprocessing` -- extractive QA, SQuAD v1.1 head and the original v2.0 head, n-best, EM/F1;
* `multiple_choice` -- RACE-style softmax over choices;
* `presets` -- the original README's GLUE hyper-parameters.
"""
