"""Fine-tuning task models, all built from one template (`albert_tf.tasks.base.AlbertTaskModel`)."""
