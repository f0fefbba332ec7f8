"""Entry point: the local TF Serving stand-in (`albert_tf.model_server.server`), same flags as `albert-tf serve`."""

import sys

from albert_tf.cli import serve

if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="local_server.py", description=serve.HELP)
    serve.add_arguments(parser)
    sys.exit(serve.run(parser.parse_args()))
