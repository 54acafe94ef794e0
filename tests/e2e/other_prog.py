"""An unrelated sertrace process for test_e2e_scope.py: prints {"pid"},
then dumps once per line read on stdin and answers {"len"} each time."""

import json
import os
import sys

import sertrace

print(json.dumps({"pid": os.getpid()}), flush=True)
for line in sys.stdin:
    print(json.dumps({"len": len(sertrace.dumps({"other": line.strip(), "n": [1, 2, 3]}))}),
          flush=True)
