"""Cold Iron in the browser: an evaluation's report to replay and compare games
(``scripts/evaluate.py --html DIR``, :mod:`agents.web.report`) and a page to play on
(``scripts/play.py --web``, :mod:`agents.web.server`). The rules stay in the Python engine: the
pages draw the states it computed (:mod:`agents.web.views`) and send actions back."""
