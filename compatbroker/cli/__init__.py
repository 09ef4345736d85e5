"""The `compatbroker` command line (click for parsing, rich for tables and progress bars).

- `main.py`: the root group `cli` and `main(argv) -> int` (the console script, `python -m compatbroker`);
- `options.py`: the client options every client command shares (-b, --command-config, -X, --client-id, --format)
  and `make_client` / `make_admin`; `output.py`: tables for people, `--format json` for scripts; `errors.py`: exit
  codes and error lines;
- `serve.py`, `control.py`: the broker and its testing toolkit's control endpoint;
- `topic.py`, `cluster.py`, `group.py`, `acl.py`, `user.py`, `produce.py`, `consume.py` (+ `formats.py`): clients of
  any Kafka-compatible cluster over the Kafka protocol (`compatbroker.client`).

This is the top layer: it may import anything below it, and nothing imports it but `compatbroker.__main__`.
"""
