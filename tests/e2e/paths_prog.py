"""A program with a known structure, for test_e2e_paths.py: a Session whose
`cache` holds one large str (the largest path), users with avatars, and a
dict keyed by e-mail addresses (data: must not reach the trace unless
SERTRACE_KEYS=all).  Pickled at protocol 2 (no frames) so the test can
compute the cache's bytes from the pickle format by hand.  Prints one JSON
line: the payload's length and the addresses used."""
import json
import sys

import sertrace

EMAILS = ["alice.smith@example.com", "bob+tag@example.org", "carol@mail.example.net"]
BLOB = 300_000


class User:
    def __init__(self, name):
        self.name = name
        self.avatar = bytearray(1000)


class Session:
    def __init__(self):
        self.cache = {"blob": "x" * BLOB}
        self.users = [User("u%d" % i) for i in range(3)]
        self.contacts = {e: [i] for i, e in enumerate(EMAILS)}
        self.alias = self.cache  # a second reference: a memo GET of 2 bytes
        # a state key that is no identifier: data a __getstate__ made, hidden
        setattr(self, "not-an-identifier", [1, 2])


payload = sertrace.dumps(Session(), protocol=2)
print(json.dumps({"payload": len(payload), "emails": EMAILS, "blob": BLOB}))
sys.stdout.flush()
