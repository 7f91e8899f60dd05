"""Test-only helpers that must never ship: installed by ``make install``, copied into no image.

``chatseek_testing.telegram`` is the strict fake Telegram (``FakeTelegram``, ``fake_factory``);
``chatseek_testing.faults`` is the SIGKILL fault injection, a ``chatseek_core.db`` commit hook
installed in test-started processes by the ``sitecustomize`` in ``chatseek_testing/site``;
``chatseek_testing.services`` gives settings over a temp directory and serves a service
in-process; ``chatseek_testing.exports`` writes the messages of a Telegram Desktop export.
No ``src/`` of a shipped package imports this package (``tests/test_deploy.py`` pins it).
"""
