"""The learning protocols: the secure scorer shared by K2 and hill climbing, their oracles,
exact parameters, and the cost model of one secure term."""
