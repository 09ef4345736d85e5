"""A faust-streaming application for test_faust.py, run as a worker in faust's own virtual environment:
`<faust venv>/bin/python faust_counter.py worker`. It imports nothing of the test suite.

The agent reads words (the record keys) from the source topic, counts them in a Table (whose changelog is the
compacted topic `<app id>-counts-changelog`) and sends `<word>` -> `<count>` to the result topic after each update.
The test sets it up through the environment: FAUST_BROKER (host:port), FAUST_APP_ID, FAUST_SOURCE, FAUST_RESULT,
FAUST_DATADIR.
"""
import os

import faust

app = faust.App(
    os.environ["FAUST_APP_ID"],
    broker=f"kafka://{os.environ['FAUST_BROKER']}",
    store="memory://",  # the table lives in memory: a restarted worker can only get it back from the changelog
    datadir=os.environ["FAUST_DATADIR"],
    topic_partitions=1,
    topic_replication_factor=1,
    web_enabled=False,
    key_serializer="json",  # the table's changelog: JSON keys and values
    value_serializer="json",
)
RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
source = app.topic(os.environ["FAUST_SOURCE"], **RAW)
result = app.topic(os.environ["FAUST_RESULT"], **RAW)
counts = app.Table("counts", default=int, key_type=str, value_type=int)


@app.agent(source)
async def count(stream):
    async for word, _value in stream.items():
        text = word.decode()
        counts[text] += 1
        await result.send(key=word, value=str(counts[text]).encode())


if __name__ == "__main__":
    app.main()
