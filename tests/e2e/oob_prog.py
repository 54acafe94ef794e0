"""Out-of-band buffers, for test_e2e_paths.py: a numpy array and a
bytearray pickled at protocol 5 with a buffer_callback, so their data goes
to the application, not into the payload.  Prints one JSON line: the
payload's length and each buffer's length.  Then the same array in band
(protocol 4), for the bytes its type owns."""
import json
import pickle

import numpy

import sertrace

arr = numpy.arange(65536, dtype=numpy.float64)  # 512 KiB of data
state = {"weights": arr, "blob": pickle.PickleBuffer(bytearray(1000))}
buffers = []
payload = sertrace.dumps(state, protocol=5, buffer_callback=buffers.append)
# the round trip: the buffers are the data
back = pickle.loads(payload, buffers=buffers)
assert (back["weights"] == arr).all()
# the same array in band, protocol 4: its data in the reduce's state
in_band = sertrace.dumps({"weights": arr}, protocol=4)
print(json.dumps({"payload": len(payload), "buffers": [len(b.raw()) for b in buffers],
                  "in_band": len(in_band), "nbytes": arr.nbytes}))
