"""Production loops on the answer log (seed 004 §4.3 and §8.3).

* :mod:`.logs` — the typed answer-log reader (answers and 👍/👎 feedback records).
* :mod:`.mine` — hard-case candidates mined from a log by the seed's four rules.
* :mod:`.shadow` — shadow replay of logged questions through a candidate prompt or model.
"""
