"""URL masking's functions on their own, no database (issue 46): what ``url_secrets``
finds, what ``display_url``, ``hide_secrets`` and ``short_error`` show. Expectations
written by hand from each URL. These run first in the url_masking mutants (fast:
tests/test_gap_masking.py and tests/test_password_masking.py start a PostgreSQL server
and real commands, and a mutant they would kill could overrun its time limit on a busy
machine first)."""

from __future__ import annotations

import pytest

from accelbench.store.base import display_url, hide_secrets, short_error, url_secrets

SECRET = "Pl4ntedS3cret-xyz"


def test_the_secret_of_a_mistyped_url_is_found_and_hidden() -> None:
    bare = f"postgresql:/planted:{SECRET}@db.example/accel"  # one slash: no '://'
    assert url_secrets(bare) == [SECRET]
    said = hide_secrets(f"could not connect with {SECRET} to db.example", bare)
    assert said == "could not connect with *** to db.example"
    assert url_secrets(f"planted:{SECRET}@db.example/accel") == [SECRET]
    assert display_url(bare) == "postgresql:/planted:***@db.example/accel"


def test_url_secrets_are_the_secrets_only_from_three_characters() -> None:
    # Query parameters that are not secrets are not hidden (a message naming sslmode
    # 'require' keeps it); a secret parameter's value is.
    assert url_secrets("postgresql://u:abc@h/db?sslmode=require") == ["abc"]
    assert url_secrets("postgresql://u@h/db?sslmode=require&password=xyz9") == ["xyz9"]
    # Shorter than 3 characters: not looked for in text (it would mask half a message).
    assert url_secrets("postgresql://u:ab@h/db") == []


def test_url_secrets_are_each_secret_once_longest_first() -> None:
    # The password as written (percent-encoded) and as the driver reads it, and a secret
    # query parameter: each once, the longest first (a shorter one inside a longer one
    # must not be replaced first).
    url = "postgresql://u:p%40ssw0rd@h/db?token=tok123&sslmode=require"
    assert url_secrets(url) == ["p%40ssw0rd", "p@ssw0rd", "tok123"]
    assert url_secrets("postgresql://u@h/db") == []
    assert url_secrets("sqlite:////data/r.db") == []


def test_a_secret_parameter_of_a_url_no_driver_parses_is_found() -> None:
    # make_url refuses these (a bad port, an open bracket, no scheme): the secret
    # parameter is found in the text alone.
    for url in ("postgresql://u@h:notaport/db?password=tok123",
                "mysql://u@[::1/db?password=tok123", "not a url?password=tok123"):
        assert url_secrets(url) == ["tok123"], url
        assert display_url(url) == url.replace("tok123", "***"), url


@pytest.mark.parametrize(("url", "shown"), [
    ("sqlite:////data/r.db", "/data/r.db"),
    ("results.db", "results.db"),
    (f"postgresql://u:{SECRET}@h:5432/db", "postgresql://u:***@h:5432/db"),
    (f"postgresql://u@h/db?password={SECRET}&sslmode=require",
     "postgresql://u@h/db?password=***&sslmode=require"),
    (f"postgresql://u:{SECRET}@h/db?PWD={SECRET}", "postgresql://u:***@h/db?PWD=***"),
    ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
])
def test_display_url_by_hand(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_hide_secrets_and_short_error_mask_the_url_and_its_secrets() -> None:
    url = f"postgresql://u:{SECRET}@h/db"
    said = hide_secrets(f"bad url {url}; password {SECRET} refused", url)
    assert said == "bad url postgresql://u:***@h/db; password *** refused"
    err = RuntimeError(f"connection to {url} failed: password {SECRET} refused\nDETAIL: x")
    assert short_error(err, url) == ("connection to postgresql://u:***@h/db failed: "
                                     "password *** refused")
    assert short_error(err) == f"connection to {url} failed: password {SECRET} refused"
    assert short_error(RuntimeError("")) == "RuntimeError"

    class Wrapped(Exception):
        orig = ValueError(f"driver: {SECRET} bad")

    assert short_error(Wrapped("outer"), url) == "driver: *** bad"
