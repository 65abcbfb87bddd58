"""The fleet view: the live page (`loopwatch dashboard`) and the offline report
(`loopwatch report`). Both draw with the same chart code (static/charts.js).

* board.py: the live tallies, pure (fed warnings and episodes, gives a JSON snapshot)
* feed.py, server.py: the Kafka consumer that feeds the board, the aiohttp page and its
  server-sent events
* report.py: the offline report over recorded sessions (the detector core through
  streams.scan.scanner)
* assets.py: the HTML, CSS and JS that ship inside the package (static/)
"""

DEFAULT_PORT = 8050
"""The fleet page's port (`loopwatch dashboard --port`); here, not in server.py, so that
the command line registers its options without aiohttp (the `worker` extra)."""
