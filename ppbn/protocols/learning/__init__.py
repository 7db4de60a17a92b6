"""The learning protocols: the secure scorer shared by K2 and hill climbing, their oracles,
exact parameters, and the cost model of one secure term.

The modules, each importing only those listed before it: ``config`` (the job's options,
``K2Checkpoint``, ``score_bits``), ``terms`` (secure ln terms on one set of sessions),
``scorer`` (``SecureScorer``: table and family-score shares), ``lanes_agreement`` (the
terms lanes two parties agree on), ``k2`` and ``hc`` (the
secure oracles of the two searches), ``parameters`` (exact CPTs), ``learn``
(``learn_secure``, the entry that runs either search) and ``cost`` (the bytes of one
term, from ``terms``).
"""
