"""Serving-side tools: the TF Serving protocol clients (client.py) and a local development
stand-in for TF Serving (server.py, over manager.py and servable.py; its batching in batching.py,
arrival order, and length_batching.py, by length bucket, with request_length.py), with TF
Serving's request logging (request_log.py). Production serving is TF Serving itself; see serving/README.md."""
