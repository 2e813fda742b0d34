"""The offline baselines: deterministic algorithms served as providers.

``offline:extractive`` answers from the retrieved context (:mod:`.extractive`), and the
pipeline's rewrite and summary prompts (:mod:`.tasks`, :mod:`.replies`);
``offline:reference-judge`` scores a judge prompt against the golden answer
(:mod:`.reference_judge`). They need no network and no key, and every report names them as
baselines: their numbers are never a model's.
"""
