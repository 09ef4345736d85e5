"""The web console of the control listener: server-rendered pages over the same control operations as the JSON
API (`compatbroker serve --control-listen HOST:PORT`, `EmbeddedBroker(...).control_url`; open it in a browser).

Pages: `/` (cluster overview), `/topics`, `/topics/NAME` (partitions with leader, replicas, ISR, offsets, size;
configs), `/topics/NAME/records?partition=&offset=&timestamp=&limit=&format=text|json|hex` (the record browser),
`/groups`, `/groups/ID` (members, assignments, lag per partition and a lag chart of the last ten minutes from
`lag_history.LagHistory`), `/requests` (the live request log), `/faults` (forms that inject errors, latency and
dropped connections, and clear them) and `/clients` (KIP-714 metrics pushed by clients).

`/topics`, `/groups`, `/requests` and `/faults` are JSON routes too: the console answers them only when the request
accepts `text/html` (a browser), so scripts get the JSON they always got. Live parts of a page refresh themselves
(`static/console.js` fetches `?fragment=1`); forms post `application/x-www-form-urlencoded` to `/faults`.

Why server-rendered Jinja2 and a few lines of our own JS rather than htmx or a Vite-built bundle: the pages are
tables over data the server already has, so rendering them where the data lives needs no JSON API of its own, no
build step, no vendored library to keep current and nothing for the wheel but templates, one stylesheet and one
script; autoescaping covers the hostile input (record keys, values, headers, client ids) and the
Content-Security-Policy (`script-src 'self'`) keeps any slip from running code. The fragment refresh is the one
thing htmx would have given us, in about thirty lines.
"""
from __future__ import annotations

from .app import Console, Page
from .lag_history import LagHistory

__all__ = ["Console", "LagHistory", "Page"]
