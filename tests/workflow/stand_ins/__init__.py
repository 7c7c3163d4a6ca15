"""Local stand-ins for what the workflow reaches outside the runner: TheRock's S3 bucket
(behind TheRock's own ``fetch_artifacts.py`` and ``_therock_utils`` names) and GitHub's
artifact store (behind ``gh``). Each serves a local directory and logs what it handed out
to ``$STAND_IN_LOG`` (one JSON line per call), so a test can check that a job fetched
exactly what the plan listed."""
